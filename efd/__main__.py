"""``python -m efd``: version, platform, probe answers, backend choice, and a
short self-check (see efd._selfcheck).  Exits non-zero if a check fails."""
import sys

from efd._selfcheck import main

if __name__ == "__main__":
    sys.exit(main())
