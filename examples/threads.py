"""Threads: a semaphore-mode EventFD handing work units from producers to
consumers, with timeouts, exactly as a threading.Semaphore would -- except
that the same object could also be waited on by select() or asyncio, or be
handed to a child process.

Run:  python examples/threads.py
"""
import threading

import efd

N_PRODUCERS = 3
UNITS_EACH = 1000


def main():
    items = efd.EventFD(semaphore=True)   # count of items ready
    taken = []
    lock = threading.Lock()

    def producer():
        for _ in range(UNITS_EACH):
            items.release()

    def consumer():
        n = 0
        # acquire() with a timeout returns False instead of raising, as in
        # threading: stop once the producers have gone quiet.
        while items.acquire(timeout=0.5):
            n += 1
        with lock:
            taken.append(n)

    threads = [threading.Thread(target=producer) for _ in range(N_PRODUCERS)]
    threads += [threading.Thread(target=consumer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a thread hung"
    items.close()

    total = sum(taken)
    print("released", N_PRODUCERS * UNITS_EACH, "units; acquired", total)
    assert total == N_PRODUCERS * UNITS_EACH


if __name__ == "__main__":
    main()
