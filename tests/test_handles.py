"""Handles: every efd object, whole, for an exec'd program (pass_fds and a
handle in an environment variable), for an unrelated process over a Unix
socket, and pickles that stay in one process (SPEC §6 "Handles").

Each transport test runs every class (EventFD in both modes, Semaphore,
BoundedSemaphore, Event) on the backend under test in one child, with waits
on both sides: the child waits and the parent gives, then the parent waits
and the child gives.  Every wait is bounded.
"""
import array
import contextlib
import errno
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

import efd
from conftest import (KERNEL_BACKENDS, PROMPT, REPO, child_env, full_or,
                      kernel_eventfd_available, open_fd_count)

LIMIT = PROMPT * 4

KINDS = ("EventFD/semaphore", "EventFD/counter", "Semaphore",
         "BoundedSemaphore", "Event")


def count(obj):
    # The count now (SPEC's `value`, where this efd has it).
    ev = obj if isinstance(obj, efd.EventFD) else obj._ev
    value = getattr(ev, "value", None)
    return ev._peek() if value is None else value


def make_kind(kind, backend):
    if kind == "EventFD/semaphore":
        return efd.EventFD(0, semaphore=True, backend=backend)
    if kind == "EventFD/counter":
        return efd.EventFD(0, backend=backend)
    if kind == "Semaphore":
        return efd.Semaphore(0, backend=backend)
    if kind == "BoundedSemaphore":
        sem = efd.BoundedSemaphore(2, backend=backend)
        assert sem.acquire(False) and sem.acquire(False)
        return sem
    return efd.Event(backend=backend)


def describe(obj):
    ev = obj if isinstance(obj, efd.EventFD) else obj._ev
    return "%s %s %s %s" % (type(obj).__name__, ev.backend,
                            "semaphore" if ev.semaphore else "counter",
                            getattr(obj, "_bound", None))


# The child's side of one object: report what it rebuilt, wait for the
# parent's unit (or set()), say so, then give back after a pause, so that
# the parent is really waiting when it comes.
CHILD_SIDE = """
import sys, time, efd

LIMIT = %r

def describe(obj):
    ev = obj if isinstance(obj, efd.EventFD) else obj._ev
    return "%%s %%s %%s %%s" %% (type(obj).__name__, ev.backend,
                              "semaphore" if ev.semaphore else "counter",
                              getattr(obj, "_bound", None))

def serve(objs):
    for o in objs:
        print(describe(o), flush=True)
        if isinstance(o, efd.Event):
            got = o.wait(LIMIT)
            o.clear()
            print("took", got, flush=True)
            sys.stdin.readline()
            time.sleep(0.05)
            o.set()
        else:
            got = o.acquire(timeout=LIMIT)
            print("took", got, flush=True)
            time.sleep(0.05)
            o.release(2)
        o.close()
    print("done", flush=True)
""" % (LIMIT,)


def parent_side(objs, proc):
    for o in objs:
        assert proc.stdout.readline().strip() == describe(o)
        time.sleep(0.02)                  # let the child block
        if isinstance(o, efd.Event):
            o.set()
        else:
            o.release()
        assert proc.stdout.readline().strip() == "took True"
        if isinstance(o, efd.Event):
            assert not o.is_set()         # the child's clear() shows here
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert o.wait(LIMIT)
        elif not isinstance(o, efd.EventFD) or o.semaphore:
            assert o.acquire(timeout=LIMIT)
            assert o.acquire(timeout=LIMIT)
            assert not o.acquire(False)
        else:
            assert o.acquire(timeout=LIMIT)   # takes both units
            assert count(o) == 0
    assert proc.stdout.readline().strip() == "done"
    assert proc.wait(LIMIT) == 0, proc.stderr.read()


def test_every_class_through_exec(backend, popen_py):
    objs = [make_kind(kind, backend) for kind in KINDS]
    try:
        handles = [o.handle() for o in objs]
        assert all(isinstance(h, efd.Handle) and isinstance(h, str)
                   for h in handles)
        env = {"EFD_H%d" % i: h for i, h in enumerate(handles)}
        fds = sorted(fd for h in handles for fd in h.fds)
        proc = popen_py(CHILD_SIDE + """
import os
serve([efd.from_handle(os.environ["EFD_H%d" % i]) for i in range(5)])
""", env=env, pass_fds=fds, stdin=subprocess.PIPE)
        parent_side(objs, proc)
    finally:
        for o in objs:
            o.close()


def test_every_class_over_a_unix_socket(backend, popen_py, tmp_path):
    # The child is unrelated: it inherits nothing, and connects by path.
    path = str(tmp_path / "efd.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    objs = [make_kind(kind, backend) for kind in KINDS]
    try:
        server.bind(path)
        server.listen(1)
        server.settimeout(LIMIT)
        proc = popen_py(CHILD_SIDE + """
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(%r)
objs = [efd.recv_handle(s) for i in range(5)]
s.close()
serve(objs)
""" % path, stdin=subprocess.PIPE)
        conn, _ = server.accept()
        with conn:
            for o in objs:
                efd.send_handle(conn, o)
        parent_side(objs, proc)
    finally:
        server.close()
        for o in objs:
            o.close()


@pytest.mark.parametrize("kind", [socket.SOCK_DGRAM, socket.SOCK_SEQPACKET],
                         ids=["dgram", "seqpacket"])
def test_send_handle_on_message_sockets(backend, kind, run_py):
    a, b = socket.socketpair(socket.AF_UNIX, kind)
    with a, b, contextlib.closing(
            efd.BoundedSemaphore(3, backend=backend)) as sem:
        efd.send_handle(a, sem)
        efd.send_handle(a, sem)
        # In this process the descriptors are owned already: refused, and
        # what came is closed again.
        before = open_fd_count()
        with pytest.raises(ValueError, match="owned"):
            efd.recv_handle(b)
        assert open_fd_count() == before
        proc = run_py("""
            import socket, efd
            b = socket.socket(fileno=%d)
            got = efd.recv_handle(b)
            print(type(got).__name__, got.backend, got._bound,
                  got.acquire(timeout=5))
            got.close()
            """ % b.fileno(), pass_fds=[b.fileno()])
        assert proc.stdout.split() == ["BoundedSemaphore", backend, "3",
                                       "True"]
        assert count(sem) == 2


def test_handle_text_is_versioned_and_names_everything(backend):
    with contextlib.closing(efd.BoundedSemaphore(4, backend=backend)) as sem:
        h = sem.handle()
        fields = h.split(":")
        assert fields[:5] == ["efd1", "BoundedSemaphore", backend,
                              "semaphore", "4"]
        assert tuple(int(f) for f in fields[5].split(",")) == h.fds
        assert h.fds == sem._ev._fds()
        assert efd.Handle(str(h)).fds == h.fds
    with efd.EventFD(0, nonblocking=True, backend=backend) as ev:
        assert ev.handle().split(":")[3] == "counter+nonblocking"


# ---- refusals ----------------------------------------------------------------

def test_from_fd_refuses_a_memory_backends_readiness_descriptor(backend,
                                                                run_py):
    # In this process and in another one (pass_fds), where no registry knows
    # it: a pipe is not an eventfd, and the message points at handle().
    with contextlib.closing(efd.Semaphore(1, backend=backend)) as sem:
        fd = sem.fileno()
        with pytest.raises(ValueError, match=r"handle\(\)"):
            efd.EventFD.from_fd(fd, semaphore=True)
        proc = run_py("""
            import efd, sys
            try:
                efd.EventFD.from_fd(%d, semaphore=True)
            except ValueError as e:
                print("refused:", e)
            else:
                print("adopted")
            """ % fd, pass_fds=[fd])
        if backend in KERNEL_BACKENDS:
            assert proc.stdout.startswith("adopted")   # a whole object
        else:
            assert proc.stdout.startswith("refused:"), proc.stdout
            assert "handle()" in proc.stdout
        assert sem.acquire(False) and count(sem) == 0


def test_descriptors_are_owned_once(backend):
    with efd.EventFD(0, semaphore=True, backend=backend) as ev:
        for fd in ev._fds():
            with pytest.raises(ValueError):
                efd.EventFD.from_fd(fd, semaphore=True)
        with pytest.raises(ValueError, match="owned"):
            efd.from_handle(ev.handle())
        # Under another number, the same open file is the same object.
        dup = os.dup(ev.fileno())
        try:
            if backend in KERNEL_BACKENDS and not _kernel_shows_eventfd_id():
                pytest.skip("this kernel does not show eventfd-id")
            with pytest.raises(ValueError):
                efd.EventFD.from_fd(dup, semaphore=True)
        finally:
            os.close(dup)
        ev.release()
        assert ev.acquire(False)               # unharmed


def _kernel_shows_eventfd_id():
    fd = efd.eventfd(0)
    try:
        with open("/proc/self/fdinfo/%d" % fd) as f:
            return "eventfd-id:" in f.read()
    finally:
        os.close(fd)


def test_a_raw_eventfd_is_adopted_once():
    if not efd._efd._probe()["eventfd2_errno"] == 0:
        pytest.skip("no kernel eventfd")
    fd = efd.eventfd(0)
    first = efd.EventFD.from_fd(fd, semaphore=False)
    with pytest.raises(ValueError, match="owned"):
        efd.EventFD.from_fd(fd, semaphore=False)
    first.close()
    with pytest.raises(OSError) as info:       # closed with `first`
        efd.EventFD.from_fd(fd, semaphore=False)
    assert info.value.errno == errno.EBADF


def test_handle_of_a_closed_object_raises(backend):
    for kind in KINDS:
        obj = make_kind(kind, backend)
        obj.close()
        with pytest.raises(ValueError, match="closed"):
            obj.handle()
        with pytest.raises(ValueError, match="closed"):
            efd.send_handle(socket.socket(socket.AF_UNIX), obj)


MALFORMED = [
    "", "efd1", "efd1:", "efd2:Semaphore:futex:semaphore:-:3,4,5",
    "EFD1:Semaphore:futex:semaphore:-:3,4,5",
    "efd1:Semaphore:futex:semaphore:-:3,4,5\n",
    " efd1:Semaphore:futex:semaphore:-:3,4,5",
    "efd1:Semaphore:futex:semaphore:-:3,4,5,",
    "efd1:Semaphore:futex:semaphore:-:3,4",          # futex has three
    "efd1:Semaphore:eventfd:semaphore:-:3,4",        # eventfd has one
    "efd1:Semaphore:futex:semaphore:-:3,3,4",        # the same fd twice
    "efd1:Semaphore:futex:semaphore:-:03,4,5",       # leading zero
    "efd1:Semaphore:futex:semaphore:-:-3,4,5",
    "efd1:Semaphore:futex:semaphore:-:+3,4,5",
    "efd1:Semaphore:futex:semaphore:-:\u0663,4,5",   # a non-ASCII digit
    "efd1:Semaphore:futex:semaphore:-:99999999999,4,5",
    "efd1:Semaphore:futex:counter:-:3,4,5",          # a semaphore counts 1
    "efd1:Event:futex:semaphore:-:3,4,5",
    "efd1:Semaphore:futex:semaphore:2:3,4,5",        # only bounded has one
    "efd1:BoundedSemaphore:futex:semaphore:-:3,4,5",
    "efd1:BoundedSemaphore:futex:semaphore:18446744073709551615:3,4,5",
    "efd1:Semaphore:futex:semaphore+nonblocking:-:3,4,5",
    "efd1:Lock:futex:semaphore:-:3,4,5",
    "efd1:Semaphore:shm:semaphore:-:3,4,5",
    "efd1:Semaphore:futex:semaphore:-:3,4,5:extra",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_handles_raise_and_adopt_nothing(text):
    before = open_fd_count()
    with pytest.raises(ValueError):
        efd.from_handle(text)
    with pytest.raises(ValueError):
        efd.Handle(text)
    assert open_fd_count() == before


def test_a_handle_is_a_str():
    with pytest.raises(TypeError):
        efd.from_handle(b"efd1:Semaphore:futex:semaphore:-:3,4,5")


def _memfd(size, data=b"", flags=0):
    fd = (os.memfd_create("efd-test", os.MFD_CLOEXEC | flags)
          if hasattr(os, "memfd_create") else None)
    if fd is None:
        pytest.skip("no os.memfd_create")
    os.ftruncate(fd, size)
    if data:
        os.pwrite(fd, data, 0)
    return fd


@pytest.mark.parametrize("case", ["closed", "pipe-as-eventfd",
                                  "eventfd-as-page", "small-page",
                                  "zero-page", "wrong-magic", "two-pipes",
                                  "ends-swapped", "wrong-mode",
                                  "unsealed-page", "unsealable-page"])
def test_descriptors_not_what_the_handle_says(case):
    # Nothing adopted, nothing closed, nothing crashed: a peer is not
    # trusted.
    opened = []

    def keep(*fds):
        opened.extend(fds)
        return fds

    try:
        r, w = keep(*os.pipe())
        if case == "closed":
            r2, w2 = os.pipe()
            os.close(r2)
            os.close(w2)
            text = "efd1:EventFD:eventfd:counter:-:%d" % r2
        elif case == "pipe-as-eventfd":
            text = "efd1:EventFD:eventfd:counter:-:%d" % r
        elif case == "eventfd-as-page":
            if not kernel_eventfd_available():
                pytest.skip("no kernel eventfd in this build or sandbox")
            ev = keep(efd.eventfd(0))[0]
            text = "efd1:Semaphore:pipe:semaphore:-:%d,%d,%d" % (ev, r, w)
        elif case == "wrong-mode":
            if not kernel_eventfd_available():
                pytest.skip("no kernel eventfd in this build or sandbox")
            ev = keep(efd.eventfd(0, efd.EFD_SEMAPHORE))[0]
            with open("/proc/self/fdinfo/%d" % ev) as f:
                if "eventfd-semaphore:" not in f.read():
                    pytest.skip("the kernel does not show the mode")
            text = "efd1:EventFD:eventfd:counter:-:%d" % ev
        else:
            size = 4096
            if case == "small-page":
                page = keep(_memfd(10))[0]
            elif case == "wrong-magic":
                page = keep(_memfd(size, b"\xde\xad\xbe\xef" * 4))[0]
            elif case in ("unsealed-page", "unsealable-page"):
                # A real page's bytes, in a memfd its sender could shrink:
                # one it could have sealed and did not (refused always), or
                # one that cannot carry seals, as shm_open's (refused where
                # this process could make a sealed page itself).
                probe = efd._efd._probe()
                if probe["futex_errno"]:
                    pytest.skip("no futex backend")
                if case == "unsealable-page" and not probe["sealed_pages"]:
                    pytest.skip("this process cannot make sealed pages "
                                "either: unsealable ones are taken here")
                with contextlib.closing(efd.Semaphore(1, backend="futex")) as s:
                    real = s.handle().fds[0]
                    data = os.pread(real, os.fstat(real).st_size, 0)
                flags = os.MFD_ALLOW_SEALING if case == "unsealed-page" else 0
                page = keep(_memfd(len(data), data, flags))[0]
            else:
                page = keep(_memfd(size))[0]
            rr, ww = r, w
            if case == "two-pipes":
                ww = keep(*os.pipe())[1]
            if case == "ends-swapped":
                rr, ww = w, r
            text = "efd1:Semaphore:futex:semaphore:-:%d,%d,%d" % (page, rr, ww)
            if case in ("small-page", "zero-page", "wrong-magic"):
                text2 = text.replace("futex", "pipe")
                with pytest.raises(ValueError):
                    efd.from_handle(text2)
        before = open_fd_count()
        with pytest.raises(ValueError):
            efd.from_handle(text)
        assert open_fd_count() == before
        for fd in opened:
            os.fstat(fd)                  # still open: nothing adopted
    finally:
        for fd in opened:
            os.close(fd)


def test_recv_handle_refuses_and_closes_what_came(backend):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, b, contextlib.closing(efd.Semaphore(1, backend=backend)) as sem:
        h = sem.handle()
        before = open_fd_count()
        # The handle's text with one descriptor too few.
        data = h.encode()
        a.sendmsg([len(data).to_bytes(4, "big") + data],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                    array.array("i", h.fds[:1] * (len(h.fds) - 1 or 2)))])
        with pytest.raises(ValueError):
            efd.recv_handle(b)
        # Not a handle at all, with descriptors.
        a.sendmsg([b"\x00\x00\x00\x05hello"],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                    array.array("i", h.fds))])
        with pytest.raises(ValueError):
            efd.recv_handle(b)
        assert open_fd_count() == before
        a.close()
        with pytest.raises(EOFError):
            efd.recv_handle(b)
        assert sem.acquire(False)


# ---- pickles that stay in this process --------------------------------------

def test_pickle_in_process_shares_the_count_and_owns_its_own(backend):
    for kind in KINDS:
        obj = make_kind(kind, backend)
        data = pickle.dumps(obj)
        copy = pickle.loads(data)
        try:
            assert type(copy) is type(obj) and describe(copy) == describe(obj)
            assert not set(copy._ev._fds() if hasattr(copy, "_ev")
                           else copy._fds()) & set(
                obj._ev._fds() if hasattr(obj, "_ev") else obj._fds())
            if isinstance(obj, efd.Event):
                copy.set()
                assert obj.is_set()
            else:
                copy.release()
                assert obj.acquire(timeout=LIMIT)
            copy.close()                  # closes its own descriptors only
            if isinstance(obj, efd.Event):
                obj.clear()
            else:
                obj.release()
                assert obj.acquire(False)
            obj.close()
            with pytest.raises(ValueError, match="closed"):
                pickle.loads(data)        # the source is gone
        finally:
            copy.close()
            obj.close()


def test_pickle_does_not_hold_descriptors(backend):
    # What a pickle holds: this pid, the process's nonce, the object's
    # token and its class -- no descriptor, and nothing to duplicate one.
    with contextlib.closing(efd.BoundedSemaphore(1, backend=backend)) as sem:
        fn, args = sem.__reduce__()
        assert fn.__name__ == "_load_local"
        assert args[0] == os.getpid() and args[3] is efd.BoundedSemaphore
        assert all(type(a) is int for a in args[:3]) and args[4:] == (1,)
        assert b"DupFd" not in pickle.dumps(sem)


# ---- spawned children: no ResourceWarning -------------------------------------

SPAWN_SCRIPT = """
import multiprocessing, sys, efd

def child(sem, event, ev):
    sem.release()
    event.set()
    ev.release()

if __name__ == "__main__":
    ctx = multiprocessing.get_context(sys.argv[1])
    sem = efd.Semaphore(0, backend=sys.argv[2])
    event = efd.Event(backend=sys.argv[2])
    ev = efd.EventFD(0, backend=sys.argv[2])
    p = ctx.Process(target=child, args=(sem, event, ev))
    p.start()
    p.join(60)
    print(p.exitcode, sem.acquire(timeout=5), event.is_set(), ev.read())
    sem.close(); event.close(); ev.close()
"""


@pytest.mark.parametrize("method", full_or(["spawn"], ["spawn", "forkserver"]))
def test_no_resource_warning_in_a_spawned_child(backend, method, tmp_path):
    script = tmp_path / "spawned.py"
    script.write_text(SPAWN_SCRIPT)
    proc = subprocess.run(
        [sys.executable, "-W", "default", str(script), method, backend],
        env=child_env(), cwd=REPO, timeout=120, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True)
    assert proc.stdout.split() == ["0", "True", "True", "1"], proc.stderr
    assert "ResourceWarning" not in proc.stderr, proc.stderr


def test_dropins_expose_their_backend(backend):
    for kind in KINDS:
        with contextlib.closing(make_kind(kind, backend)) as obj:
            assert obj.backend == backend


# ---- faults ------------------------------------------------------------------

def test_conservation_with_an_exec_child_killed_mid_loop(backend, popen_py):
    units = 4
    for _ in range(full_or(1, 5)):
        with contextlib.closing(efd.Semaphore(units, backend=backend)) as sem:
            h = sem.handle()
            proc = popen_py("""
                import os, efd
                sem = efd.from_handle(os.environ["H"])
                print("go", flush=True)
                while True:
                    if sem.acquire(timeout=5):
                        sem.release()
                """, env={"H": h}, pass_fds=h.fds)
            assert proc.stdout.readline().strip() == "go"
            time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait(LIMIT)
            # At most what was in the dead child's hands is gone: one unit,
            # or on eventfd-readback (whose semaphore read takes the whole
            # counter and writes the rest back) the whole count; nobody
            # hangs, and nothing is made up.
            got = 0
            while sem.acquire(timeout=0.3):
                got += 1
            lost = units if backend == "eventfd-readback" else 1
            assert units - lost <= got <= units
            sem.release()
            assert sem.acquire(timeout=LIMIT)


# ---- interpreters (CPython 3.14+) --------------------------------------------

def _interpreters():
    try:
        from concurrent import interpreters
    except ImportError:
        pytest.skip("no concurrent.interpreters (CPython 3.14+)")
    return interpreters


def test_interpreters_share_the_count(backend, run_py):
    _interpreters()
    proc = run_py("""
        import efd
        from concurrent import interpreters
        from concurrent.futures import InterpreterPoolExecutor

        sem = efd.Semaphore(0, backend=%r)
        interp = interpreters.create()
        queue = interpreters.create_queue()

        # Queue.put: the other interpreter releases through its own object.
        queue.put(sem)
        interp.exec("import efd")
        interp.prepare_main(queue=queue)
        interp.exec("s = queue.get(); s.release(2); s.close()")
        assert sem.acquire(timeout=5) and sem.acquire(timeout=5)

        # Interpreter.call: arguments and results.
        def give(s, n):
            s.release(n)
            return s
        back = interp.call(give, sem, 3)
        assert type(back) is efd.Semaphore and back is not sem
        assert sem.acquire(timeout=5)
        back.close()                     # its own descriptors only
        assert sem.acquire(timeout=5) and sem.acquire(timeout=5)
        assert not sem.acquire(False)

        # InterpreterPoolExecutor's initargs.
        with InterpreterPoolExecutor(2, initializer=efd.Semaphore.release,
                                     initargs=(sem,)) as pool:
            pool.submit(int, 1).result(timeout=30)
        assert sem.acquire(timeout=5)

        # Closing one interpreter's object never closes another's.
        interp.call(give, sem, 1)
        interp.close()
        assert sem.acquire(timeout=5)
        sem.release()
        assert sem.acquire(timeout=5)
        sem.close()
        print("ok")
        """ % backend, timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr


def test_selfcheck_names_each_classs_default_backend():
    # The child sees the same EFD_BACKEND as this process (CI's per-backend
    # lanes set it), so that its defaults are the ones compared here.
    proc = subprocess.run([sys.executable, "-m", "efd"],
                          env=child_env(os.environ.get("EFD_BACKEND") or None),
                          cwd=REPO, timeout=120, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    lines = proc.stdout.splitlines()
    start = lines.index(
        "Default backend of each class (made here with no backend=):")
    for cls, make in (("efd.EventFD", efd.EventFD),
                      ("efd.Semaphore", efd.Semaphore),
                      ("efd.BoundedSemaphore", efd.BoundedSemaphore),
                      ("efd.Event", efd.Event)):
        obj = make()
        try:
            want = obj.backend
        finally:
            obj.close()
        assert any(l.split() == [cls, want] for l in lines[start:start + 7]), \
            proc.stdout


def test_a_peer_that_shrinks_the_page_later(popen_py):
    """The shared page is sealed against shrinking: a peer that tries to
    truncate it after handing it over is refused, and the receiver goes on
    (an unsealed page is refused at adoption: see the cases above)."""
    probe = efd._efd._probe()
    if probe["futex_errno"]:
        pytest.skip("no futex backend")
    if not probe["sealed_pages"]:
        pytest.skip("no memfd here: pages come from shm_open and cannot be "
                    "sealed (docs/processes.rst says what that allows)")
    sem = efd.Semaphore(1, backend="futex")
    try:
        h = sem.handle()
        proc = popen_py("""
            import os, sys, efd
            s = efd.from_handle(os.environ["H"])
            print("ready", flush=True)
            sys.stdin.readline()
            print(s.acquire(False), flush=True)
            """, env={"H": h}, pass_fds=h.fds, stdin=subprocess.PIPE)
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(PermissionError):
            os.ftruncate(h.fds[0], 0)            # F_SEAL_SHRINK
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.wait(LIMIT) == 0, "killed by signal %d" % -proc.returncode
        assert proc.stdout.readline().strip() == "True"
    finally:
        sem.close()


def test_a_page_of_another_kind_is_refused_by_name(run_py):
    """A handle that names the wrong memory backend for its page (a futex
    object's page offered as a pipe object's -- as a process whose pipe
    waiters sleep in poll() would see one made where they sleep on futex
    words) is refused at once, with a ValueError that says the page is
    efd's, of another kind, rather than that the descriptors are not a
    pipe's."""
    if efd._efd._probe()["futex_errno"]:
        pytest.skip("no futex backend")
    sem = efd.Semaphore(1, backend="futex")
    try:
        h = sem.handle()
        proc = run_py("""
            import os, efd
            try:
                efd.from_handle(os.environ["H"])
            except ValueError as exc:
                print("refused:", exc)
            else:
                print("adopted")
            """, env={"H": str(h).replace(":futex:", ":pipe:")},
            pass_fds=h.fds)
        assert "refused:" in proc.stdout, proc.stdout
        assert "another kind of efd page" in proc.stdout, proc.stdout
        assert "'pipe' waiters sleep" in proc.stdout, proc.stdout
        assert sem.acquire(False) is True      # the object is untouched
    finally:
        sem.close()


CHOSEN = [0, 2**32 - 1, 1, 2, 3, os.getpid(), 2**31 - 1, 0x40000000,
          0xC0000000, 32, 48, 16]


@pytest.mark.parametrize("backend", ["pipe", "futex"])
@pytest.mark.parametrize("what", ["random", "chosen"])
def test_a_peer_that_scribbles_on_the_page(backend, what, popen_py):
    """A peer with the page's descriptor writes garbage over it while this
    process uses the object: whatever the count then says, efd raises or
    carries on, never crashes (glibc used to abort on its mutex, issue 18)
    and never waits past its timeouts."""
    if backend == "futex" and efd._efd._probe()["futex_errno"]:
        pytest.skip("no futex backend")
    sem = efd.Semaphore(1, backend=backend)
    rounds = full_or(2000, 10000)
    try:
        h = sem.handle()
        proc = popen_py("""
            import os, select, sys, efd
            s = efd.from_handle(os.environ["H"])
            fd = s.fileno()
            print("ready", flush=True)
            errors = 0
            for i in range(%d):
                for op in (lambda: s.acquire(False), lambda: s.release(),
                           lambda: s.value, lambda: s.acquire(timeout=0.001),
                           lambda: select.select([fd], [], [], 0)):
                    try:
                        op()
                    except (ValueError, OverflowError, OSError):
                        errors += 1
            print("done", errors, flush=True)
            """ % rounds, env={"H": h}, pass_fds=h.fds)
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        import mmap
        page = mmap.mmap(h.fds[0], os.fstat(h.fds[0]).st_size)
        # The magic (the first word) is left alone: the object would only
        # refuse to be used.
        words = len(page) // 4
        rnd = __import__("random").Random(20261204)
        try:
            while proc.poll() is None:
                if what == "random":
                    at = 4 * rnd.randrange(1, words)
                    page[at:at + 4] = rnd.getrandbits(32).to_bytes(4, "little")
                else:
                    # Every word at once, each one of the values a thread
                    # id, a lock, a lock's kind or a count could hold: none,
                    # all bits, low bits, this process (a live thread), a
                    # thread that never existed, "owner died" (and with
                    # waiters), priority-inheriting kinds.  (0.2's pthread
                    # mutex made glibc abort on a PI kind beside "owner
                    # died".)
                    page[4:4 * words] = b"".join(
                        rnd.choice(CHOSEN).to_bytes(4, "little")
                        for _ in range(1, words))
                if rnd.random() < 0.3:
                    # Keep the count (bytes 8..16, efd.h) small, so that the
                    # child's operations keep crossing zero and so keep
                    # taking the page's lock.
                    page[8:16] = rnd.choice([0, 1]).to_bytes(8, "little")
                time.sleep(0.0002)
        finally:
            page.close()
        # Not communicate(): it reads the raw pipe, past what readline()
        # above may already have buffered.
        proc.wait(LIMIT)
        out, err = proc.stdout.read(), proc.stderr.read()
        assert proc.returncode == 0, (proc.returncode, err)
        assert out.strip().startswith("done"), (out, err)
    finally:
        sem.close()


# ---- efd.aio's classes ------------------------------------------------------

AIO_KINDS = ("aio.Semaphore", "aio.BoundedSemaphore", "aio.Lock", "aio.Event")


def make_aio(kind, backend):
    if kind == "aio.Semaphore":
        return efd.aio.Semaphore(0, backend=backend)
    if kind == "aio.BoundedSemaphore":
        sem = efd.aio.BoundedSemaphore(2, backend=backend)
        sem.acquire_nowait()
        sem.acquire_nowait()
        return sem
    if kind == "aio.Lock":
        lock = efd.aio.Lock(backend=backend)
        lock.acquire_nowait()
        return lock
    return efd.aio.Event(backend=backend)


AIO_CHILD = """
import asyncio, os, efd, efd.aio

async def main():
    objs = [efd.from_handle(os.environ["EFD_H%%d" %% i]) for i in range(4)]
    for o in objs:
        print(type(o).__module__, type(o).__name__, o.backend, flush=True)
        if isinstance(o, efd.aio.Event):
            got = await asyncio.wait_for(o.wait(), %r)
        else:
            got = await asyncio.wait_for(o.acquire(), %r)
        print("took", got, flush=True)
        if not isinstance(o, efd.aio.Event):
            o.release()
        o.close()
    print("done", flush=True)

asyncio.run(main())
""" % (LIMIT, LIMIT)


def test_every_aio_class_through_exec(backend, popen_py):
    """efd.aio's classes go whole to an exec'd program too: same class,
    backend and bound, over the same count, with a task waiting there."""
    objs = [make_aio(kind, backend) for kind in AIO_KINDS]
    try:
        handles = [o.handle() for o in objs]
        assert [h.split(":")[1] for h in handles] == list(AIO_KINDS)
        env = {"EFD_H%d" % i: h for i, h in enumerate(handles)}
        fds = sorted(fd for h in handles for fd in h.fds)
        proc = popen_py(AIO_CHILD, env=env, pass_fds=fds)
        for o in objs:
            assert proc.stdout.readline().split() == [
                "efd.aio", type(o).__name__, backend]
            time.sleep(0.02)              # let the child's task wait
            if isinstance(o, efd.aio.Event):
                o.set()
            else:
                o.release()
            assert proc.stdout.readline().strip() == "took True"
        assert proc.stdout.readline().strip() == "done"
        assert proc.wait(LIMIT) == 0, proc.stderr.read()
        sem, bounded, lock, event = objs
        assert sem.value == 1 and bounded.value == 1 and lock.value == 1
        assert not lock.locked() and event.is_set()
        bounded.release()
        with pytest.raises(ValueError):
            bounded.release()             # the bound came along
        with pytest.raises(RuntimeError):
            lock.release()                # a lock of one unit
    finally:
        for o in objs:
            o.close()


@pytest.mark.parametrize("memory_backend", ["pipe", "futex"])
def test_a_peer_that_writes_to_the_channel(memory_backend):
    """A peer holding the handle's write end puts stray bytes in the
    readiness channel: a waiter does not spin on a channel that stays
    readable with nothing to take (the repair drains it), and the next
    token taken takes the strays with it."""
    if memory_backend == "futex" and efd._efd._probe()["futex_errno"]:
        pytest.skip("no futex backend")
    sem = efd.Semaphore(0, backend=memory_backend)
    try:
        h = sem.handle()
        fd = sem.fileno()
        # The channel: a pipe's write end, or an eventfd (8-byte writes).
        os.write(h.fds[-1], b"\1\1\1" if len(h.fds) == 3
                 else (3).to_bytes(8, sys.byteorder))
        cpu = time.process_time()
        assert sem.acquire(timeout=0.5) is False
        assert time.process_time() - cpu < 0.25, "the waiter spun"
        sem.release()
        assert sem.acquire(False)
        assert not select.select([fd], [], [], 0)[0], \
            "readable with the count at zero"
        assert sem.value == 0
    finally:
        sem.close()
