"""Interpreters: one Semaphore for the interpreters of one process
(CPython 3.14+, concurrent.interpreters).

An efd object goes to another interpreter as an argument (or result) of
Interpreter.call or of an InterpreterPoolExecutor task, through an
interpreters Queue, or in the initargs of an InterpreterPoolExecutor; there
it is an object of its own over the same count (its own duplicates of the
descriptors, so closing it never closes anything of another
interpreter's).  Here a Semaphore limits how many of four interpreters run
a section at once.

Run:  python examples/interpreters.py    (prints a note and exits 0 on a
Python without concurrent.interpreters)
"""
import sys

import efd

def task(limit, i):
    # Runs in a worker interpreter, with its own object over the count.
    with limit:                      # at most two interpreters in here
        return i * i


def release_through(sem, n):
    sem.release(n)                   # in the other interpreter
    return sem.backend


def main():
    try:
        from concurrent import interpreters
        from concurrent.futures import InterpreterPoolExecutor
    except ImportError:
        print("needs CPython 3.14+ (concurrent.interpreters): skipped")
        return

    limit = efd.Semaphore(2)
    with InterpreterPoolExecutor(4) as pool:
        results = list(pool.map(task, [limit] * 8, range(8)))
    print(f"pool: {results}")

    interp = interpreters.create()
    try:
        backend = interp.call(release_through, limit, 3)
    finally:
        interp.close()
    units = 0
    while limit.acquire(False):
        units += 1
    print(f"call: the other interpreter released 3 ({backend}); "
          f"{units} units here")
    limit.close()


if __name__ == "__main__":
    main()
