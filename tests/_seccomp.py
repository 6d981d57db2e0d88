"""Install a seccomp-BPF filter that hides eventfd features, for tests.

This module lets the test-suite simulate kernels (or sandboxes) on which
``eventfd2(..., EFD_SEMAPHORE)`` fails with ``EINVAL`` or on which eventfd does
not exist at all (``ENOSYS``), so that the probe chain of SPEC §2
(``eventfd`` -> ``eventfd-readback`` -> ``pipe``) can be exercised on an
ordinary modern Linux machine.

It uses only the standard library and :mod:`ctypes`: no libseccomp, no
compiled helper, no root.  Root is not needed because the filter is installed
after ``prctl(PR_SET_NO_NEW_PRIVS, 1)``.

A seccomp filter can never be removed from a process, and it is inherited by
every thread created afterwards, by ``fork()`` children and across
``execve()``.  So **never install it in the pytest process itself**: use
:func:`run_in_filtered_child`, which starts a fresh interpreter, installs the
filter first thing, and then runs the given code.

Public API
----------
``supported() -> (bool, str)``
    Whether filters can be installed here; the string is a skip reason.
``set_no_new_privs() -> None``
    ``prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)``.
``build_filter(mode, machine=None) -> list of (code, jt, jf, k)``
    The BPF program, as plain tuples (pure; safe to call anywhere).
``install_filter(mode) -> None``
    Install the filter for *mode* in the current process (irreversible).
``run_in_filtered_child(mode, code, timeout=60, env=None, cwd=None)``
    Run ``code`` in ``sys.executable -c`` under the filter; returns the
    :class:`subprocess.CompletedProcess` (``text=True``, output captured).

Modes
-----
``"no-semaphore"``
    ``eventfd2`` fails with ``EINVAL`` when ``EFD_SEMAPHORE`` (1) is set in the
    lower 32 bits of its flags argument (``args[1]``).  Everything else,
    including ``eventfd2`` without ``EFD_SEMAPHORE``, is allowed.  This is what
    a 2.6.27-2.6.29 kernel does.
``"no-eventfd"``
    ``eventfd2`` and, where it exists, the legacy ``eventfd`` syscall fail with
    ``ENOSYS``.  Everything else is allowed.
``"no-epoll"``
    ``epoll_create1`` and, where it exists, ``epoll_create`` fail with
    ``ENOSYS``: a system without epoll, where every waiter polls.
``"no-memfd"``
    ``memfd_create`` fails with ``ENOSYS``: a sandbox (or a kernel before
    3.17) where the memory backends' pages come from ``shm_open`` and cannot
    be sealed.
``"no-futex-waitv"``
    ``futex_waitv`` fails with ``ENOSYS``: a kernel before 5.16, or a
    container profile older than the call, where the ``futex`` backend
    goes without its death bell.
``"no-pidfd"``
    ``pidfd_open`` fails with ``ENOSYS``: a kernel before 5.3, or a sandbox
    that refuses it, where nobody tells a sleeper that a process holding
    units died and the ``futex`` backend's sleepers look again every 100 ms
    while another process holds units.
``"no-io-uring"``
    ``io_uring_setup``, ``io_uring_enter`` and ``io_uring_register`` fail
    with ``EPERM``, as under Docker's default seccomp profile: installed
    before efd's probe, event loops on ``futex`` objects wait on the
    readiness descriptor; installed after a loop's ring was made, its next
    submission fails and the loop goes back to that way mid-wait.
``"kill-at-shared-futex-wake"``
    The process is killed (``SECCOMP_RET_KILL_PROCESS``, as by SIGSYS) when
    it calls ``futex(addr, FUTEX_WAKE, ...)`` on a process-shared word (the
    operation is exactly ``FUTEX_WAKE``, no private flag): the ``futex``
    backend's release dies there after it added its units and before it
    woke anyone -- the death the futex backend's bell is for.  C library
    and interpreter locks use private futexes and go on.

The filter program
------------------
Classic BPF over ``struct seccomp_data``::

    struct seccomp_data {
        int   nr;                    /* offset  0 */
        __u32 arch;                  /* offset  4 */
        __u64 instruction_pointer;   /* offset  8 */
        __u64 args[6];               /* offset 16, 8 bytes each */
    };

It first checks ``arch`` against the native ``AUDIT_ARCH_*`` value and allows
any syscall made with a different ABI (e.g. i386 compat on x86_64): their
syscall numbers mean different things, so matching them would be wrong.
Syscall numbers are compared with exact equality, so on x86_64 the x32 ABI
numbers (which carry bit ``0x40000000``) never match and are allowed too.
That is deliberate and harmless: this is a test harness, not a sandbox.

Supported architectures: x86_64 (``eventfd`` = 284, ``eventfd2`` = 290) and
aarch64 (``eventfd2`` = 19; there is no legacy ``eventfd``).  On any other
architecture :func:`build_filter`/:func:`install_filter` raise
:class:`UnsupportedError` and :func:`supported` returns ``(False, reason)``.

Threads
-------
The filter is installed with ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
&prog)``, which applies to the calling thread only (and to threads it creates
later).  :func:`install_filter` therefore refuses to run when Python already
has more than one thread; the child prelude of :func:`run_in_filtered_child`
installs it before any thread exists.
"""

import ctypes
import ctypes.util
import errno
import os
import platform
import subprocess
import sys
import threading
from typing import Dict, List, Optional, Tuple

__all__ = [
    "MODES",
    "SKIP_EXIT_CODE",
    "UnsupportedError",
    "supported",
    "set_no_new_privs",
    "build_filter",
    "install_filter",
    "run_in_filtered_child",
]

#: Modes accepted by :func:`build_filter` and :func:`install_filter`.
MODES = ("no-semaphore", "no-eventfd", "no-epoll", "no-memfd",
         "no-futex-waitv", "no-io-uring", "no-pidfd",
         "kill-at-shared-futex-wake")

#: Exit status of a :func:`run_in_filtered_child` child when the filter could
#: not be installed because seccomp is unsupported here (the automake "skip"
#: convention).  Tests can map it to ``pytest.skip``.
SKIP_EXIT_CODE = 77


class UnsupportedError(RuntimeError):
    """Seccomp filtering is not available here (OS, arch, kernel, ctypes)."""


# --- constants (from <linux/prctl.h>, <linux/seccomp.h>, <linux/filter.h>,
# --- <linux/audit.h>, <sys/eventfd.h>) -----------------------------------

PR_SET_SECCOMP = 22
PR_GET_SECCOMP = 21
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
SECCOMP_MODE_FILTER = 2

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_KILL_PROCESS = 0x80000000
FUTEX_WAKE = 1
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_DATA = 0x0000FFFF

# BPF instruction classes / fields.
BPF_LD = 0x00
BPF_JMP = 0x05
BPF_RET = 0x06
BPF_W = 0x00
BPF_ABS = 0x20
BPF_JEQ = 0x10
BPF_JSET = 0x40
BPF_K = 0x00

AUDIT_ARCH_X86_64 = 0xC000003E  # EM_X86_64 | __AUDIT_ARCH_64BIT | _LE
AUDIT_ARCH_AARCH64 = 0xC00000B7  # EM_AARCH64 | __AUDIT_ARCH_64BIT | _LE

EFD_SEMAPHORE = 1

# offsetof(struct seccomp_data, ...)
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARGS = 16


def _off_arg_low32(i):
    # type: (int) -> int
    """Offset of the lower 32 bits of seccomp_data.args[i]."""
    base = _OFF_ARGS + 8 * i
    return base if sys.byteorder == "little" else base + 4


# Per-architecture data: audit arch and the syscall numbers we filter.
# "eventfd" is None where the legacy syscall does not exist.
_ARCHES = {
    "x86_64": {"audit": AUDIT_ARCH_X86_64, "eventfd": 284, "eventfd2": 290,
               "epoll_create": 213, "epoll_create1": 291, "memfd_create": 319,
               "futex": 202, "futex_waitv": 449, "io_uring_setup": 425,
               "io_uring_enter": 426, "io_uring_register": 427,
               "pidfd_open": 434},
    "aarch64": {"audit": AUDIT_ARCH_AARCH64, "eventfd": None, "eventfd2": 19,
                "epoll_create": None, "epoll_create1": 20, "memfd_create": 279,
                "futex": 98, "futex_waitv": 449, "io_uring_setup": 425,
                "io_uring_enter": 426, "io_uring_register": 427,
                "pidfd_open": 434},
}  # type: Dict[str, Dict[str, Optional[int]]]
_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def _arch_info(machine=None):
    # type: (Optional[str]) -> Dict[str, Optional[int]]
    m = (machine if machine is not None else platform.machine()).lower()
    m = _ARCH_ALIASES.get(m, m)
    if m not in _ARCHES:
        raise UnsupportedError(
            "seccomp test filter: unsupported architecture %r "
            "(supported: %s)" % (m, ", ".join(sorted(_ARCHES)))
        )
    # A 32-bit interpreter on a 64-bit kernel reports the 64-bit machine but
    # makes syscalls with another ABI (different numbers and audit arch).
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        raise UnsupportedError(
            "seccomp test filter: 32-bit interpreter on %r is not supported" % m
        )
    return _ARCHES[m]


# --- BPF program construction ---------------------------------------------

Insn = Tuple[int, int, int, int]  # (code, jt, jf, k)


def _stmt(code, k):
    # type: (int, int) -> Insn
    return (code, 0, 0, k)


def _jump(code, k, jt, jf):
    # type: (int, int, int, int) -> Insn
    return (code, jt, jf, k)


def build_filter(mode, machine=None):
    # type: (str, Optional[str]) -> List[Insn]
    """Return the BPF program for *mode* as a list of ``(code, jt, jf, k)``.

    Pure function: it installs nothing.  *machine* defaults to
    ``platform.machine()``.  Raises :class:`ValueError` for an unknown mode and
    :class:`UnsupportedError` for an unsupported architecture.
    """
    if mode not in MODES:
        raise ValueError("unknown seccomp mode %r (expected one of %r)" % (mode, MODES))
    info = _arch_info(machine)
    audit = info["audit"]
    nr_eventfd2 = info["eventfd2"]
    nr_eventfd = info["eventfd"]

    ld_abs = BPF_LD | BPF_W | BPF_ABS
    jeq = BPF_JMP | BPF_JEQ | BPF_K
    jset = BPF_JMP | BPF_JSET | BPF_K
    ret = BPF_RET | BPF_K

    # Jump offsets are relative to the *next* instruction.  Each program ends
    # with [..., RET_ERRNO, RET_ALLOW], so "to ALLOW" / "to ERRNO" offsets are
    # computed from the instruction's index.
    if mode == "kill-at-shared-futex-wake":
        prog = [
            _stmt(ld_abs, _OFF_ARCH),                   # 0: A = arch
            _jump(jeq, audit, 0, 5),                    # 1: foreign ABI -> 7 ALLOW
            _stmt(ld_abs, _OFF_NR),                     # 2: A = nr
            _jump(jeq, info["futex"], 0, 3),            # 3: not futex -> 7 ALLOW
            _stmt(ld_abs, _off_arg_low32(1)),           # 4: A = (u32)args[1]
            _jump(jeq, FUTEX_WAKE, 0, 1),               # 5: shared WAKE ? 6 : 7
            _stmt(ret, SECCOMP_RET_KILL_PROCESS),       # 6: killed
            _stmt(ret, SECCOMP_RET_ALLOW),              # 7: allow
        ]
        return prog
    if mode == "no-semaphore":
        err = SECCOMP_RET_ERRNO | (errno.EINVAL & SECCOMP_RET_DATA)
        prog = [
            _stmt(ld_abs, _OFF_ARCH),                   # 0: A = arch
            _jump(jeq, audit, 0, 5),                    # 1: foreign ABI -> 7 ALLOW
            _stmt(ld_abs, _OFF_NR),                     # 2: A = nr
            _jump(jeq, nr_eventfd2, 0, 3),              # 3: not eventfd2 -> 7 ALLOW
            _stmt(ld_abs, _off_arg_low32(1)),           # 4: A = (u32)args[1]
            _jump(jset, EFD_SEMAPHORE, 0, 1),           # 5: A & 1 ? 6 ERRNO : 7 ALLOW
            _stmt(ret, err),                            # 6: return -EINVAL
            _stmt(ret, SECCOMP_RET_ALLOW),              # 7: allow
        ]
    else:  # "no-eventfd", "no-epoll", "no-memfd", "no-futex-waitv": ENOSYS;
        # "no-pidfd": ENOSYS; "no-io-uring": EPERM (what Docker's default
    # profile answers)
        code = errno.EPERM if mode == "no-io-uring" else errno.ENOSYS
        err = SECCOMP_RET_ERRNO | (code & SECCOMP_RET_DATA)
        if mode == "no-io-uring":
            nrs = [info["io_uring_setup"], info["io_uring_enter"],
                   info["io_uring_register"]]
        elif mode == "no-eventfd":
            nrs = [nr_eventfd2, nr_eventfd]
        elif mode == "no-memfd":
            nrs = [info["memfd_create"]]
        elif mode == "no-futex-waitv":
            nrs = [info["futex_waitv"]]
        elif mode == "no-pidfd":
            nrs = [info["pidfd_open"]]
        else:
            nrs = [info["epoll_create1"], info["epoll_create"]]
        nrs = [nr for nr in nrs if nr is not None]
        n = len(nrs)
        # Layout: 0 ld arch, 1 jeq arch, 2 ld nr, 3..3+n-1 jeq nr,
        #         3+n ret ALLOW, 4+n ret ERRNO
        allow_idx = 3 + n
        errno_idx = 4 + n
        prog = [
            _stmt(ld_abs, _OFF_ARCH),
            _jump(jeq, audit, 0, allow_idx - 2),
            _stmt(ld_abs, _OFF_NR),
        ]
        for i, nr in enumerate(nrs):
            idx = 3 + i
            prog.append(_jump(jeq, nr, errno_idx - idx - 1, 0))
        prog.append(_stmt(ret, SECCOMP_RET_ALLOW))
        prog.append(_stmt(ret, err))
    return prog


# --- ctypes plumbing ----------------------------------------------------------


class _SockFilter(ctypes.Structure):
    """struct sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; };"""

    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    """struct sock_fprog { unsigned short len; struct sock_filter *filter; };"""

    _fields_ = [
        ("len", ctypes.c_ushort),
        ("filter", ctypes.POINTER(_SockFilter)),
    ]


_libc = None  # type: Optional[ctypes.CDLL]


def _get_libc():
    # type: () -> ctypes.CDLL
    global _libc
    if _libc is None:
        if not sys.platform.startswith("linux"):
            raise UnsupportedError("seccomp is Linux-only (sys.platform=%r)" % sys.platform)
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            lib.prctl  # noqa: B018 - make sure the symbol exists
        except (OSError, AttributeError) as exc:
            raise UnsupportedError("cannot load libc prctl via ctypes: %s" % exc)
        _libc = lib
    return _libc


def _prctl(option, arg2=0, arg3=0, arg4=0, arg5=0):
    # type: (int, int, int, int, int) -> int
    """Call prctl(2); raise OSError on failure.

    prctl is variadic in glibc, so every argument is passed as an explicit
    full-width ``unsigned long`` (pointers are passed as their address).
    """
    libc = _get_libc()
    rc = libc.prctl(
        ctypes.c_int(option),
        ctypes.c_ulong(arg2),
        ctypes.c_ulong(arg3),
        ctypes.c_ulong(arg4),
        ctypes.c_ulong(arg5),
    )
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, "prctl(%d): %s" % (option, os.strerror(e)))
    return rc


def set_no_new_privs():
    # type: () -> None
    """``prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)``.

    Required before an unprivileged process may install a seccomp filter.
    Irreversible; it only stops execve() from granting privileges
    (setuid bits, file capabilities).
    """
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def install_filter(mode, no_new_privs=True):
    # type: (str, bool) -> None
    """Install the seccomp filter for *mode* in the **current** process.

    Irreversible, and inherited by later threads, fork() children and
    exec'd programs -- call it only in a throw-away child process (see
    :func:`run_in_filtered_child`).  Sets no_new_privs first unless
    *no_new_privs* is false (then the caller needs CAP_SYS_ADMIN).

    Raises ValueError (bad mode), UnsupportedError (arch/OS/ctypes), or
    OSError (the kernel refused, e.g. no CONFIG_SECCOMP_FILTER: EINVAL).
    """
    insns = build_filter(mode)  # validates mode and arch before any prctl
    if threading.active_count() > 1:
        raise RuntimeError(
            "install_filter() must run before any other thread is started "
            "(prctl(PR_SET_SECCOMP) only filters the calling thread)"
        )
    arr = (_SockFilter * len(insns))(*[_SockFilter(c, jt, jf, k) for c, jt, jf, k in insns])
    prog = _SockFprog(len(insns), ctypes.cast(arr, ctypes.POINTER(_SockFilter)))
    if no_new_privs:
        set_no_new_privs()
    _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog))
    # `arr` and `prog` stay referenced until here; the kernel copies the
    # program during the call, so they may be freed afterwards.


# --- support probe -------------------------------------------------------------

_supported_cache = None  # type: Optional[Tuple[bool, str]]


def supported():
    # type: () -> Tuple[bool, str]
    """Return ``(True, "")`` if filters can be installed here, else
    ``(False, reason)`` suitable for ``pytest.skip(reason)``.

    Static checks first (Linux, ctypes, libc prctl, known arch, 64-bit), then
    -- once per process, cached -- a real probe: a child interpreter installs
    the "no-semaphore" filter and exits.  That catches kernels without
    CONFIG_SECCOMP_FILTER and outer sandboxes that forbid prctl/seccomp.
    """
    global _supported_cache
    if _supported_cache is not None:
        return _supported_cache
    try:
        _get_libc()
        build_filter("no-semaphore")
    except UnsupportedError as exc:
        _supported_cache = (False, str(exc))
        return _supported_cache
    try:
        proc = run_in_filtered_child("no-semaphore", "pass", timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        _supported_cache = (False, "seccomp probe child failed to run: %s" % exc)
        return _supported_cache
    if proc.returncode == 0:
        _supported_cache = (True, "")
    else:
        detail = (proc.stderr or "").strip().splitlines()
        _supported_cache = (
            False,
            "cannot install a seccomp filter here (probe exit %d): %s"
            % (proc.returncode, detail[-1] if detail else "no output"),
        )
    return _supported_cache


# --- child runner ----------------------------------------------------------------

# Imports this file by path (tests/ need not be a package), installs the
# filter, then runs the caller's code as __main__ so its tracebacks show
# "<filtered-child>" line numbers that match the code string.
_PRELUDE = """\
import importlib.util as _u, sys as _s
_spec = _u.spec_from_file_location("_efd_test_seccomp", {path!r})
_m = _u.module_from_spec(_spec)
_spec.loader.exec_module(_m)
try:
    _m.install_filter({mode!r})
except _m.UnsupportedError as _e:
    _s.stderr.write("seccomp unsupported: %s\\n" % (_e,))
    _s.exit(_m.SKIP_EXIT_CODE)
del _u, _s, _spec, _m
_code = compile({code!r}, "<filtered-child>", "exec")
_g = {{"__name__": "__main__", "__builtins__": __builtins__}}
exec(_code, _g)
"""


def run_in_filtered_child(mode, code, timeout=60, env=None, cwd=None):
    # type: (str, str, float, Optional[Dict[str, str]], Optional[str]) -> subprocess.CompletedProcess
    """Run *code* in ``sys.executable -c`` after installing filter *mode*.

    Returns the :class:`subprocess.CompletedProcess` with ``stdout`` and
    ``stderr`` captured as text.  The return code is not checked: a failed
    assertion in *code* shows up as a non-zero ``returncode`` and a traceback
    in ``stderr``; ``SKIP_EXIT_CODE`` means seccomp is unsupported.  If the
    child runs longer than *timeout* seconds it is killed and
    :class:`subprocess.TimeoutExpired` propagates (so a hang fails fast).

    *env* and *cwd* are passed to :func:`subprocess.run` (default: inherit).
    """
    if mode not in MODES:
        raise ValueError("unknown seccomp mode %r (expected one of %r)" % (mode, MODES))
    script = _PRELUDE.format(path=os.path.abspath(__file__), mode=mode, code=code)
    return subprocess.run(
        [sys.executable, "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,  # == text=True, spelled for Python 3.6+
        timeout=timeout,
        env=env,
        cwd=cwd,
    )
