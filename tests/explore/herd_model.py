"""herd_model.py -- the schedules of the kernel counter's loop helpers.

The protocol of a loop's helper on the kernel counter (src/efd_herd.c, "A
loop's helper on the kernel counter", steps H1 .. H5) lives partly in the
kernel: an eventfd's count, and epoll's exclusive wake-ups.  The C
explorer (explore.c) runs the real code of the memory backends under its
scheduler, but has no model of epoll; this file checks the herd helper's
steps against one instead, the way explore.c checks the futex protocol:
actors that yield at every step another actor could see, run under a
cooperative scheduler that explores every interleaving up to a preemption
bound (stateless depth-first search by re-execution, as CHESS does), with
-- optionally -- the death of a loop's process at every step.

The kernel, as Linux 6.x does it (fs/eventpoll.c, fs/eventfd.c):

* a write to the eventfd (a release, or a nudge: a write of 0) adds n to
  the count and walks the counter's wait queue in registration order:
  each exclusive registration's item is put on its epoll instance's ready
  list, and the walk stops at the first instance with a thread asleep in
  epoll_wait(), which is woken (ep_poll_callback's ewake);
* a thread in epoll_wait() harvests its ready list; an edge-triggered item
  is taken off it, and reported only if the counter is readable then
  (ep_send_events polls it again); with nothing to report it sleeps on;
* the helper's command channel wakes its own instance only;
* a process killed loses its registrations (its descriptors close).

The helper and its loop mirror efd_herd.c's efd_herd_helper_main and the
loop side of efd_loop.c (sleep(), woke(), rest()) as efd/_aio.py drives it
(a task's first try is a read; a served loop with tasks left sleeps again,
which answers the call; a loop with none rests).

Invariants: the count is conserved (released = taken + count, reads being
atomic); and nothing is lost: when every live actor is blocked while a
live loop still wants units and units are there, the schedule may go on
only through a helper's 100 ms timeout -- which is a lost wake-up unless a
process died in this schedule (a loop killed after a release chose it:
the re-check is the bound, SPEC 5) -- and with no such timeout left it is
a unit lost for good.

Usage: python herd_model.py [-p BOUND] [-k] [-s SCENARIO] [-m MAX] [-l]
                            [--mutate no-pass-on-helper|no-pass-on-loop]
Exit status 1 if a scenario fails (its first failing schedule is printed).
"""
import argparse
import sys

RECHECK = "timeout"
#: Steps after which a schedule counts as a livelock.
MAX_STEPS = 400


class World:
    """The kernel's state and every process's memory."""

    def __init__(self, loops, mutate=None):
        self.count = 0
        self.released = self.taken = 0
        self.regs = list(range(len(loops)))     # exclusive, in order
        self.ready = [False] * len(loops)       # edge on the ready list
        self.asleep = [False] * len(loops)      # in epoll_wait, on ep->wq
        self.woken = [False] * len(loops)
        self.cmd = [False] * len(loops)         # command channel readable
        self.door = [False] * len(loops)        # the loop's door readable
        self.want = [0] * len(loops)
        self.calls = [0] * len(loops)
        self.answered = [0] * len(loops)
        self.waiting = [0] * len(loops)         # the call H4 waits on; 0
        self.seen = [0] * len(loops)            # the loop's, at woke()
        self.tasks = list(loops)                # units each loop wants
        self.alive = [True] * len(loops)
        self.mutate = mutate

    # -- the kernel ------------------------------------------------------

    def write(self, n):
        """An eventfd write: n units (0: a nudge), one exclusive wake-up."""
        self.count += n
        self.released += n
        for h in self.regs:
            if not self.alive[h]:
                continue
            self.ready[h] = True
            if self.asleep[h]:
                self.asleep[h] = False
                self.woken[h] = True
                break

    def ring(self, h):
        """The loop writes its helper's command channel."""
        self.cmd[h] = True
        if self.asleep[h]:
            self.asleep[h] = False
            self.woken[h] = True

    def pass_on(self, by="helper"):
        """helper_pass_on() (by the helper: it may have been chosen and
        its loop will not take, or does not answer in time) or
        efd_pass_on() (by the loop, at a quiet rest): a nudge if units are
        there.  The mutations leave out the helper's, or the loop's."""
        if self.count > 0 and self.mutate != "no-pass-on-" + by:
            self.write(0)

    def read(self):
        """A non-blocking semaphore read: a unit, or None."""
        if self.count > 0:
            self.count -= 1
            self.taken += 1
            return True
        return False


# -- the actors: generators that yield at every step ------------------------
#
# yield "name"               a point: another actor may run next
# yield ("block", cond, t)   blocked until cond() holds; t: the wait has a
#                            time limit (the scheduler may end it with
#                            RECHECK once nobody can run)

def helper(w, h):
    """efd_herd_helper_main (efd_herd.c), for loop h."""
    yield "H: start"
    while True:
        if not w.want[h]:
            yield ("block", lambda: w.cmd[h], False)                # H1
            w.cmd[h] = False
            yield "H1: drained"
            continue
        w.cmd[h] = False                                            # H2
        yield "H2: drained"
        if not w.want[h]:
            continue
        chosen = False
        if w.count == 0:
            yield "H2: looked, nothing"
            # H3: epoll_wait with EFD_RECHECK_MS.
            w.asleep[h] = True
            while True:
                got = yield ("block", lambda: w.woken[h] or w.ready[h]
                             or w.cmd[h], True)
                w.woken[h] = False
                if got == RECHECK:
                    w.asleep[h] = False
                    break
                # Harvest: an edge is reported only if readable now.
                if w.ready[h]:
                    w.ready[h] = False
                    if w.count > 0:
                        chosen = True
                if chosen or w.cmd[h]:
                    w.asleep[h] = False
                    break
                w.asleep[h] = True          # nothing to report: sleep on
            yield "H3: awake"
            if not w.want[h]:
                w.pass_on()
                yield "H3: left"
                continue
            if w.count == 0:
                yield "H3: nothing there"
                continue
        # H4: call the loop, wait for its answer.
        w.calls[h] += 1
        call = w.calls[h]
        w.waiting[h] = call
        w.door[h] = True
        yield "H4: called"
        passed = False
        while w.want[h] and w.answered[h] < call:
            # poll() on the command channel alone: a change the loop
            # does not ring for (a quiet rest) is seen at the next ring,
            # or when the wait for the answer times out.
            got = yield ("block", lambda: w.cmd[h], not passed)
            w.cmd[h] = False
            if got == RECHECK and not passed:
                w.pass_on()
                passed = True
            yield "H4: answer?"
        w.waiting[h] = 0
        yield "H4: done waiting"
        if w.want[h]:                                               # H5
            w.regs.remove(h)
            w.regs.append(h)
            # EPOLL_CTL_ADD polls the counter at once.
            if w.count > 0:
                w.ready[h] = True
            yield "H5: rotated"
        else:
            w.pass_on()
            yield "H5: passed on"


def loop(w, h, quits=False, again=0):
    """The loop of process h (efd/_aio.py through efd_loop.c); with
    `quits`, its task gives up the first time its helper calls it (a
    timeout, a cancel) and the loop rests; with `again`, that many units
    are wanted anew after the rest (a new task)."""
    yield "L: start"
    for want_more in (False, True):
        if want_more:
            if not again:
                return
            w.tasks[h], quits = again, False
            yield "L: a new task"
        yield from loop_round(w, h, quits)


def loop_round(w, h, quits):
    """Tasks wait until served (or give up), then the loop rests."""
    while w.tasks[h] > 0:
        if w.read():                            # a task's first try
            w.tasks[h] -= 1
            yield "L: took at once"
            continue
        yield "L: tried"
        # sleep(): want, answer the calls seen, ring if anything changed.
        changed = not w.want[h] or w.seen[h] != w.answered[h]
        w.want[h] = 1
        w.answered[h] = w.seen[h]
        if changed:
            w.ring(h)
        yield "L: sleep()"
        if w.count == 0:
            yield ("block", lambda: w.door[h], False)
            w.door[h] = False                   # woke()
            w.seen[h] = w.calls[h]
            yield "L: woke()"
        if quits:
            w.tasks[h] = 0
            break
        while w.tasks[h] > 0 and w.read():      # _ready(): serve the queue
            w.tasks[h] -= 1
            yield "L: served"
        if w.tasks[h] > 0:
            continue                            # sleeps again: answers
    if w.seen[h] != w.answered[h] and w.waiting[h] == w.seen[h]:
        # rest() quietly (efd_loop.c, helper_rest_quietly): the helper
        # waits in H4 for the answer to the call this loop saw, asleep on
        # nothing a release wakes.  Answer without ringing, and pass on
        # the wake-up the call may stand for.
        w.want[h] = 0
        w.answered[h] = w.seen[h]
        yield "L: rest(), quietly"
        w.pass_on("loop")
        yield "L: passed on"
        return
    # rest(): nobody waits; every call answered with "not taking".
    w.want[h] = 0
    w.answered[h] = w.calls[h]
    w.ring(h)
    yield "L: rest()"


def releaser(w, amounts):
    yield "R: start"
    for n in amounts:
        w.write(n)
        yield "R: released %d" % n


# -- scenarios ----------------------------------------------------------------

SCENARIOS = {
    # name: (units each loop wants, which loops quit, releases, units
    # each loop wants again after its rest)
    "two-loops-one-each": ([1, 1], [], [1, 1], [0, 0]),
    "release-two-at-once": ([1, 1], [], [2], [0, 0]),
    "one-loop-two-tasks": ([2, 1], [], [2, 1], [0, 0]),
    "woken-loop-gives-up": ([1, 1], [0], [1], [0, 0]),
    "three-loops": ([1, 1, 1], [], [1, 2], [0, 0, 0]),
    "gives-up-then-waits-again": ([1, 1], [0], [1, 1], [1, 0]),
}


def build(name, mutate):
    wants, quitters, amounts, again = SCENARIOS[name]
    w = World(wants, mutate)
    actors = []                 # (label, process or None, generator)
    for h in range(len(wants)):
        actors.append(("loop%d" % h, h, loop(w, h, h in quitters,
                                             again[h])))
        actors.append(("helper%d" % h, h, helper(w, h)))
    actors.append(("releaser", None, releaser(w, amounts)))
    return w, actors


class Failure(Exception):
    pass


def run_schedule(name, prefix, bound, deaths, mutate):
    """Play one schedule: `prefix` fixes the first choices, the default
    (keep running the current actor) the rest.  Returns (trace, the
    decisions: (choice, alternatives))."""
    w, actors = build(name, mutate)
    n = len(actors)
    state = [None] * n          # None runnable, else ("block", cond, t)
    done = [False] * n
    sent = [None] * n
    trace, decisions = [], []
    current, preemptions, died = 0, 0, False

    def step(i):
        try:
            r = actors[i][2].send(sent[i])
        except StopIteration:
            done[i] = True
            return
        sent[i] = None
        if isinstance(r, tuple):
            state[i] = r
            trace.append("%s blocks" % actors[i][0])
        else:
            state[i] = None
            trace.append("%s: %s" % (actors[i][0], r))

    # Start every actor up to its first point.
    for i in range(n):
        step(i)
    while True:
        live = [i for i in range(n) if not done[i]
                and (actors[i][1] is None or w.alive[actors[i][1]])]
        for i in live:
            if state[i] is not None and state[i][1]():
                state[i] = None             # unblocked
        runnable = [i for i in live if state[i] is None]
        if not runnable:
            wanting = [h for h in range(len(w.tasks))
                       if w.alive[h] and w.tasks[h] > 0]
            timed = [i for i in live if state[i] is not None
                     and state[i][2]]
            if not wanting or w.count == 0:
                # Everybody served or dead; or the releases are over (the
                # releaser never blocks) and what is left waits for units
                # nobody will give.
                break
            if not died:
                raise Failure("lost wake-up: %d unit(s) there, loop(s) %s "
                              "wait, every live actor blocked" %
                              (w.count, wanting), trace)
            if not timed:
                raise Failure("unit lost for good: %d there, loop(s) %s "
                              "wait" % (w.count, wanting), trace)
            # The 100 ms re-check, after a death.
            options = [("timeout", i) for i in timed]
        else:
            options = [("run", i) for i in runnable]
            if deaths and not died:
                options += [("kill", i) for i in runnable
                            if actors[i][1] is not None]
        # Default: keep running the current actor; a switch away from it
        # while it could go on costs one preemption.
        default = ("run", current) if ("run", current) in options \
            else options[0]
        k = len(decisions)
        if k < len(prefix):
            choice = prefix[k]
        else:
            choice = default
        alts = [o for o in options if o != choice and
                (preemptions + (1 if o[0] == "run" and
                                ("run", current) in options and
                                o[1] != current else 0)) <= bound]
        decisions.append((choice, alts))
        if len(decisions) > MAX_STEPS:
            raise Failure("no end after %d steps (a livelock)" % MAX_STEPS,
                          trace)
        kind, i = choice
        if kind == "run" and ("run", current) in options and i != current:
            preemptions += 1
        if kind == "kill":
            p = actors[i][1]
            w.alive[p] = False
            died = True
            if p in w.regs:
                w.regs.remove(p)
            trace.append("** process %d killed at %s's point" % (p, actors[i][0]))
            continue
        if kind == "timeout":
            sent[i] = RECHECK
            state[i] = None
            trace.append("%s times out (re-check)" % actors[i][0])
        current = i
        step(i)
        if w.count + w.taken != w.released:
            raise Failure("count not conserved", trace)
    return trace, decisions


def explore_all(name, bound, deaths, mutate=None, limit=200000):
    """Depth-first over the choice tree (a stack of prefixes: each is
    pushed once, by the schedule that first reached its last decision)."""
    schedules = 0
    stack = [[]]
    while stack:
        prefix = stack.pop()
        schedules += 1
        try:
            _, decisions = run_schedule(name, prefix, bound, deaths, mutate)
        except Failure as f:
            return schedules, f
        if schedules >= limit:
            return schedules, None
        for k in range(len(prefix), len(decisions)):
            choice, alts = decisions[k]
            base = [d[0] for d in decisions[:k]]
            for a in alts:
                stack.append(base + [a])
    return schedules, None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-p", type=int, default=2, help="preemption bound")
    ap.add_argument("-k", action="store_true",
                    help="a death of a loop's process at every point")
    ap.add_argument("-s", help="one scenario")
    ap.add_argument("-l", action="store_true", help="list the scenarios")
    ap.add_argument("-m", type=int, default=200000,
                    help="stop a scenario after this many schedules")
    ap.add_argument("--mutate", choices=["no-pass-on-helper",
                                         "no-pass-on-loop"],
                    help="break the protocol on purpose (the check must "
                         "fail)")
    args = ap.parse_args(argv)
    if args.l:
        print("\n".join(SCENARIOS))
        return 0
    names = [args.s] if args.s else list(SCENARIOS)
    failed = 0
    for name in names:
        n, f = explore_all(name, args.p, args.k, args.mutate, args.m)
        if f is None:
            print("%-24s ok: %d schedules%s" % (
                name, n, " (the limit)" if n >= args.m else " (all)"))
        else:
            failed += 1
            msg, trace = f.args
            print("%-24s FAILED after %d schedules: %s" % (name, n, msg))
            for line in trace[-40:]:
                print("    " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
