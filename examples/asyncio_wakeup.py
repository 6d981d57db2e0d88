"""An asyncio server woken by a worker process through an EventFD.

The worker process does slow jobs and, for each one finished, puts the
result (with a megabyte of payload) on a multiprocessing.Queue and releases
a semaphore-mode EventFD.  The server's event loop waits for that EventFD
with ``await done.acquire_async()`` -- through the loop's own reader
callback on ``done.fileno()``: no thread sits in ``queue.get()`` -- and
pushes each result to every connected TCP client.

Why a ``Queue`` and not a ``SimpleQueue``: ``SimpleQueue.put()`` writes the
item into the pipe itself and blocks once the pipe is full (64 KiB), until
somebody reads -- but the server reads only after the release that comes
after ``put()``: with a big payload, both would wait for ever.
``Queue.put()`` hands the item to a feeder thread and returns at once, so
the release follows; the server's ``get()`` then takes the item, which is
already on its way (it costs the transfer of one item; for payloads so big
that this would stall the loop, read them in an executor, or write them to
a file and send its name).

The server listens on 127.0.0.1 on a free port; a client in the same loop
connects, collects the results and prints them.

Run:  python examples/asyncio_wakeup.py
"""
import asyncio
import multiprocessing
import threading
import time

import efd

JOBS = 5
PAYLOAD = 1 << 20                      # bytes of payload per job


def worker(done, results, n):
    # Runs in a child process (spawn: a fresh interpreter).
    for i in range(n):
        time.sleep(0.02)               # a slow job
        results.put((i, i * i, bytes(PAYLOAD)))   # the payload on the queue,
        done.release()                 # the wake-up through the EventFD
    results.put(None)
    done.release()
    done.close()
    results.close()
    results.join_thread()              # the feeder thread has sent it all


async def main():
    ctx = multiprocessing.get_context("spawn")
    done = efd.EventFD(semaphore=True)     # one unit per queued item
    results = ctx.Queue()
    clients = set()
    first_client = asyncio.Event()

    async def handle(reader, writer):
        clients.add(writer)
        first_client.set()
        await reader.read()                # until the client hangs up
        clients.discard(writer)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def broadcast():
        wakeups = 0
        while True:
            # Waits in the event loop; False only if 30 s pass with nothing.
            if not await done.acquire_async(timeout=30):
                raise TimeoutError("the worker went quiet")
            wakeups += 1
            # On its way: the unit was released after put().
            item = results.get(timeout=30)
            line = ("done\n" if item is None else "job %d -> %d (%d bytes)\n"
                    % (item[0], item[1], len(item[2])))
            for w in list(clients):
                w.write(line.encode())
                await w.drain()
            if item is None:
                return wakeups

    async def client():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        lines = []
        while True:
            line = (await reader.readline()).decode().strip()
            if line in ("done", ""):
                break
            lines.append(line)
        writer.close()
        return lines

    client_task = asyncio.ensure_future(client())
    await asyncio.wait_for(first_client.wait(), 30)
    proc = ctx.Process(target=worker, args=(done, results, JOBS))
    proc.start()
    wakeups = await asyncio.wait_for(broadcast(), 60)
    threads_while_serving = threading.active_count()
    lines = await asyncio.wait_for(client_task, 30)
    proc.join(timeout=30)
    server.close()
    await server.wait_closed()
    done.close()

    for line in lines:
        print("client got:", line)
    print("server woken %d times; threads in this process: %d"
          % (wakeups, threads_while_serving))


if __name__ == "__main__":
    asyncio.run(main())
