"""Self-tests for tests/_seccomp.py, the seccomp-BPF test harness.

The filters are only ever installed in child interpreters
(``run_in_filtered_child``); the pytest process itself stays unfiltered,
which ``test_parent_unaffected`` checks.
"""

import errno
import importlib.util
import os
import struct
import subprocess
import sys
import textwrap

import pytest

# tests/ is not necessarily a package: load the harness by path.
_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "_efd_test_seccomp", os.path.join(_HERE, "_seccomp.py")
)
sc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sc)

HAS_OS_EVENTFD = hasattr(os, "eventfd")


def _read_status():
    try:
        with open("/proc/self/status") as f:
            return dict(l.split(":", 1) for l in f if l.startswith(("Seccomp", "NoNewPrivs")))
    except OSError:
        return {}


# The pytest process's own seccomp state before any harness code ran (it may
# legitimately be non-zero inside a container); it must never change.
_PARENT_STATUS_AT_IMPORT = _read_status()

needs_seccomp = pytest.mark.skipif(
    not sc.supported()[0], reason="seccomp unavailable: %s" % (sc.supported()[1],)
)
needs_os_eventfd = pytest.mark.skipif(
    not HAS_OS_EVENTFD, reason="os.eventfd needs Python 3.10+ on Linux"
)


def run(mode, code, **kw):
    """Run dedented *code* under *mode*; fail with the child's output on error."""
    proc = sc.run_in_filtered_child(mode, textwrap.dedent(code), **kw)
    if proc.returncode == sc.SKIP_EXIT_CODE:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, "child failed (rc=%d)\nstdout:\n%s\nstderr:\n%s" % (
        proc.returncode,
        proc.stdout,
        proc.stderr,
    )
    return proc


# --- pure checks: run the generated BPF programs in a tiny interpreter -------


def _bpf_eval(prog, data):
    """Evaluate a classic-BPF program (only the opcodes the harness emits)."""
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code == 0x15:  # jeq #k
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x45:  # jset #k
            pc += 1 + (jt if acc & k else jf)
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError("unexpected opcode %#x" % code)


def _seccomp_data(nr, arch, args=(0, 0, 0, 0, 0, 0)):
    return struct.pack("=iIQ6Q", nr, arch, 0, *args)


ALLOW = sc.SECCOMP_RET_ALLOW
EINVAL_RET = sc.SECCOMP_RET_ERRNO | errno.EINVAL
ENOSYS_RET = sc.SECCOMP_RET_ERRNO | errno.ENOSYS


@pytest.mark.parametrize(
    "machine,arch,efd2,efd,other",
    [
        ("x86_64", sc.AUDIT_ARCH_X86_64, 290, 284, 0),
        ("aarch64", sc.AUDIT_ARCH_AARCH64, 19, None, 63),
    ],
)
def test_program_semantics(machine, arch, efd2, efd, other):
    ns = sc.build_filter("no-semaphore", machine)
    ne = sc.build_filter("no-eventfd", machine)
    nm = sc.build_filter("no-memfd", machine)
    d = _seccomp_data
    # no-semaphore
    assert _bpf_eval(ns, d(efd2, arch, (0, 1, 0, 0, 0, 0))) == EINVAL_RET
    assert _bpf_eval(ns, d(efd2, arch, (0, 0x80801, 0, 0, 0, 0))) == EINVAL_RET
    assert _bpf_eval(ns, d(efd2, arch, (0, 1 << 32, 0, 0, 0, 0))) == ALLOW  # high bits ignored
    assert _bpf_eval(ns, d(efd2, arch, (0, 0x80800, 0, 0, 0, 0))) == ALLOW
    assert _bpf_eval(ns, d(efd2, arch, (1, 0, 0, 0, 0, 0))) == ALLOW  # args[0] irrelevant
    assert _bpf_eval(ns, d(other, arch, (0, 1, 0, 0, 0, 0))) == ALLOW
    assert _bpf_eval(ns, d(efd2, 0x40000003, (0, 1, 0, 0, 0, 0))) == ALLOW  # i386 ABI
    # no-eventfd
    assert _bpf_eval(ne, d(efd2, arch)) == ENOSYS_RET
    assert _bpf_eval(ne, d(efd2, arch, (0, 1, 0, 0, 0, 0))) == ENOSYS_RET
    if efd is not None:
        assert _bpf_eval(ne, d(efd, arch)) == ENOSYS_RET
    assert _bpf_eval(ne, d(other, arch)) == ALLOW
    assert _bpf_eval(ne, d(efd2, 0x40000003)) == ALLOW
    # no-memfd
    memfd = {"x86_64": 319, "aarch64": 279}[machine]
    assert _bpf_eval(nm, d(memfd, arch)) == ENOSYS_RET
    assert _bpf_eval(nm, d(efd2, arch)) == ALLOW
    assert _bpf_eval(nm, d(other, arch)) == ALLOW
    assert _bpf_eval(nm, d(memfd, 0x40000003)) == ALLOW
    if machine == "x86_64":  # x32 numbers carry bit 0x40000000: allowed
        assert _bpf_eval(ne, d(0x40000000 | efd2, arch)) == ALLOW
        assert _bpf_eval(ns, d(0x40000000 | efd2, arch, (0, 1, 0, 0, 0, 0))) == ALLOW


def test_bad_mode_and_unknown_arch_raise_before_installing():
    with pytest.raises(ValueError):
        sc.build_filter("bogus")
    with pytest.raises(ValueError):
        sc.install_filter("bogus")
    with pytest.raises(ValueError):
        sc.run_in_filtered_child("bogus", "pass")
    with pytest.raises(sc.UnsupportedError, match="unsupported architecture"):
        sc.build_filter("no-eventfd", machine="riscv64")


def test_supported_shape():
    ok, reason = sc.supported()
    assert isinstance(ok, bool) and isinstance(reason, str)
    assert ok or reason


# --- real filters in child processes ------------------------------------------


@needs_seccomp
@needs_os_eventfd
def test_no_semaphore():
    proc = run(
        "no-semaphore",
        """
        import errno, os
        try:
            os.eventfd(0, os.EFD_SEMAPHORE)
        except OSError as e:
            assert e.errno == errno.EINVAL, e
        else:
            raise AssertionError("EFD_SEMAPHORE was not rejected")
        try:
            os.eventfd(0, os.EFD_SEMAPHORE | os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except OSError as e:
            assert e.errno == errno.EINVAL, e
        else:
            raise AssertionError("EFD_SEMAPHORE|... was not rejected")
        for flags in (0, os.EFD_NONBLOCK | os.EFD_CLOEXEC):
            fd = os.eventfd(0, flags)
            os.eventfd_write(fd, 3)
            assert os.eventfd_read(fd) == 3
            os.close(fd)
        print("OK")
        """,
    )
    assert proc.stdout.strip() == "OK"


@needs_seccomp
@needs_os_eventfd
def test_no_eventfd():
    proc = run(
        "no-eventfd",
        """
        import errno, os
        for flags in (0, os.EFD_SEMAPHORE, os.EFD_NONBLOCK | os.EFD_CLOEXEC):
            try:
                os.eventfd(0, flags)
            except OSError as e:
                assert e.errno == errno.ENOSYS, e
            else:
                raise AssertionError("eventfd(0, %d) was allowed" % flags)
        r, w = os.pipe()   # unrelated syscalls still work
        os.write(w, b"x"); assert os.read(r, 1) == b"x"
        print("OK")
        """,
    )
    assert proc.stdout.strip() == "OK"


@needs_seccomp
@pytest.mark.skipif(sc.platform.machine() != "x86_64", reason="legacy eventfd is x86_64-only here")
def test_no_eventfd_blocks_legacy_syscall_x86_64():
    # The legacy eventfd(2) syscall (284) has no libc wrapper; call it raw.
    proc = run(
        "no-eventfd",
        """
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        for nr in (284, 290):
            rc = libc.syscall(ctypes.c_long(nr), ctypes.c_uint(0), ctypes.c_int(0))
            assert rc == -1 and ctypes.get_errno() == errno.ENOSYS, (nr, rc, ctypes.get_errno())
        print("OK")
        """,
    )
    assert proc.stdout.strip() == "OK"


@needs_seccomp
@pytest.mark.skipif(sc.platform.machine() != "x86_64", reason="legacy eventfd is x86_64-only here")
def test_no_semaphore_leaves_legacy_syscall_x86_64():
    # Legacy eventfd(initval) takes no flags and must stay allowed.
    proc = run(
        "no-semaphore",
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(ctypes.c_long(284), ctypes.c_uint(0))
        assert fd >= 0, ctypes.get_errno()
        os.close(fd)
        print("OK")
        """,
    )
    assert proc.stdout.strip() == "OK"


@needs_seccomp
@needs_os_eventfd
@pytest.mark.parametrize("mode,err", [("no-semaphore", "EINVAL"), ("no-eventfd", "ENOSYS")])
def test_filter_inherited_by_threads_fork_and_exec(mode, err):
    # efd's tests use threads and multiprocessing (fork/spawn/forkserver):
    # the filter must follow into all of them.
    proc = run(
        mode,
        """
        import errno, os, subprocess, sys, threading
        ERR = errno.%s
        def check():
            try:
                os.eventfd(0, os.EFD_SEMAPHORE)
            except OSError as e:
                assert e.errno == ERR, e
            else:
                raise AssertionError("not filtered")
        check()
        box = []
        def target():
            try:
                check()
                box.append("ok")
            except BaseException as e:
                box.append(e)
        t = threading.Thread(target=target); t.start(); t.join()
        assert box == ["ok"], box
        pid = os.fork()
        if pid == 0:
            try:
                check(); os._exit(0)
            except BaseException:
                os._exit(1)
        assert os.waitpid(pid, 0)[1] == 0, "fork child not filtered"
        code = "import os\\ntry:\\n os.eventfd(0, os.EFD_SEMAPHORE)\\nexcept OSError as e:\\n raise SystemExit(e.errno)\\n"
        rc = subprocess.call([sys.executable, "-c", code])
        assert rc == ERR, ("exec'd child", rc)
        print("OK")
        """ % err,
    )
    assert proc.stdout.strip() == "OK"


@needs_seccomp
def test_child_failure_is_reported():
    proc = sc.run_in_filtered_child("no-eventfd", "import sys\nprint('out')\nraise SystemExit(3)")
    assert proc.returncode == 3
    assert proc.stdout == "out\n"
    proc = sc.run_in_filtered_child("no-eventfd", "assert 1 == 2, 'boom'")
    assert proc.returncode == 1
    assert "boom" in proc.stderr and "<filtered-child>" in proc.stderr


@needs_seccomp
def test_timeout_fails_fast():
    with pytest.raises(subprocess.TimeoutExpired):
        sc.run_in_filtered_child("no-eventfd", "import time\ntime.sleep(60)", timeout=1)


@needs_seccomp
def test_env_and_cwd_passed_through(tmp_path):
    env = dict(os.environ, EFD_SEEN="yes")
    proc = run(
        "no-semaphore",
        "import os\nprint(os.environ['EFD_SEEN'], os.getcwd())",
        env=env,
        cwd=str(tmp_path),
    )
    assert proc.stdout.split() == ["yes", os.path.realpath(str(tmp_path))]


@needs_seccomp
def test_parent_unaffected():
    # Make sure at least one filtered child ran in this process's lifetime.
    run("no-eventfd", "pass")
    run("no-semaphore", "pass")
    sc.supported()  # the probe child has run too
    assert _read_status() == _PARENT_STATUS_AT_IMPORT
    if HAS_OS_EVENTFD:
        for flags in (0, os.EFD_SEMAPHORE, os.EFD_NONBLOCK | os.EFD_CLOEXEC):
            fd = os.eventfd(1, flags)
            assert os.eventfd_read(fd) == 1
            os.close(fd)
