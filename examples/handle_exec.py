"""Exec: hand efd objects to a program you start, as handles in environment
variables.

A new program cannot receive a Python object, only descriptors and text.
obj.handle() is that text (an efd.Handle, a str) and names the descriptors
to pass (h.fds); in the new program efd.from_handle() rebuilds the same
class, backend, mode and bound over the same count.  This works on every
backend, for EventFD, Semaphore, BoundedSemaphore and Event.

Here a worker program takes jobs from a Semaphore and says it is done
through an Event; the parent waits for it.

Run:  python examples/handle_exec.py
"""
import os
import subprocess
import sys

import efd

WORKER = """
import os, efd

jobs = efd.from_handle(os.environ["EFD_JOBS"])
done = efd.from_handle(os.environ["EFD_DONE"])
taken = 0
while jobs.acquire(timeout=0.5):       # until no job came for half a second
    taken += 1
print(f"worker: a {type(jobs).__name__} and an {type(done).__name__}, "
      f"took {taken} jobs", flush=True)
done.set()
jobs.close()
done.close()
"""


def main():
    jobs = efd.Semaphore(0)
    done = efd.Event()
    jobs_handle, done_handle = jobs.handle(), done.handle()
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER],
        pass_fds=jobs_handle.fds + done_handle.fds,
        env=dict(os.environ, EFD_JOBS=jobs_handle, EFD_DONE=done_handle))
    jobs.release(5)
    finished = done.wait(timeout=60)
    worker.wait(timeout=60)
    print(f"parent: worker done: {finished}, jobs left: {jobs.acquire(False)}, "
          f"exit code {worker.returncode}")
    jobs.close()
    done.close()


if __name__ == "__main__":
    main()
