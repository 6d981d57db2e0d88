/*
 * efd_watch.c -- the kernel tells this process that another one died.
 *
 * A sleeper of the futex backend sleeps with no time limit: the death
 * bell (efd_futex.c) rings for a releaser or a chosen sleeper that dies
 * owing it a wake-up.  One death no bell covers: a process that dies
 * *holding* units (a `with` block, undo=True; efd_books.c) owes nobody a
 * wake-up, yet its units come back only when somebody settles its books.
 * Before this file, every sleeper looked again every EFD_RECHECK_MS while
 * another process held units: ten wake-ups a second per waiter, for as
 * long as a holder held.
 *
 * Now the kernel says when a holder dies.  A pidfd (pidfd_open, Linux
 * 5.3) is readable once its process has exited -- after the process's
 * descriptors were closed (exit_files() comes before exit_notify()), so
 * after its holder description dropped the OFD lock that the books ask
 * about.  One thread per process, the *watcher*, sleeps in epoll_wait()
 * on the pidfds of every holder that a sleeper of this process waits on.
 * Each sleeper has a process-private futex word of its own (`word`, in
 * its thread's record); when a pidfd is readable the watcher moves the
 * word of every sleeper that relies on that holder, and wakes it -- only
 * those: a death of another object's holder, or of a holder nobody
 * sleeping here waits on, wakes nobody.  A sleeper that found every other
 * holder watched sleeps with its word among its futex_waitv words and no
 * time limit: a holder's death wakes it, and its next look settles the
 * dead holder's books (efd_books_watched()).
 *
 * Why nothing is missed.  The sleeper reads its word before it looks at
 * the holders (efd_books_watched()), and sleeps only if the word still
 * holds that value (futex_waitv compares it, as the kernel sleeps).  A
 * holder it found watched was alive when its pidfd was opened and matched
 * (below), and the sleeper's reference to its entry was noted under the
 * lock; if it dies later, the watcher, under the same lock, finds the
 * reference and moves the word after that read: the sleep does not
 * start, or is woken.  The watcher marks an entry dead in the same step
 * (under the lock), so a sleeper that finds it alive in the table refers
 * to it before that death is handled, and one that finds it dead is told
 * ESRCH and asks the holder's lock itself.  A holder found dead (its lock
 * free) is settled by the sleeper itself before it sleeps.  A sleeper's
 * record leaves the watcher's list at the end of its sleep, under the
 * lock: the watcher never touches the word of a thread that has gone on
 * (the word and its wake-up are both done with the lock held).
 *
 * Which process.  The books' slot says who holds it: pid and start time,
 * written by the holder when it took the slot (efd_watch_self_id()) --
 * only by a holder in the pid namespace of the page's maker, and only a
 * sleeper in that namespace watches: then both number processes alike.
 * A pidfd is opened for that pid; its fdinfo says what pid /proc gives
 * its process (/proc may belong to another namespace), and that process's
 * start time must be the slot's, and it must not have exited yet.  A pid
 * reused within one clock tick can still pass; so the sleeper asks the
 * holder's lock too, whatever the watcher says (efd_books_watched()).
 * A holder in another pid namespace, a sleeper in one, a mismatch, a
 * holder gone: the sleeper falls back to looking every EFD_RECHECK_MS,
 * as it does where pidfds are refused (seccomp, an old kernel) and for a
 * holder whose lock outlives its process (its holder description passed
 * to a child: docs/processes.rst).
 *
 * What it keeps.  A sleeper holds a reference to each entry it relies on,
 * from its look to the end of its sleep (a list per thread: enter, then
 * process() for each holder, then leave).  An entry nobody refers to is
 * kept for the next sleeper (a pidfd opened again per sleep would cost
 * six system calls per holder), but at most WATCH_IDLE of them, least
 * recently used first out: a process keeps at most that many pidfds for
 * holders nobody waits on now, however many processes held units once
 * and live on (a pre-fork server's hundreds of workers).
 *
 * Lifetime.  The thread starts with the first holder watched and stays
 * (an entry goes when its process dies); os.fork() stops it first if no
 * sleeper relies on it at that moment (efd_watch_before_fork(), from the
 * module's before-fork hook), so that a program that waited and then
 * forks forks with no thread of efd's, as for parked loop helpers
 * (efd_loop.c); the next sleeper starts it again.  A fork child starts
 * with nothing (the fork handler; a bare clone child finds its pid
 * changed).  The thread blocks every signal and never touches Python.
 */
#define _GNU_SOURCE 1
#include "efd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if !defined(SYS_pidfd_open) && (defined(__x86_64__) || defined(__aarch64__))
#  define SYS_pidfd_open 434
#endif

/* A process watched: its name (pid and start time) and pidfd; `dead`
 * once the kernel said it exited (its pidfd is closed then); how many
 * sleepers rely on it now, and when the last of them let go. */
struct watched {
    struct watched *next;
    uint64_t id;
    int pidfd;
    int dead;
    int refs;
    uint64_t idle_since;
    uint64_t serial;            /* its name in the epoll (never reused) */
};

/* Entries nobody refers to that are kept for the next sleeper. */
#define WATCH_IDLE 32
/* Entries in all (pidfds): beyond, sleepers look every 100 ms instead of
 * taking the application's descriptors. */
#define WATCH_MAX 128

/* A sleeper that relies on the watcher (one per thread, between enter
 * and leave): its word, which the watcher moves when a process it refers
 * to dies, and the entries it refers to (freed at leave).  In the
 * watcher's list of sleepers from enter to leave. */
struct sleeper {
    struct sleeper *next;
    _Atomic uint32_t word;
    int listed;
    struct watched **refs;
    int nrefs, cap;
};
static __thread struct sleeper me;

/* The process's watcher.  Everything but the sleepers' words (which the
 * sleepers read without it) is under `lock`. */
static struct {
    pthread_mutex_t lock;
    struct watched *list;
    struct sleeper *sleepers;   /* between enter and leave */
    int ep;                     /* the epoll the thread sleeps in; -1 */
    int bell[2];                /* a pipe in it: stop (before a fork) */
    pthread_t thread;
    int running, stopping;
    int broken;                 /* the thread's epoll_wait failed: it left */
    int users;                  /* sleepers that rely on it now */
    pid_t pid;                  /* whose this state is (bare clones) */
    uint64_t idle_clock;        /* stamps entries' idle_since */
    uint64_t serials;           /* the last entry's serial */
    uint64_t self_id;           /* efd_watch_self_id(), once */
    pid_t self_pid;
    _Atomic uint64_t self_ns;   /* efd_watch_pidns(), once per process */
    _Atomic pid_t self_ns_pid;  /* ... whose (set after self_ns) */
} W = { PTHREAD_MUTEX_INITIALIZER, NULL, NULL, -1, { -1, -1 }, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0 };
static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

/* Close and free everything of the watcher (the thread is gone). */
static void
forget_all(void)
{
    struct watched *w;
    while ((w = W.list) != NULL) {
        W.list = w->next;
        efd_close_fd(&w->pidfd);
        free(w);
    }
    efd_close_fd(&W.ep);
    efd_close_fd(&W.bell[0]);
    efd_close_fd(&W.bell[1]);
    W.running = W.stopping = W.broken = 0;
}

/* A fork child: no thread, and the parent's descriptors are copies
 * (the pidfds name processes the child need not watch). */
static void
watch_child(void)
{
    pthread_mutex_init(&W.lock, NULL);
    forget_all();
    W.sleepers = NULL;      /* the parent's other threads: not here */
    me.listed = 0;
    me.nrefs = 0;
    W.users = 0;
    W.pid = getpid();
    W.self_id = 0;
}

static void
watch_init(void)
{
    (void)pthread_atfork(NULL, NULL, watch_child);
    W.pid = getpid();
}

/* A child made by a bare clone system call (no fork handlers) has a copy
 * of the parent's state: start over, as the fork handler would. */
static void
watch_check_process(void)
{
    pthread_once(&watch_once, watch_init);
    if (W.pid != getpid())
        watch_child();
}

/* The start of the file at `path` (a /proc file: one read), as a string
 * in buf; 0, or -1. */
static int
read_proc(const char *path, char *buf, size_t size)
{
    ssize_t n;
    int fd;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read(fd, buf, size - 1);
    efd_close_fd(&fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

/* The low 32 bits of the start time (field 22 of /proc/<pid>/stat, clock
 * ticks since boot) of process `pid` (0: this one), or -1. */
static int64_t
start_time(pid_t pid)
{
    char path[64], buf[1024], *p;
    int field;
    if (pid == 0)
        snprintf(path, sizeof(path), "/proc/self/stat");
    else
        snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    if (read_proc(path, buf, sizeof(buf)) != 0)
        return -1;
    /* The name (field 2) may hold spaces and parentheses: count from the
     * last ')', which is followed by field 3. */
    if ((p = strrchr(buf, ')')) == NULL)
        return -1;
    for (field = 2; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (p == NULL)
            return -1;
    }
    return (int64_t)(uint32_t)strtoull(p + 1, NULL, 10);
}

/* This process's pid namespace (the inode of /proc/self/ns/pid; 0 if
 * unknown), once per process: it never changes in a process's life.
 * Sleepers of several threads may ask at once: each finds the same. */
uint64_t
efd_watch_pidns(void)
{
    struct stat st;
    pid_t me = getpid();
    if (atomic_load_explicit(&W.self_ns_pid, memory_order_acquire) != me) {
        atomic_store_explicit(&W.self_ns,
                              stat("/proc/self/ns/pid", &st) == 0
                              ? (uint64_t)st.st_ino : 0,
                              memory_order_relaxed);
        atomic_store_explicit(&W.self_ns_pid, me, memory_order_release);
    }
    return atomic_load_explicit(&W.self_ns, memory_order_relaxed);
}

/* (Called with the books' claim lock held: one thread at a time.) */
uint64_t
efd_watch_self_id(void)
{
    pid_t me = getpid();
    int64_t start;
    if (W.self_id != 0 && W.self_pid == me)
        return W.self_id;
    if ((start = start_time(0)) < 0)
        return 0;
    W.self_pid = me;
    W.self_id = (uint64_t)(uint32_t)me | ((uint64_t)start << 32);
    return W.self_id;
}

#if defined(SYS_pidfd_open)

/* Move sleeper s's word and wake it (the lock held: s is still asleep
 * or about to be, and its thread cannot have gone on). */
static void
tell(struct sleeper *s)
{
    atomic_fetch_add(&s->word, 1);
    (void)syscall(SYS_futex, &s->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Tell every sleeper that refers to `w`, or every sleeper if w is NULL
 * (the lock held). */
static void
tell_sleepers_of(const struct watched *w)
{
    struct sleeper *s;
    int i;
    for (s = W.sleepers; s != NULL; s = s->next) {
        for (i = 0; w != NULL && i < s->nrefs; i++)
            if (s->refs[i] == w)
                break;
        if (w == NULL || i < s->nrefs)
            tell(s);
    }
}

/* The thread: sleep until a watched process exits, mark it dead, and
 * tell the sleepers that rely on it; until the bell says stop. */
static void *
watcher(void *arg)
{
    struct epoll_event ev[16];
    (void)arg;
    for (;;) {
        int i, n, stop = 0;
        n = epoll_wait(W.ep, ev, 16, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;                          /* cannot happen: say all died */
        }
        pthread_mutex_lock(&W.lock);
        for (i = 0; i < n; i++) {
            struct watched *w;
            if (ev[i].data.u64 == 0) {
                stop = 1;
                continue;
            }
            /* By serial, not by pointer: a sleeper's leave() may have
             * dropped the entry since epoll_wait() returned. */
            for (w = W.list; w != NULL; w = w->next)
                if (w->serial == ev[i].data.u64)
                    break;
            if (w != NULL && !w->dead) {
                (void)epoll_ctl(W.ep, EPOLL_CTL_DEL, w->pidfd, NULL);
                efd_close_fd(&w->pidfd);
                w->dead = 1;
                tell_sleepers_of(w);
            }
        }
        pthread_mutex_unlock(&W.lock);
        if (stop)
            return NULL;
    }
    /* epoll_wait failed: nobody is watched any more.  Say so, and wake
     * everyone, who then looks for themselves. */
    pthread_mutex_lock(&W.lock);
    W.broken = 1;
    tell_sleepers_of(NULL);
    pthread_mutex_unlock(&W.lock);
    return NULL;
}

/* Start the thread (the lock held): 0 or an errno. */
static int
start(void)
{
    struct epoll_event ev;
    pthread_attr_t attr;
    sigset_t all, old;
    int err;
    if (W.running)
        return 0;
    if (W.stopping)
        return EAGAIN;                      /* a fork is stopping it */
    if (W.ep < 0 && (W.ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        W.ep = -1;
        return errno;
    }
    if (W.bell[0] < 0) {
        if (pipe2(W.bell, O_CLOEXEC | O_NONBLOCK) < 0) {
            W.bell[0] = W.bell[1] = -1;
            return errno;
        }
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN;
        ev.data.u64 = 0;                    /* the bell */
        if (epoll_ctl(W.ep, EPOLL_CTL_ADD, W.bell[0], &ev) < 0) {
            err = errno;
            efd_close_fd(&W.bell[0]);
            efd_close_fd(&W.bell[1]);
            return err;
        }
    }
    pthread_attr_init(&attr);
    (void)pthread_attr_setstacksize(&attr, 64 * 1024);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&W.thread, &attr, watcher, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (err == 0)
        W.running = 1;
    return err;
}

/* The pid of pidfd `fd`'s process as /proc (the mount this process
 * sees) numbers it -- the "Pid:" line of its fdinfo, in the namespace of
 * that /proc -- or -1 (gone, not visible there, or unknown). */
static pid_t
pidfd_proc_pid(int fd)
{
    char path[64], buf[512], *p;
    long v;
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    if (read_proc(path, buf, sizeof(buf)) != 0)
        return -1;
    if ((p = strstr(buf, "\nPid:")) == NULL)
        return -1;
    v = strtol(p + 5, NULL, 10);
    return v > 0 ? (pid_t)v : -1;
}

/* Whether pidfd `fd`'s process has exited already (a zombie): readable. */
static int
pidfd_exited(int fd)
{
    struct pollfd pfd;
    pfd.fd = fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    return poll(&pfd, 1, 0) != 0;
}

/* Open and check a pidfd for `id`'s process, and hand it to the thread
 * (the lock held).  Checked: the pidfd names a live process whose start
 * time is the slot's.  pidfd_open() looks the pid up in this process's pid
 * namespace, and the holder wrote its own, so the pidfd's process is
 * found in /proc by the pid /proc gives it (its fdinfo), not by the
 * slot's: a holder in another namespace (or a /proc of another one) then
 * does not match, rather than naming somebody else.  One that has exited
 * already is not watched (its pidfd would ring at once, for ever, while
 * its lock lives on in a child): ESRCH, and the caller asks the lock. */
static int
watch_new(uint64_t id)
{
    struct epoll_event ev;
    struct watched *w;
    pid_t pid = (pid_t)(uint32_t)id;
    int fd, err;
    if (pid <= 0 || (id >> 32) == 0)
        return ESRCH;                       /* no name in the slot */
    {
        int n = 0;
        for (w = W.list; w != NULL; w = w->next)
            n++;
        if (n >= WATCH_MAX)
            return EMFILE;                  /* enough descriptors taken */
    }
    if ((err = start()) != 0)
        return err;
    if ((fd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
        return errno;
    /* Is it the holder?  (A pid in another namespace, or reused.) */
    pid = pidfd_proc_pid(fd);
    if (pid <= 0 || start_time(pid) != (int64_t)(id >> 32)
            || pidfd_exited(fd)) {
        efd_close_fd(&fd);
        return ESRCH;
    }
    if ((w = calloc(1, sizeof(*w))) == NULL) {
        efd_close_fd(&fd);
        return ENOMEM;
    }
    w->id = id;
    w->pidfd = fd;
    w->refs = 0;
    w->serial = ++W.serials;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u64 = w->serial;
    if (epoll_ctl(W.ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        err = errno;
        efd_close_fd(&fd);
        free(w);
        return err;
    }
    w->next = W.list;
    W.list = w;
    return 0;
}

/* This thread's sleeper refers to `w` until efd_watch_leave() (the lock
 * held).  ENOMEM if it cannot note it. */
static int
refer(struct watched *w)
{
    if (me.nrefs == me.cap) {
        int cap = me.cap ? me.cap * 2 : 16;
        struct watched **more = realloc(me.refs, (size_t)cap * sizeof(*more));
        if (more == NULL)
            return ENOMEM;
        me.refs = more;
        me.cap = cap;
    }
    me.refs[me.nrefs++] = w;
    w->refs++;
    return 0;
}

/* Close and forget `w` (the lock held; nobody refers to it). */
static void
drop(struct watched **pp)
{
    struct watched *w = *pp;
    *pp = w->next;
    if (w->pidfd >= 0) {
        (void)epoll_ctl(W.ep, EPOLL_CTL_DEL, w->pidfd, NULL);
        efd_close_fd(&w->pidfd);
    }
    free(w);
}

/* Keep at most WATCH_IDLE live entries nobody refers to, and no dead one
 * nobody refers to (the lock held). */
static void
trim(void)
{
    struct watched **pp, **oldest;
    int idle;
    for (;;) {
        idle = 0;
        oldest = NULL;
        for (pp = &W.list; *pp != NULL; ) {
            struct watched *w = *pp;
            if (w->refs == 0 && w->dead) {
                drop(pp);
                continue;
            }
            if (w->refs == 0) {
                idle++;
                if (oldest == NULL || w->idle_since < (*oldest)->idle_since)
                    oldest = pp;
            }
            pp = &w->next;
        }
        if (idle <= WATCH_IDLE || oldest == NULL)
            return;
        drop(oldest);
    }
}

int
efd_watch_process(uint64_t id)
{
    struct watched **pp, *w;
    int err;
    watch_check_process();
    pthread_mutex_lock(&W.lock);
    if (W.stopping || W.broken || !me.listed) {
        /* A fork is stopping the thread, or it failed, or this thread
         * did not enter: not watched. */
        pthread_mutex_unlock(&W.lock);
        return EAGAIN;
    }
    for (pp = &W.list; (w = *pp) != NULL; pp = &w->next)
        if (w->id == id)
            break;
    if (w == NULL && (err = watch_new(id)) == 0)
        w = W.list;                         /* watch_new() put it first */
    else if (w != NULL)
        err = w->dead ? ESRCH : 0;
    if (err == 0)
        err = refer(w);
    pthread_mutex_unlock(&W.lock);
    return err;
}

_Atomic uint32_t *
efd_watch_enter(void)
{
    watch_check_process();
    pthread_mutex_lock(&W.lock);
    if (!me.listed) {
        W.users++;
        me.next = W.sleepers;
        W.sleepers = &me;
        me.listed = 1;
    }
    me.nrefs = 0;
    pthread_mutex_unlock(&W.lock);
    return &me.word;
}

void
efd_watch_leave(void)
{
    struct sleeper **pp;
    int i;
    pthread_mutex_lock(&W.lock);
    if (me.listed) {
        for (pp = &W.sleepers; *pp != NULL; pp = &(*pp)->next)
            if (*pp == &me) {
                *pp = me.next;
                break;
            }
        me.listed = 0;
        if (W.users > 0)
            W.users--;
    }
    for (i = 0; i < me.nrefs; i++)
        if (--me.refs[i]->refs == 0)
            me.refs[i]->idle_since = ++W.idle_clock;
    if (me.nrefs > 0)
        trim();
    me.nrefs = 0;
    pthread_mutex_unlock(&W.lock);
    /* Not kept for the thread's next sleep: a thread that ends would leak
     * it (a thread per request), and a malloc per sleep costs little. */
    free(me.refs);
    me.refs = NULL;
    me.cap = 0;
}

int
efd_watch_before_fork(void)
{
    pthread_t t;
    char b = 1;
    watch_check_process();
    pthread_mutex_lock(&W.lock);
    if (!W.running || W.users > 0 || W.stopping) {
        pthread_mutex_unlock(&W.lock);
        return 0;
    }
    W.stopping = 1;
    t = W.thread;
    while (write(W.bell[1], &b, 1) < 0 && errno == EINTR)
        ;
    pthread_mutex_unlock(&W.lock);
    pthread_join(t, NULL);
    pthread_mutex_lock(&W.lock);
    forget_all();
    pthread_mutex_unlock(&W.lock);
    return 1;
}

int
efd_watch_probe(void)
{
    int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (fd < 0)
        return 0;
    efd_close_fd(&fd);
    return start_time(0) >= 0;
}

#else  /* no pidfd_open in these headers */

int
efd_watch_process(uint64_t id)
{
    (void)id;
    return ENOSYS;
}
static __thread _Atomic uint32_t unwatched;
_Atomic uint32_t *efd_watch_enter(void) { return &unwatched; }
void efd_watch_leave(void) { }
int efd_watch_before_fork(void) { return 0; }
int efd_watch_probe(void) { return 0; }

#endif
