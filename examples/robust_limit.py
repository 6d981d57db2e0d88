"""A shared limit that survives killed workers: held units come back.

A pre-fork server in miniature.  The parent makes LIMIT = efd.Semaphore(2)
-- two "database connections" for the whole service -- and forks four
workers that handle requests inside `with LIMIT:`.  Then two workers are
killed with SIGKILL while they hold both units (what a server does to a
worker past its timeout, and what the OOM killer does).  With
multiprocessing.Semaphore the limit would be 0 for good; efd's `with`
block *holds* its unit, so a dead holder's unit comes back, and the
survivors go on.

The other use, consumption, is unchanged: a plain acquire() outside a
block takes a unit for good (a producer's item consumed), even if the
consumer dies afterwards.

Standard library and efd only.  Run: python examples/robust_limit.py
"""
import os
import signal
import time

import efd

LIMIT = efd.Semaphore(2)


def worker(report_fd, holds_forever):
    with LIMIT:                             # held by this process
        os.write(report_fd, b"h")
        if holds_forever:
            time.sleep(60)                  # killed in here
    os._exit(0)


def main():
    if LIMIT.backend not in ("futex", "pipe"):
        # The kernel-counter backends keep no books (EFD_BACKEND=eventfd).
        print("robust holds: not on the %r backend" % LIMIT.backend)
        LIMIT.close()
        return
    r, w = os.pipe()
    victims = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            worker(w, holds_forever=True)
        victims.append(pid)
    os.read(r, 1), os.read(r, 1)            # both units are held now
    print("held by two workers: value", LIMIT.value)
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    # The next look at the count settles the dead holders' books.
    print("after SIGKILL of both: value", LIMIT.value)

    # The survivors go on: two more workers take and give back a unit.
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            worker(w, holds_forever=False)
        os.waitpid(pid, 0)
    print("later workers done: value", LIMIT.value)

    # Consumption: a plain acquire() is not held, and is not given back.
    pid = os.fork()
    if pid == 0:
        LIMIT.acquire()
        os._exit(0)
    os.waitpid(pid, 0)
    print("after a consumer exited: value", LIMIT.value)
    LIMIT.release()
    LIMIT.close()


if __name__ == "__main__":
    main()
