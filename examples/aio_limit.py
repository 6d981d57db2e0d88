"""Limit concurrent work across processes with efd.aio.Semaphore.

Three worker processes each run an asyncio loop with six tasks; every task
needs one of LIMIT shared "connections" (an efd.aio.Semaphore) for a short
while.  The semaphore is used exactly like asyncio.Semaphore -- `async with
sem:` -- but its count is shared by every process, so at most LIMIT tasks
hold a connection at once across all of them.  A shared efd.aio.Lock guards
the peak counter; an efd.aio.Event starts everyone at the same moment.

Standard library and efd only.  Run: python examples/aio_limit.py
"""
import asyncio
import multiprocessing

import efd.aio

LIMIT = 2
PROCESSES = 3
TASKS = 6


def worker(sem, lock, start, holding, peak):
    async def task():
        async with sem:
            async with lock:
                holding.value += 1
                peak.value = max(peak.value, holding.value)
            await asyncio.sleep(0.01)
            async with lock:
                holding.value -= 1

    async def main():
        await start.wait()
        await asyncio.gather(*(task() for _ in range(TASKS)))

    asyncio.run(main())


def run():
    ctx = multiprocessing.get_context("spawn")
    sem = efd.aio.Semaphore(LIMIT)
    lock = efd.aio.Lock()
    start = efd.aio.Event()
    holding = ctx.RawValue("i", 0)
    peak = ctx.RawValue("i", 0)
    procs = [ctx.Process(target=worker,
                         args=(sem, lock, start, holding, peak))
             for _ in range(PROCESSES)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join()
    codes = sorted({proc.exitcode for proc in procs})
    print("%d tasks in %d processes, at most %d holding a connection "
          "(limit %d); units left: %d; exit codes %s"
          % (PROCESSES * TASKS, PROCESSES, peak.value, LIMIT, sem.value,
             codes))
    for obj in (sem, lock, start):
        obj.close()


if __name__ == "__main__":
    run()
