"""A real pre-fork server (issue 22): gunicorn with uvicorn workers,
``--preload`` so that the master makes the shared limit and the workers
inherit it.  Requests hold both units of ``efd.Semaphore(2)`` in ``async
with``; their workers are SIGKILLed (what gunicorn does to a worker past
``--timeout``, and the OOM killer); gunicorn starts new ones, and the
limit must be whole again.

gunicorn and uvicorn come from the test extras; without them the test is
skipped.  Full size (CI's switch) sends 200 concurrent requests first; the
default run 20.
"""

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings

import pytest

from conftest import full_or

pytest.importorskip("gunicorn")
pytest.importorskip("uvicorn")

APP = r'''
import asyncio, os
import efd

LIMIT = efd.Semaphore(2)        # made in the master: --preload
HOLDERS = os.environ["EFD_TEST_HOLDERS"]


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    if path == "/hold":
        async with LIMIT:
            name = "%d-%d" % (os.getpid(), id(scope))
            open(os.path.join(HOLDERS, name), "w").close()
            await asyncio.sleep(120)
        body = b"done"
    elif path == "/work":
        async with LIMIT:
            await asyncio.sleep(0.005)
        body = b"ok"
    elif path == "/value":
        body = str(LIMIT.value).encode()
    else:
        body = b"?"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
'''


def _gunicorn_version():
    import gunicorn
    return tuple(getattr(gunicorn, "version_info", (0,)))


#: gunicorn 25 added a control socket served by a thread of the master;
#: the test's server needs none.
_NO_CONTROL_SOCKET = (["--no-control-socket"]
                      if _gunicorn_version() >= (25,) else [])


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port, path, timeout=10.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def _group_states(pgid):
    """Each process of group `pgid`: its state (T: stopped), where it
    sleeps in the kernel, and its signals (blocked, pending, ignored)."""
    states, stopped = "", False
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue                    # self, thread-self
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            with open("/proc/%s/wchan" % pid) as f:
                wchan = f.read()
            with open("/proc/%s/status" % pid) as f:
                sig = " ".join(line.strip() for line in f
                               if line.startswith(("SigBlk", "SigPnd",
                                                   "ShdPnd", "SigIgn",
                                                   "TracerPid")))
            stopped = stopped or fields[0] in "tT"
            states += "pid %s state %s wchan %s %s\n" % (pid, fields[0],
                                                         wchan, sig)
            # Where it is in the kernel (root only): its system call and
            # kernel stack.  (CI: a master "running" for a minute that no
            # signal reached was a whole machine's stall; see
            # _kernel_stalls().)
            for name in ("syscall", "stack"):
                try:
                    with open("/proc/%s/%s" % (pid, name)) as f:
                        states += "  %s: %s\n" % (name, f.read().strip())
                except OSError:
                    pass
        except (OSError, ValueError, IndexError):
            pass
    return states, stopped


def _kernel_stalls(since=0.0):
    """The kernel's own reports of a stalled machine (workqueue lockups,
    RCU stalls) logged after `since` (time.monotonic(): the kernel log's
    clock), where this user may read its log: a process of the server that
    sits runnable and answers no signal for a minute is stuck with the
    whole machine, not in gunicorn or efd."""
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = []
    for line in out.splitlines():
        if not ("workqueue lockup" in line or "rcu_preempt detected" in line
                or "soft lockup" in line):
            continue
        try:
            stamp = float(line[1:line.index("]")])
        except ValueError:
            continue
        if stamp >= since:
            lines.append(line)
    return "".join(line + "\n" for line in lines[-8:])


def _wait_for(pred, seconds, what, server=None, log=None):
    start = time.monotonic()
    deadline = start + seconds
    last = None
    continued, looked, stalled = "", False, ""
    while True:
        if time.monotonic() >= deadline:
            if stalled or server is None or server.poll() is not None:
                break
            # The machine itself stalled meanwhile (the kernel says so):
            # the time was not the server's.  Once, wait as long again.
            stalled = _kernel_stalls(start)
            if not stalled:
                break
            warnings.warn("the machine stalled while the test waited for "
                          "%s; waiting %d s more:\n%s"
                          % (what, seconds, stalled))
            deadline = time.monotonic() + seconds
        try:
            if pred():
                if continued:
                    # Stopped by a signal from outside the test (nothing
                    # here sends one to the server): say so, loudly.
                    warnings.warn("the gunicorn server was stopped (state "
                                  "T) and answered once continued:\n"
                                  + continued)
                return
        except OSError as exc:
            last = exc
        if server is not None and server.poll() is not None:
            break                       # the server is gone: say why
        if (server is not None and not looked
                and time.monotonic() > deadline - seconds / 2):
            looked = True
            states, stopped = _group_states(server.pid)
            if stopped:
                # Half the time gone and a process of the server stopped
                # (CI: a hang that answered neither SIGTERM nor SIGABRT):
                # continue it, and look again.
                continued = states
                os.killpg(server.pid, signal.SIGCONT)
        time.sleep(0.05)
    hung = server is not None and server.poll() is None
    states = continued and "stopped, then continued:\n" + continued
    if hung:
        states += _group_states(server.pid)[0]
        stalls = _kernel_stalls(start)
        if stalls:
            states += ("the kernel's stall reports since the wait began "
                       "(at %.0f s of its clock; now %.0f s):\n%s"
                       % (start, time.monotonic(), stalls))
        # Still running, not answering: have every process of the server
        # dump its Python threads (faulthandler, PYTHONFAULTHANDLER=1) into
        # the log before saying so.
        try:
            os.killpg(server.pid, signal.SIGABRT)
            server.wait(5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    err = AssertionError("timed out waiting for %s (last error: %r; server "
                         "%s)\n%s--- server output:\n%s"
                         % (what, last, "hung: its threads below" if hung
                            else "exit status %r" % (server and server.poll()),
                            states, log.read_text()[-6000:] if log else ""))
    err.hung = hung
    raise err


def test_gunicorn_workers_killed_while_holding_the_limit(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    holders = tmp_path / "holders"
    holders.mkdir()
    env = dict(os.environ, EFD_TEST_HOLDERS=str(holders))
    # The drop-in's default backend, whatever a CI lane forces elsewhere.
    env.pop("EFD_BACKEND", None)
    # gunicorn 25 and later open a control socket, by default at one path
    # per user ($XDG_RUNTIME_DIR or $HOME): two servers at once (CI runs
    # lanes in parallel) fought over it, and one never answered.  This
    # server's is its own, and off where gunicorn has the switch.
    env.pop("XDG_RUNTIME_DIR", None)
    env["HOME"] = str(tmp_path)
    env["PYTHONFAULTHANDLER"] = "1"     # see _wait_for()
    log = tmp_path / "server.log"
    for attempt in range(3):
        # A port found free may be taken before gunicorn binds it (other
        # lanes run at once): a server that exits at start goes again, on
        # another port.
        port = _free_port()
        with open(str(log), "w") as out:
            server = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "--preload", "-w", "2",
                 "-k", "uvicorn.workers.UvicornWorker", "--chdir",
                 str(tmp_path), "--bind", "127.0.0.1:%d" % port,
                 "--graceful-timeout", "2", "--log-level", "warning"]
                + _NO_CONTROL_SOCKET + ["app:app"],
                env=env, start_new_session=True, stdout=out,
                stderr=subprocess.STDOUT)
        try:
            _wait_for(lambda: _get(port, "/value", 1.0) == "2", 60,
                      "the server to answer", server, log)
            break
        except AssertionError as exc:
            # Only a server that exited at start goes again (its port was
            # taken): one that hung is a failure.
            if exc.hung or server.poll() is None or attempt == 2:
                _stop(server)
                raise
    try:
        # The limit holds under load: every request gets through.
        n = full_or(20, 200)
        results = []

        def work():
            try:
                results.append(_get(port, "/work", 30.0))
            except OSError as exc:
                results.append(repr(exc))
        threads = [threading.Thread(target=work) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results.count("ok") == n, results[:5]
        assert _get(port, "/value") == "2"

        # Two requests hold both units; their workers are SIGKILLed.
        def hold():
            try:
                _get(port, "/hold", 60.0)
            except OSError:
                pass                    # its worker is killed: expected
        for _ in range(2):
            threading.Thread(target=hold, daemon=True).start()
        _wait_for(lambda: len(os.listdir(holders)) == 2, 15,
                  "two requests to hold the limit")
        assert _get(port, "/value") == "0"
        pids = {int(name.split("-")[0]) for name in os.listdir(holders)}
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

        # gunicorn starts new workers; the limit is whole again (a worker
        # that answers "/value" settled the dead holders' books first).
        # The new workers boot as the first ones did, so as long is allowed
        # (60 s: CI runs five lanes on two cores); and the server is named,
        # so that a hang dumps its threads and a stalled machine gets a
        # second wait, as at start.
        _wait_for(lambda: _get(port, "/value", 2.0) == "2", 60,
                  "the dead workers' units to come back", server, log)
        results.clear()
        threads = [threading.Thread(target=work) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results.count("ok") == 10, results[:5]
    finally:
        _stop(server)


def _stop(server):
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait(10)
