/*
 * efd_herd.c -- one wake-up per unit for the backends that wait in poll():
 * eventfd, eventfd-readback and pipe where there are no futexes (the
 * futex backend, and pipe where futexes are, wake one sleeper per unit by
 * construction).
 *
 * If every waiter polled the readiness descriptor, every release would
 * wake all of them and all but one would go back to sleep: a thundering
 * herd, O(N) work per unit.  Instead, the threads of one process that wait
 * to take units from one object share one epoll instance (the "herd"),
 * made on the first such wait.  A thread asleep in epoll_wait() on a shared
 * instance is woken alone.  The readiness descriptor is registered in it
 *
 *   - edge-triggered and with EPOLLEXCLUSIVE (Linux 4.5), for the kernel
 *     counter (eventfd, eventfd-readback): a release wakes one thread of
 *     one process.  EPOLLEXCLUSIVE stops the kernel's wake-up at the first
 *     process's instance that has a thread asleep in it; the edge wakes one
 *     thread of that process.  Every write to an eventfd makes an edge, so
 *     every release wakes one waiter.  A release(n) offers n units for one
 *     edge: a waiter that was woken and leaves units behind -- it took one
 *     of several, or leaves without one (timeout, signal, error) -- nudges
 *     (a write of 0: an edge, the count unchanged), which wakes the next
 *     exclusive waiter.  A waiter that loses the race for the unit finds
 *     the count empty and has nothing to hand on.  A waiter killed after it
 *     was chosen hands nothing on: everyone asleep looks at the count again
 *     every EFD_RECHECK_MS (SPEC §5);
 *   - level-triggered and plainly where the kernel refuses EPOLLEXCLUSIVE
 *     (the kernel hands a level-triggered event on to the next sleeper of
 *     an instance, which goes back to sleep inside the kernel if the count
 *     has gone meanwhile), and level-triggered and one-shot for the pipe
 *     backend: a memory backend's release that finds the token already
 *     there writes nothing, so no edge would announce its unit, while a
 *     level-triggered registration stays ready as long as the token is
 *     there.  The token may outlive the count for a moment (until whoever
 *     took the last unit takes it too); one-shot, a single sleeper is
 *     handed the event, looks, and arms it again (efd_herd_rearm) -- after
 *     a back-off, kept by that one sleeper, if the token was stale and its
 *     lock held (efd_wait.c).  One
 *     thread of each waiting process wakes.

 * close() writes the herd's kick channel, registered level-triggered: every
 * sleeper wakes, one after another, and sees the object closed.
 *
 * The watch.  Whatever the registration, a waiter that dies owing a
 * wake-up (chosen, then killed before it took the unit or handed it on;
 * or a pipe's token left missing) leaves units that no event announces:
 * someone must look at the count itself every EFD_RECHECK_MS (SPEC 5).
 * Such a death is another process's -- this process's threads die with
 * it -- so one sleeper per herd suffices: the first sleeper to find the
 * watch free (herd_watch 0) keeps it, and sleeps in slices of
 * EFD_RECHECK_MS; the others sleep without a limit.  A sleeper that
 * keeps the watch and leaves (it took a unit, its time ran out, a signal
 * handler raised) frees the watch and then, if anyone is asleep, writes
 * the watch's channel, registered edge-triggered: the kernel hands the
 * event to one sleeper of the instance (or keeps it for the next to
 * sleep), which drains the channel and takes the watch.  A sleeper counts
 * itself asleep (herd_asleep) before it reads herd_watch, and the leaver
 * frees herd_watch before it reads the count: the leaver sees the sleeper
 * and rings, or the sleeper sees the watch free and takes it.  So while
 * the herd has sleepers one of them keeps the watch, and a thousand idle readers in
 * one process wake ten times a second between them, not each.  The main
 * thread sleeps in slices whatever it keeps (a signal another thread
 * caught wakes nobody, and only the main thread runs the handler).  A
 * keeper hands the watch on before it goes for the GIL -- to leave, or
 * the main thread to run Python code (efd_wait.c) -- which another
 * thread may hold for long: the other sleepers look without it.  A unit
 * that the watch finds goes on as a wake-up does (efd_wait.c): whoever
 * takes one and sees more hands a wake-up on.
 *
 * The instance belongs to one process: a fork child closes its copy
 * (efd_wait.c's forget_parent) and makes its own.  Other watchers of the
 * descriptor -- select() and poll() on fileno(), event loops that register
 * it plainly -- are woken as before: the kernel wakes every non-exclusive
 * watcher before it picks an exclusive one.
 */
#include "efd_module.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#if defined(__linux__)
#  include <sys/epoll.h>
#endif

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)

#if defined(__linux__) && defined(EPOLLEXCLUSIVE)

enum { HERD_READY = 1, HERD_KICK = 2, HERD_WATCH = 3 };

/* What this kernel offers: EFD_HERD_EXCLUSIVE, EFD_HERD_SHARED (epoll, but
 * EPOLLEXCLUSIVE refused) or EFD_HERD_NONE (no epoll: every waiter polls).
 * Tried on a pipe, so that it needs no eventfd. */
int
efd_herd_probe(void)
{
    struct epoll_event ev;
    int ep, p[2], result = EFD_HERD_EXCLUSIVE;
    if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return EFD_HERD_NONE;
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        close(ep);
        return EFD_HERD_SHARED;
    }
    ev.events = EPOLLIN | EPOLLET | EPOLLEXCLUSIVE;
    ev.data.u64 = 0;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) < 0)
        result = EFD_HERD_SHARED;
    close(p[0]);
    close(p[1]);
    close(ep);
    return result;
}

/* Only a backend that can nudge wakes exclusively (efd.h: nudge). */
static int
can_nudge(const efd_impl *impl)
{
    return impl->fd >= 0 && impl->ops->nudge != NULL;
}

int
efd_herd_wake_one(eventfd_object *self)
{
    efd_state *st = self->state;
    if (st->herd < 0)
        st->herd = efd_herd_probe();
    return st->herd == EFD_HERD_EXCLUSIVE && can_nudge(&self->impl);
}

int
efd_herd_open(eventfd_object *self)
{
    struct epoll_event ev;
    int ep, krfd = -1, kwfd = -1, wrfd = -1, wwfd = -1, err, exclusive;
    int oneshot, eventfd_ok;
    if (self->herd_ep >= 0)
        return 0;
    exclusive = efd_herd_wake_one(self);
    if (self->state->herd == EFD_HERD_NONE)
        return ENOSYS;
    if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return errno;
    eventfd_ok = self->impl.ops->syscall_always || self->impl.chan_eventfd;
    if ((err = efd_chan_open(&krfd, &kwfd, eventfd_ok, 1)) != 0
            || (err = efd_chan_open(&wrfd, &wwfd, eventfd_ok, 1)) != 0)
        goto fail;
    ev.events = EPOLLIN;
    ev.data.u64 = HERD_KICK;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, krfd, &ev) < 0)
        goto fail_errno;
    /* The watch's channel: edge-triggered, so that each hand-over wakes
     * one sleeper once. */
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = HERD_WATCH;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, wrfd, &ev) < 0)
        goto fail_errno;
    /* A memory backend's token may outlive its count for a moment (until
     * its mover takes it): level-triggered, every sleeper would be handed
     * the event in turn meanwhile.  One-shot, one sleeper gets it, and
     * arms it again once it has looked (efd_herd_rearm). */
    oneshot = !exclusive && !self->impl.ops->syscall_always;
    ev.events = exclusive ? EPOLLIN | EPOLLET | EPOLLEXCLUSIVE
              : oneshot ? EPOLLIN | EPOLLONESHOT : EPOLLIN;
    ev.data.u64 = HERD_READY;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, self->impl.fd, &ev) < 0)
        goto fail_errno;
    self->herd_ep = ep;
    self->herd_krfd = krfd;
    self->herd_kwfd = kwfd;
    self->herd_wrfd = wrfd;
    self->herd_wwfd = wwfd;
    __atomic_store_n(&self->herd_watch, 0, __ATOMIC_RELEASE);
    self->herd_exclusive = exclusive;
    self->herd_oneshot = oneshot;
    return 0;
fail_errno:
    err = errno;
fail:
    efd_chan_close(&krfd, &kwfd);
    efd_chan_close(&wrfd, &wwfd);
    close(ep);
    return err;
}

/* Fairness across processes: the kernel offers an exclusive wake-up to the
 * registrations in the order they were made, so the first process to
 * register would win every unit while it has a thread asleep.  A process
 * that took a unit registers again, which moves it to the back.  A
 * release in between finds the descriptor ready when it is added back
 * (epoll looks at once), so nothing is missed. */
static void
register_again(int ep, int fd, uint64_t tag)
{
    struct epoll_event ev;
    ev.events = EPOLLIN | EPOLLET | EPOLLEXCLUSIVE;
    ev.data.u64 = tag;
    if (epoll_ctl(ep, EPOLL_CTL_DEL, fd, &ev) == 0)
        (void)epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

void
efd_herd_rotate(eventfd_object *self)
{
    register_again(self->herd_ep, self->impl.fd, HERD_READY);
}

void
efd_herd_rearm(eventfd_object *self)
{
    struct epoll_event ev;
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.u64 = HERD_READY;
    (void)epoll_ctl(self->herd_ep, EPOLL_CTL_MOD, self->impl.fd, &ev);
}

/* Take the watch if nobody keeps it. */
static void
watch_take(eventfd_object *self, efd_waiter *w)
{
    int free = 0;
    if (!w->watching
            && __atomic_compare_exchange_n(&self->herd_watch, &free, 1, 0,
                                           __ATOMIC_SEQ_CST,
                                           __ATOMIC_SEQ_CST))
        w->watching = 1;
}

int
efd_herd_sleep(eventfd_object *self, efd_waiter *w, int ms, int slices,
               short *revents)
{
    /* Room for every event: a close(), the watch and the release's one
     * wake-up may come together, and the wake-up must not stay unseen
     * (and so not handed on). */
    struct epoll_event ev[3];
    int i, n;
    /* Counted asleep before it looks at the watch: a keeper handing it on
     * frees it and then reads the count (efd_herd_leave), so it sees this
     * sleeper and rings, or this sleeper sees the watch free. */
    __atomic_add_fetch(&self->herd_asleep, 1, __ATOMIC_SEQ_CST);
    watch_take(self, w);
    if ((w->watching || slices) && (ms < 0 || ms > EFD_RECHECK_MS))
        ms = EFD_RECHECK_MS;
    n = epoll_wait(self->herd_ep, ev, 3, ms);
    __atomic_sub_fetch(&self->herd_asleep, 1, __ATOMIC_SEQ_CST);
    *revents = 0;
    for (i = 0; i < n; i++) {
        if (ev[i].data.u64 == HERD_READY)
            *revents = (ev[i].events & EPOLLIN) ? POLLIN : POLLERR;
        else if (ev[i].data.u64 == HERD_WATCH) {
            /* The watch was handed to us: take it now, so that whatever
             * this wake-up leads to -- sleeping again, or leaving (a
             * descriptor closed behind our back) -- it goes on. */
            efd_chan_drain(self->herd_wrfd);
            watch_take(self, w);
        }
    }
    return n;
}

void
efd_herd_leave(eventfd_object *self, efd_waiter *w)
{
    if (!w->watching)
        return;
    w->watching = 0;
    /* Free it, then ring if anyone sleeps (or is about to): one that saw
     * it kept gets the event.  Nobody asleep: the next to sleep finds it
     * free.  (One counted but waking meanwhile leaves a spare event,
     * which whoever sleeps next takes, with the watch.)  No GIL needed:
     * the caller may be on its way to wait for it. */
    __atomic_store_n(&self->herd_watch, 0, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&self->herd_asleep, __ATOMIC_SEQ_CST) > 0
            && self->herd_wwfd >= 0)
        efd_chan_put(self->herd_wrfd, self->herd_wwfd);
}

void
efd_herd_nudge(efd_impl *impl)
{
    if (can_nudge(impl))
        impl->ops->nudge(impl);
}

/* ---- A loop's helper on the kernel counter -----------------------------
 *
 * An event loop cannot sleep in a herd above: its thread sleeps in its
 * own selector, and a loop that merely watches an epoll instance's
 * descriptor is not asleep in that instance, so the kernel's exclusive
 * wake-up passes it by and every loop polls readable.  Registering the
 * counter with EPOLLEXCLUSIVE in the loop's own epoll set works only
 * where efd can reach that set (asyncio's default selector, through its
 * private attributes: efd/_aio.py); trio and uvloop keep every loop
 * awake at every release.  So, as on the futex backend, the loop's sleep
 * is a thread of efd's, the helper (efd_loop.c makes it and talks to
 * it): it sleeps in an epoll instance of its own, where the counter is
 * registered edge-triggered and with EPOLLEXCLUSIVE, and rings the loop's
 * door when units may be there.  Whatever the loop library, a release
 * wakes one helper of all those asleep in every process, and that
 * helper's loop.
 *
 * Why the helper's own instance, not the process's herd.  The loop
 * commands its helper (want, answered, stop) through a channel the
 * helper's instance watches.  In the herd, that channel's event could go
 * to any of the process's blocked threads asleep in the same instance --
 * the kernel hands an instance's event to one of its sleepers -- and not
 * to the helper.  Alone in its instance, the helper gets every command,
 * and the kernel counts its instance as one more exclusive sleeper, as
 * it counts the herd of each process.
 *
 * The steps, and why no unit is missed:
 *   H1  while the loop wants nothing, the helper sleeps in poll() on its
 *       command channel only.  Its instance then has nobody asleep in
 *       it, and the kernel passes it by for an exclusive wake-up: an idle
 *       helper takes no release's wake-up.  (The edge is queued in the
 *       instance's ready list all the same, and seen at H3 later: one
 *       look for nothing.)
 *   H2  wanting: it drains the channel, then reads `want` and `stop` (a
 *       command written after the drain leaves the channel readable, so
 *       the sleep at H3 returns at once), and looks at the count.
 *   H3  nothing there: it sleeps in epoll_wait() on its instance for at
 *       most EFD_RECHECK_MS.  A release after H2's look either finds it
 *       asleep (its instance is the one woken, or another one is) or
 *       queues the edge in its instance's ready list, which this
 *       epoll_wait() returns at once: a release between the look and the
 *       sleep is not lost.
 *   H4  units there (after H2 or H3): it calls the loop -- `calls` up,
 *       the door rung -- and waits for the loop's answer on its channel.
 *       The loop answers with its next sleep() (it looked, took what its
 *       tasks wanted, and still waits) or rest() (nobody waits).  A rest()
 *       that answers a call the loop saw does not ring: the helper, here,
 *       sleeps on nothing a release wakes, so the loop passes the wake-up
 *       on itself and the helper learns of the rest at the loop's next
 *       sleep(), which rings -- one wake-up of the helper per hand-off
 *       fewer (efd_loop.c, helper_rest_quietly).  A loop
 *       that does not answer within EFD_RECHECK_MS holds units from the
 *       others: the helper passes the wake-up on then (a nudge, once), as
 *       SPEC 5 bounds what a waiter that does not come may cost.
 *   H5  answered and still wanted: the loop took, or someone else did;
 *       the helper registers the counter again, at the back of the
 *       kernel's line (register_again's fairness), and goes to H2.  Not
 *       wanted any more: if units are there, it passes the wake-up on (a
 *       nudge: the next exclusive sleeper wakes), since it may have been
 *       the one chosen, and goes to H1.
 * A nudge is a write of 0 (efd.h: nudge): an edge, the count unchanged.
 * tests/explore/herd_model.py explores the schedules of these steps and
 * their loops' (up to a preemption bound, and a number of schedules per
 * scenario) against a model of the kernel's eventfd and epoll, with a
 * process killed at each point: no unit is left unannounced while a loop
 * waits, but by a death (and a helper that does not pass the wake-up on
 * is caught at once).
 *
 * Deaths.  A release is one write(): count and wake-up in one system
 * call, so a releaser's death owes nothing.  A helper chosen and then
 * killed with its process before its loop took the unit owes a wake-up
 * that no event announces; nor does its death tell anyone (the kernel
 * counter has no page on which a death bell could ring).  So a wanting
 * helper looks at the count every EFD_RECHECK_MS (H3's limit), as the
 * herd's watch does for blocked threads, and a unit left so is found
 * within that bound.  (On the futex backend the bell tells of such a
 * death, and helpers sleep without a limit.)
 *
 * The helper never touches Python, takes no lock, and blocks every
 * signal (efd_loop.c starts it so). */

enum { HELPER_READY = 1, HELPER_CMD = 2 };

int
efd_herd_helper_open(efd_helper *h, int allow_eventfd)
{
    struct epoll_event ev;
    int ep, err;
    h->ep = h->cmd_r = h->cmd_w = -1;
    if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return errno;
    if ((err = efd_chan_open(&h->cmd_r, &h->cmd_w, allow_eventfd, 1)) != 0) {
        close(ep);
        return err;
    }
    ev.events = EPOLLIN;
    ev.data.u64 = HELPER_CMD;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, h->cmd_r, &ev) < 0)
        goto fail;
    ev.events = EPOLLIN | EPOLLET | EPOLLEXCLUSIVE;
    ev.data.u64 = HELPER_READY;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, h->impl->fd, &ev) < 0)
        goto fail;
    h->ep = ep;
    return 0;
fail:
    err = errno;
    close(ep);
    efd_chan_close(&h->cmd_r, &h->cmd_w);
    return err;
}

void
efd_herd_helper_close(efd_helper *h)
{
    efd_close_fd(&h->ep);
    efd_chan_close(&h->cmd_r, &h->cmd_w);
}

/* Sleep on the command channel alone (ms < 0: no limit); then drain it.
 * 0 if it was written, ETIMEDOUT. */
static int
helper_wait_cmd(efd_helper *h, int ms)
{
    struct pollfd p;
    int n;
    p.fd = h->cmd_r;
    p.events = POLLIN;
    p.revents = 0;
    n = poll(&p, 1, ms);
    efd_chan_drain(h->cmd_r);
    return n == 0 ? ETIMEDOUT : 0;
}

/* H5, or a loop that does not answer: the wake-up goes on if units are
 * there. */
static void
helper_pass_on(efd_impl *impl)
{
    if (efd_ready_now(impl) == 0)
        efd_herd_nudge(impl);
}

/* H4: call the loop, and wait until it answered or stops wanting; after
 * EFD_RECHECK_MS without an answer, the wake-up goes on (once). */
static void
helper_call(efd_helper *h)
{
    uint32_t call = atomic_fetch_add(&h->calls, 1) + 1;
    int passed = 0;
    atomic_store(&h->waiting, call);    /* before the door: see rest() */
    efd_chan_put(h->door, h->door_w);
    while (efd_helper_wanted(h)
           && (int32_t)(atomic_load(&h->answered) - call) < 0) {
        if (helper_wait_cmd(h, passed ? -1 : EFD_RECHECK_MS) == ETIMEDOUT
                && !passed) {
            helper_pass_on(h->impl);
            passed = 1;
        }
    }
    atomic_store(&h->waiting, 0);
}

void *
efd_herd_helper_main(void *arg)
{
    efd_helper *h = arg;
    efd_impl *impl = h->impl;
    while (!atomic_load(&h->stop)) {
        struct epoll_event ev[2];
        int n;
        if (!atomic_load(&h->want)) {
            (void)helper_wait_cmd(h, -1);                       /* H1 */
            continue;
        }
        efd_chan_drain(h->cmd_r);                               /* H2 */
        if (!efd_helper_wanted(h))
            continue;
        if (efd_ready_now(impl) != 0) {
            atomic_store(&h->asleep, 1);
            n = epoll_wait(h->ep, ev, 2, EFD_RECHECK_MS);       /* H3 */
            atomic_store(&h->asleep, 0);
            if (n < 0 && errno != EINTR) {
                /* Cannot happen (the instance is ours): the loop must
                 * wait the other way.  Ring so that it finds out. */
                atomic_store(&h->failed, errno);
                efd_chan_put(h->door, h->door_w);
                break;
            }
            if (!efd_helper_wanted(h)) {
                helper_pass_on(impl);   /* it may have been chosen */
                continue;
            }
            if (efd_ready_now(impl) != 0)
                continue;       /* a command, a stale edge, a re-check */
        }
        helper_call(h);                                         /* H4 */
        if (efd_helper_wanted(h))                                   /* H5 */
            register_again(h->ep, impl->fd, HELPER_READY);  /* fairness */
        else
            helper_pass_on(impl);
    }
    return NULL;
}

#else  /* no epoll, or no EPOLLEXCLUSIVE in the headers: every waiter polls */

int efd_herd_helper_open(efd_helper *h, int allow_eventfd)
{
    (void)allow_eventfd;
    h->ep = h->cmd_r = h->cmd_w = -1;
    return ENOSYS;
}
void *efd_herd_helper_main(void *arg) { (void)arg; return NULL; }
void efd_herd_helper_close(efd_helper *h) { (void)h; }

int efd_herd_probe(void) { return EFD_HERD_NONE; }
int efd_herd_wake_one(eventfd_object *self) { (void)self; return 0; }
int efd_herd_open(eventfd_object *self) { (void)self; return ENOSYS; }
int
efd_herd_sleep(eventfd_object *self, efd_waiter *w, int ms, int slices,
               short *revents)
{
    (void)self; (void)w; (void)ms; (void)slices;
    *revents = 0;
    errno = ENOSYS;
    return -1;
}
void efd_herd_nudge(efd_impl *impl) { (void)impl; }
void efd_herd_rotate(eventfd_object *self) { (void)self; }
void efd_herd_rearm(eventfd_object *self) { (void)self; }
void efd_herd_leave(eventfd_object *self, efd_waiter *w) { (void)self; (void)w; }

#endif

void
efd_herd_kick(eventfd_object *self)
{
    if (self->herd_kwfd >= 0)
        efd_chan_put(self->herd_krfd, self->herd_kwfd);
}

void
efd_herd_close(eventfd_object *self)
{
    if (self->herd_ep >= 0)
        efd_close_fd(&self->herd_ep);
    efd_chan_close(&self->herd_krfd, &self->herd_kwfd);
    efd_chan_close(&self->herd_wrfd, &self->herd_wwfd);
    /* A fork child's copy may say that a parent's thread keeps it, and
     * count the parent's sleepers. */
    __atomic_store_n(&self->herd_watch, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&self->herd_asleep, 0, __ATOMIC_RELEASE);
    self->herd_exclusive = self->herd_oneshot = 0;
}

int
efd_pass_on(eventfd_object *self)
{
    efd_impl *impl = &self->impl;
    if (efd_ready_now(impl) != 0)
        return 0;
    if (impl->ops->interrupt != NULL)
        impl->ops->interrupt(impl, 0);  /* futex sleepers */
    efd_herd_nudge(impl);               /* epoll sleepers, event loops */
    return 1;
}
