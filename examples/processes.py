"""Processes: one EventFD shared with child processes, three ways.

1. multiprocessing, under each start method: pass the EventFD as an
   argument; the child gets a duplicate of the descriptor.
2. subprocess with pass_fds: the child adopts the inherited descriptor with
   EventFD.from_fd().
3. os.fork(): the counter is simply shared.

Run:  python examples/processes.py
"""
import multiprocessing
import os
import subprocess
import sys

import efd


def child(done, n):
    # Runs in the child process: report n units of finished work.
    for _ in range(n):
        done.release()
    done.close()


CHILD_SCRIPT = """
import sys, efd
# Say semaphore=True: a parent on the 'eventfd-readback' backend holds a
# plain eventfd, whose fdinfo reads "not a semaphore".
done = efd.EventFD.from_fd(int(sys.argv[1]), semaphore=True)
done.release(int(sys.argv[2]))
done.close()
"""


def main():
    done = efd.EventFD(semaphore=True)

    for method in ("fork", "spawn", "forkserver"):
        ctx = multiprocessing.get_context(method)
        p = ctx.Process(target=child, args=(done, 3))
        p.start()
        got = sum(done.acquire(timeout=30) for _ in range(3))
        p.join(timeout=30)
        print(f"multiprocessing/{method}: {got} units, exit code {p.exitcode}")

    # An eventfd made by efd is close-on-exec by default; pass_fds lets this
    # one through to the new program, which adopts it.  from_fd() adopts
    # kernel eventfds only: the 'pipe' and 'futex' backends' descriptors
    # cannot be handed over this way (multiprocessing can carry them, see
    # above, and so can a handle: see handle_exec.py).
    if done.backend not in ("eventfd", "eventfd-readback"):
        print("subprocess + from_fd: skipped (needs a kernel eventfd)")
    else:
        fd = done.fileno()
        subprocess.run([sys.executable, "-c", CHILD_SCRIPT, str(fd), "2"],
                       pass_fds=[fd], check=True, timeout=60)
        got = sum(done.acquire(timeout=30) for _ in range(2))
        print(f"subprocess + from_fd: {got} units")

    pid = os.fork()
    if pid == 0:
        try:
            done.release(4)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    print(f"os.fork: {sum(done.acquire(blocking=False) for _ in range(5))} units")
    done.close()


if __name__ == "__main__":
    main()
