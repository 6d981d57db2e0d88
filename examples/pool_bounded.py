"""A process pool in which at most LIMIT tasks use a scarce resource at once.

The pool has more workers than the resource allows (think of a licence
server, a GPU, or a database that accepts two connections): the tasks do
their own work in parallel, and queue only for the resource, on an
efd.Semaphore shared by every worker process.  A threading.Semaphore cannot
cross processes; a multiprocessing.Semaphore can, but it has no fileno() to
hand to an event loop and cannot be adopted by an unrelated program.

A shared counter records how many tasks held the resource at the same time,
to show the limit holds.

Run:  python examples/pool_bounded.py [fork|spawn|forkserver]
"""
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import efd

WORKERS = 4
LIMIT = 2
TASKS = 12

# Set in each worker process by init_worker().
_resource = None
_inside = None
_peak = None


def init_worker(resource, inside, peak):
    global _resource, _inside, _peak
    _resource, _inside, _peak = resource, inside, peak


def task(n):
    total = sum(i * i for i in range(20000 + n))   # work that needs no resource
    with _resource:                                # queue for the resource
        with _inside.get_lock():
            _inside.value += 1
            _peak.value = max(_peak.value, _inside.value)
        time.sleep(0.02)                           # use it
        with _inside.get_lock():
            _inside.value -= 1
    return total


def main(method):
    ctx = multiprocessing.get_context(method)
    resource = efd.Semaphore(LIMIT)
    inside = ctx.Value("i", 0)
    peak = ctx.Value("i", 0)
    with ProcessPoolExecutor(WORKERS, mp_context=ctx, initializer=init_worker,
                             initargs=(resource, inside, peak)) as pool:
        results = list(pool.map(task, range(TASKS), timeout=120))
    resource.close()
    print("%s: %d tasks on %d processes, at most %d holding the resource "
          "(limit %d)" % (method, len(results), WORKERS, peak.value, LIMIT))
    assert 1 <= peak.value <= LIMIT, peak.value


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "spawn")
