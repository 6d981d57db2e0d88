"""Wait on several EventFDs at once with the selectors module.

Three counters ("orders", "alerts", "shutdown") are fed by a background
thread; the main thread waits on all of them in one select() call and
handles whichever are ready.  Nothing polls in a loop and no thread is
needed per counter: fileno() is readable exactly while a count is above
zero, on every backend.

Run:  python examples/select_many.py
"""
import selectors
import threading
import time

import efd


def feeder(orders, alerts, shutdown):
    for i in range(5):
        orders.release(2)          # two orders arrive
        if i % 2 == 0:
            alerts.release()       # and sometimes an alert
        time.sleep(0.01)
    shutdown.release()


def main():
    # Normal (counter) mode: one read() takes everything that has
    # accumulated, so a burst of releases costs one wake-up.  nonblocking=True
    # makes read() raise BlockingIOError instead of waiting when empty.
    orders = efd.EventFD(nonblocking=True)
    alerts = efd.EventFD(nonblocking=True)
    shutdown = efd.EventFD()
    totals = {"orders": 0, "alerts": 0}

    sel = selectors.DefaultSelector()
    sel.register(orders, selectors.EVENT_READ, "orders")
    sel.register(alerts, selectors.EVENT_READ, "alerts")
    sel.register(shutdown, selectors.EVENT_READ, "shutdown")

    t = threading.Thread(target=feeder, args=(orders, alerts, shutdown))
    t.start()
    running = True
    while running:
        events = sel.select(timeout=10)
        assert events, "nothing happened for 10 seconds"
        for key, _ in events:
            if key.data == "shutdown":
                running = False
                continue
            # read() returns the whole count: the sum of the releases
            # since the last read.
            totals[key.data] += key.fileobj.read()
    t.join(timeout=30)

    # The feeder has finished: collect what arrived after the last wake-up.
    for name, ev in (("orders", orders), ("alerts", alerts)):
        try:
            totals[name] += ev.read()
        except BlockingIOError:
            pass                   # nothing left
    sel.close()
    for ev in (orders, alerts, shutdown):
        ev.close()
    print("orders:", totals["orders"], "alerts:", totals["alerts"])


if __name__ == "__main__":
    main()
