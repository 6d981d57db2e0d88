/*
 * efd_shm.c -- the count in shared memory, which the pipe and futex
 * backends share, and the "channels" they and the wait loop use.
 *
 * The count.  A page of shared memory (memfd where present, else an
 * unlinked shm_open object) holds the count, changed only by compare-and-
 * swap: a read takes 1 (semaphore mode) or everything, a write adds, and
 * neither ever waits or makes a system call on its own.  So the count is
 * never wrong, whatever happens to the processes sharing it: a change is
 * one atomic instruction, done or not done.
 *
 * Readiness.  The object owns a channel -- a descriptor that is readable
 * while it holds a "token" -- which fileno() returns, so that select, poll
 * and event loops can wait for the count to be above zero.  Once the page
 * is "armed" (from the start for the pipe backend; from the first fileno()
 * for the futex backend, whose own waiters do not need it), whoever moves
 * the count across zero brings the token in step with it (sync_token):
 * it marks readiness `dirty` and, if the page's small lock is free, puts or
 * takes the token to match the count as it is now, then unlocks and looks
 * at `dirty` again, since someone may have crossed meanwhile.  If the lock
 * is busy it leaves the work to the holder, which will see `dirty` when it
 * unlocks.  Nobody ever waits for the lock, so a process stopped or killed
 * while holding it blocks nobody.  The protocol is argued step by step
 * above sync_token() below, and checked schedule by schedule by the
 * interleaving explorer (tests/explore/).
 *
 * What can lag, and for how long.  While every process lives, readiness is
 * in step with the count except for the instant between a crossing and its
 * sync.  After a process is killed between a crossing and its sync, or
 * killed or stopped while it holds the lock, readiness stays out of step
 * until the next operation on the object in any process: a change, or a
 * read that finds the count at zero, looks at the token and syncs; the
 * lock is one word naming its holder, whose life the kernel tells (the
 * lock, below), so after a death inside it the next process to try it
 * finds the holder gone, takes it over, drains the channel and re-derives
 * the token.  efd's own waiters on the channel
 * look at the count themselves at least every EFD_RECHECK_MS, and one that
 * finds the channel readable but the count zero repairs it: a missing
 * token costs them at most that interval, and a stale one nothing but a
 * repair.  A select() of somebody else's on fileno() has no such re-check:
 * if nobody operates on the object after such a death, it waits.
 *
 * Channels.  A channel is an eventfd (rfd == wfd) where allowed and
 * possible, else a non-blocking pipe; it also serves as each waiting
 * thread's wake-up in efd_wait.c.
 */
#define _GNU_SOURCE 1
#include "efd.h"
#include "efd_explore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#endif

#if defined(__linux__)
#  include <sys/syscall.h>
#endif
#include <signal.h>

#if defined(__linux__) && !defined(EFD_NO_MEMFD)
#  if defined(SYS_memfd_create)
#    define EFD_HAVE_MEMFD 1
#    ifndef MFD_CLOEXEC
#      define MFD_CLOEXEC 0x0001U
#    endif
#    ifndef MFD_ALLOW_SEALING
#      define MFD_ALLOW_SEALING 0x0002U
#    endif
#  endif
#endif

/* File seals are fcntl()s on tmpfs files, not a part of memfd_create: a
 * build that makes its pages with shm_open (EFD_NO_MEMFD) still reads the
 * seals of a page a peer hands it, wherever the kernel has them (3.17+). */
#if defined(__linux__)
#  define EFD_HAVE_SEALS 1
#  ifndef F_ADD_SEALS
#    define F_ADD_SEALS 1033
#    define F_GET_SEALS 1034
#    define F_SEAL_SEAL 0x0001
#    define F_SEAL_SHRINK 0x0002
#    define F_SEAL_GROW 0x0004
#  endif
#endif

#if defined(__linux__)
#  ifndef RWF_NOWAIT
#    define RWF_NOWAIT 0x00000008
#  endif
#endif

int
efd_set_fd_flags(int fd, int cloexec, int nonblock)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0)
        return errno;
    fl = cloexec ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
    if (fcntl(fd, F_SETFD, fl) < 0)
        return errno;
    if (nonblock) {
        fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
            return errno;
    }
    return 0;
}

/* ---- shared memory ----------------------------------------------------- */

/* An anonymous shared-memory file: memfd where present (*sealable = 1),
 * else shm_open with a name that is unlinked at once (*sealable = 0: its
 * file is born with F_SEAL_SEAL, and F_ADD_SEALS says EPERM). */
static int
shm_create(int *out_fd, int *sealable)
{
    int fd = -1;
    *sealable = 0;
#ifdef EFD_HAVE_MEMFD
    fd = (int)syscall(SYS_memfd_create, "efd",
                      MFD_CLOEXEC | MFD_ALLOW_SEALING);
    *sealable = fd >= 0;
#endif
    if (fd < 0) {
        struct timespec ts;
        int attempt;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        for (attempt = 0; attempt < 100 && fd < 0; attempt++) {
            char name[64];
            snprintf(name, sizeof(name), "/efd-%ld-%lx-%d", (long)getpid(),
                     (unsigned long)ts.tv_nsec ^ (unsigned long)(uintptr_t)out_fd,
                     attempt);
            fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
            if (fd >= 0)
                shm_unlink(name);
            else if (errno != EEXIST)
                return errno;
        }
        if (fd < 0)
            return EEXIST;
    }
    *out_fd = fd;
    return 0;
}

/* A scratch file of the same kind as the pages (the books' probe,
 * efd_books.c): 0 and a close-on-exec *out_fd, or an errno. */
int
efd_shm_scratch(int *out_fd)
{
    int sealable, err = shm_create(out_fd, &sealable);
    if (err == 0)
        (void)fcntl(*out_fd, F_SETFD, FD_CLOEXEC);
    return err;
}

static int
shm_new(size_t size, int cloexec, int *out_fd, void **out_map)
{
    int fd = -1, err, sealable;
    void *p;
    if ((err = shm_create(&fd, &sealable)) != 0)
        return err;
    if ((err = efd_set_fd_flags(fd, cloexec, 0)) != 0)
        goto fail;
    if (ftruncate(fd, (off_t)size) < 0) {
        err = errno;
        goto fail;
    }
#ifdef EFD_HAVE_MEMFD
    /* The size is for good: a process we hand the page to could otherwise
     * shrink it under everybody's mapping (SIGBUS at the next access). */
    if (sealable && fcntl(fd, F_ADD_SEALS,
                          F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        err = errno;
        goto fail;
    }
#endif
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        err = errno;
        goto fail;
    }
    *out_fd = fd;
    *out_map = p;
    return 0;
fail:
    efd_close_fd(&fd);
    return err;
}

int
efd_shm_can_seal(void)
{
#ifdef EFD_HAVE_MEMFD
    int fd = (int)syscall(SYS_memfd_create, "efd-probe",
                          MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
#else
    return 0;
#endif
}

#ifdef EFD_HAVE_SEALS
/* Whether a page from another process may be mapped, by its seals.  A page
 * whose file could be shrunk after we map it would kill us with SIGBUS at
 * the next access, so:
 *   - sealed against shrinking (efd's own memfds, from the start): yes;
 *   - sealable but not sealed (a memfd made with MFD_ALLOW_SEALING and left
 *     open to truncation): no, its sender chose not to;
 *   - unsealable (F_SEAL_SEAL set without F_SEAL_SHRINK: shm_open's files,
 *     a memfd made without MFD_ALLOW_SEALING): only where this process
 *     cannot make sealed pages either (memfd_create refused by a sandbox,
 *     or a build without it), since that is what an efd peer in the same
 *     place hands over; where it can, a peer could have too;
 *   - no seals at all (F_GET_SEALS fails: not a tmpfs/shmem file, say a
 *     file on disk, which its sender could truncate): no.  efd's pages,
 *     memfd's or shm_open's, are all shmem files. */
static int
page_seals_acceptable(int fd)
{
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return 0;
    if (seals & F_SEAL_SHRINK)
        return 1;
    if (!(seals & F_SEAL_SEAL))
        return 0;
    return !efd_shm_can_seal();
}
#endif

static int
shm_adopt(int fd, size_t size, void **out_map)
{
    struct stat st;
    void *p;
    if (fstat(fd, &st) < 0)
        return errno;
    if (!S_ISREG(st.st_mode) || st.st_size < (off_t)size)
        return EINVAL;
#ifdef EFD_HAVE_SEALS
    if (!page_seals_acceptable(fd))
        return EINVAL;
#endif
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return errno;
    *out_map = p;
    return 0;
}

/* ---- the lock ---------------------------------------------------------- */

/* The lock guards the channel and EFD_SYNC_TOKEN.  Nobody ever waits for
 * it (see sync_token below); what it needs is to be taken over when its
 * holder died inside, by whoever tries it next, who is then told so and
 * re-derives the token from scratch.  Until 0.3 it was a process-shared
 * robust pthread mutex in the page, but glibc asserts (SIGABRT), or
 * follows the mutex's robust-list pointers (SIGSEGV), on a mutex whose
 * bytes a peer scribbled, and a page may come from a peer efd does not
 * trust (SPEC §6).  Now nothing in the page is trusted:
 *
 * The lock is the word `owner`: 0 when free, else who holds it; taken by
 * CAS from 0.  A taker that finds it held asks whether that holder lives,
 * and if not, CASes the word from the dead holder to itself (one wins) and
 * is told that the holder died (EOWNERDEAD).  Garbage in the word reads as
 * a dead holder: the worst a scribbler gets is one more re-derivation.
 *
 * Who lives, asked of the kernel.  Each process that takes the lock holds,
 * for as long as it lives, a *beacon*: an open-file-description lock
 * (F_OFD_SETLK, Linux 3.15) on one byte of the page's file, 1 ..
 * BEACON_SPAN, through a description of its own (the page reopened
 * through /proc/self/fd).  Its word is OWNER_BEACON | that byte.  The
 * kernel drops the beacon when the process dies -- when its descriptors
 * close, before it is a zombie, whoever reaps it, in any pid namespace --
 * so a taker learns whether the holder lives from F_OFD_GETLK on that byte
 * through the object's own description (which never locks): held means
 * alive.  The beacon is made once per process and object, so taking the
 * lock costs one CAS, as the mutex did.  A new beacon never keeps the byte
 * the word names (a dead holder's, not taken over yet): a live process
 * holding it would make the dead holder look alive.  A beacon is closed
 * only while its number still names the page's file: a program that swept
 * descriptors it did not open may have reused the number.
 *
 * fork(): a child's copy of its parent's beacon description would keep
 * the beacon (and a dead parent "alive") as long as the child lives, so
 * the beacons are listed in a process-wide table that pthread_atfork
 * walks in the child, closing each copy and marking its object beacon-
 * less (the child makes its own when it first needs one).  A child made
 * without the handlers (a raw fork or clone system call) is caught at its
 * first lock of any object: the table names the process that filled it
 * (its *epoch*), and a lock taker of another epoch closes every copy in
 * it -- else a child that died inside one object's lock would leave a
 * word naming its parent's live beacon, never taken over, and a child
 * that merely lives would keep a dead parent "alive" in the others.  The
 * epoch lives in a private page the kernel zeroes in every child, however
 * made (MADV_WIPEONFORK, Linux 4.14), so the check is one load; where the
 * kernel has no such page, the epoch is getpid(), a system call per lock.
 * A raw child that never calls efd keeps its copies, and with them a dead
 * parent "alive", until it exits: nothing of efd runs in it to notice.
 *
 * Where the kernel or the sandbox refuses a beacon (no /proc to reopen
 * through, no OFD locks), the word is (tgid << 32 | tid) and a taker asks
 * tgkill(tgid, tid, 0): ESRCH means gone.  That way is weaker, and says
 * so: thread numbers mean something only in the pid namespace they were
 * written in, so a process of another namespace than the page maker's
 * never takes over, and marks its own word OWNER_UNCHECKABLE (never taken
 * over: checked from the maker's namespace, its numbers would name some
 * other thread); a zombie's main thread still answers (its lock is taken
 * over once it is reaped); and numbers reused at once look alive.
 * Readiness lags in those cases; the count never does. */

#define OWNER_BEACON (UINT64_C(1) << 63)
#define OWNER_UNCHECKABLE (UINT64_C(1) << 62)
#define BEACON_SPAN 4096u

static uint64_t
lock_self(void)
{
#if defined(__linux__)
    long tid = syscall(SYS_gettid);
#else
    long tid = 1;                   /* the process: kill(pid, 0) tells */
#endif
    return ((uint64_t)(uint32_t)getpid() << 32) | (uint32_t)tid;
}

#if defined(F_OFD_SETLK) && !defined(EFD_EXPLORE)
#  define EFD_HAVE_BEACON 1

/* Every beacon of this process, and the field of the object that holds
 * it.  Process-wide, as efd_registry.c's table, and for the same reason:
 * fork() copies every interpreter's descriptors at once.  Nothing done
 * under the mutex waits for anything but the kernel. */
struct beacon_entry {
    int fd;
    dev_t dev;                      /* the page's file: what `fd` is */
    ino_t ino;
    _Atomic int *field;
};
static pthread_mutex_t beacon_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t beacon_once = PTHREAD_ONCE_INIT;
static struct beacon_entry *beacons;
static size_t nbeacons, beacons_cap;
/* The epoch (below) of the process whose beacons the table lists; 0 while
 * it lists none.  Stored under the mutex, after the table. */
static _Atomic uint64_t beacons_epoch;

/* Close a beacon, if its number still is one: a program that closed
 * descriptors it did not open (a daemon's sweep) may have the number in
 * use for a file of its own by now, as CPython checks its cached urandom
 * descriptor.  fstat() is async-signal-safe (the fork child calls this). */
static void
beacon_close(const struct beacon_entry *b)
{
    struct stat st;
    if (fstat(b->fd, &st) == 0 && st.st_dev == b->dev && st.st_ino == b->ino)
        close(b->fd);
}

/* In a fork child, with the table's mutex held: the beacons listed are
 * the parent's, not ours -- close the copies, mark their objects beacon-
 * less, and the table this process's (empty). */
static void
beacon_close_inherited(void)
{
    while (nbeacons > 0) {
        nbeacons--;
        beacon_close(&beacons[nbeacons]);
        atomic_store(beacons[nbeacons].field, -1);
    }
    atomic_store(&beacons_epoch, 0);
}

static void beacon_prepare(void) { pthread_mutex_lock(&beacon_lock); }
static void beacon_parent(void) { pthread_mutex_unlock(&beacon_lock); }
static void
beacon_child(void)
{
    beacon_close_inherited();
    pthread_mutex_unlock(&beacon_lock);
}

/* This process's epoch: nonzero, and another in every child.  In the
 * wipe-on-fork page where there is one (zero there: a new child, which
 * draws its own), else getpid(). */
static _Atomic uint64_t *beacon_wipe;
static void beacon_init(void);

static uint64_t
beacon_epoch_draw(void)
{
    struct timespec ts;
    uint64_t e, seen = 0;
    if (beacon_wipe == NULL)
        return (uint64_t)getpid();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e = ((uint64_t)(uint32_t)getpid() << 32) ^
        ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    if (e == 0)
        e = 1;
    if (!atomic_compare_exchange_strong(beacon_wipe, &seen, e))
        e = seen;                   /* a sibling thread drew first */
    return e;
}

static inline uint64_t
beacon_epoch(void)
{
    uint64_t e = beacon_wipe ? atomic_load_explicit(beacon_wipe,
                                                    memory_order_relaxed) : 0;
    return e != 0 ? e : beacon_epoch_draw();
}

/* Set once beacon_init() has run: the common case is two loads, no
 * pthread_once() call (the futex backend's release asks for the epoch). */
static _Atomic int beacon_ready;

uint64_t
efd_process_epoch(void)
{
    if (!atomic_load_explicit(&beacon_ready, memory_order_acquire)) {
        pthread_once(&beacon_once, beacon_init);
        atomic_store_explicit(&beacon_ready, 1, memory_order_release);
    }
    return beacon_epoch();
}

static void
beacon_init(void)
{
#ifdef MADV_WIPEONFORK
    long size = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
        if (madvise(p, (size_t)size, MADV_WIPEONFORK) == 0)
            beacon_wipe = p;
        else
            munmap(p, (size_t)size);
    }
#endif
    (void)pthread_atfork(beacon_prepare, beacon_parent, beacon_child);
}

/* F_OFD_SETLK or F_OFD_GETLK of `type` on one byte: 0, EBUSY (GETLK:
 * held through another description), or errno. */
static int
beacon_op(int fd, int cmd, short type, uint32_t byte)
{
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)byte;
    fl.l_len = 1;
    if (fcntl(fd, cmd, &fl) < 0)
        return errno;
    return cmd == F_OFD_GETLK && fl.l_type != F_UNLCK ? EBUSY : 0;
}

/* Room in the table for one more entry (the table's mutex held): 0 or
 * ENOMEM. */
static int
table_room(void)
{
    if (nbeacons == beacons_cap) {
        size_t cap = beacons_cap ? 2 * beacons_cap : 16;
        struct beacon_entry *b = realloc(beacons, cap * sizeof(*b));
        if (b == NULL)
            return ENOMEM;
        beacons = b;
        beacons_cap = cap;
    }
    return 0;
}

/* List `fd` (the page's file, as `st` says) as held in `field`, and store
 * it there: the table's mutex held, and room made. */
static void
table_add(int fd, const struct stat *st, _Atomic int *field)
{
    beacons[nbeacons].fd = fd;
    beacons[nbeacons].dev = st->st_dev;
    beacons[nbeacons].ino = st->st_ino;
    beacons[nbeacons].field = field;
    nbeacons++;
    atomic_store(&beacons_epoch, beacon_epoch());
    atomic_store(field, fd);
}

int
efd_lock_byte(int fd, int cmd, short type, uint32_t byte)
{
    return beacon_op(fd, cmd, type, byte);
}

/* The books' holder description (efd_books.c) goes in the same table, so
 * that a fork child closes its copy as it closes the beacons': 0, or an
 * errno (the caller still owns fd). */
int
efd_beacon_register(int fd, _Atomic int *field)
{
    struct stat st;
    int err;
    pthread_once(&beacon_once, beacon_init);
    if (fstat(fd, &st) < 0)
        return errno;
    pthread_mutex_lock(&beacon_lock);
    if ((err = table_room()) == 0)
        table_add(fd, &st, field);
    pthread_mutex_unlock(&beacon_lock);
    return err;
}

/* Make this process's beacon for the object: 0, or an errno (then the
 * word falls back to thread numbers, and `beacon_fd` says -2: this
 * process does not try again -- a retry would cost an open() per lock). */
static int
beacon_make(efd_impl *impl)
{
    char path[64];
    struct stat st;
    uint32_t start, k, byte = 0;
    int fd, err = EAGAIN;

    pthread_once(&beacon_once, beacon_init);
    pthread_mutex_lock(&beacon_lock);
    if (atomic_load(&impl->beacon_fd) != -1) {      /* another thread's */
        pthread_mutex_unlock(&beacon_lock);
        return atomic_load(&impl->beacon_fd) >= 0 ? 0 : EAGAIN;
    }
    if ((err = table_room()) != 0)
        goto fail;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", impl->shmfd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        err = errno;
        if (fd >= 0)
            close(fd);
        goto fail;
    }
    start = ((uint32_t)getpid() * 2654435761u) ^ (uint32_t)(uintptr_t)impl;
    for (k = 0; k < 64; k++) {
        byte = 1 + (start + k) % BEACON_SPAN;
        err = beacon_op(fd, F_OFD_SETLK, F_WRLCK, byte);
        if (err == EAGAIN || err == EACCES)
            continue;                       /* another live process's */
        if (err != 0)
            break;                          /* cannot be taken here */
        /* A byte free now may still be named by the word: a holder that
         * died inside, not taken over yet.  Holding it would make that
         * holder look alive: let it go.  (The word can name our byte
         * later only by our own hand: nobody else holds it.) */
        if (atomic_load(&impl->cnt->owner) != (OWNER_BEACON | byte))
            break;
        (void)beacon_op(fd, F_OFD_SETLK, F_UNLCK, byte);
        err = EAGAIN;
    }
    if (err != 0) {
        close(fd);
        goto fail;
    }
    atomic_store_explicit(&impl->beacon, byte, memory_order_relaxed);
    table_add(fd, &st, &impl->beacon_fd);   /* `beacon` first */
    pthread_mutex_unlock(&beacon_lock);
    return 0;
fail:
    atomic_store(&impl->beacon_fd, -2);
    pthread_mutex_unlock(&beacon_lock);
    return err;
}

/* Close the description listed as held in `field`, if any. */
void
efd_beacon_forget(_Atomic int *field)
{
    size_t i;
    if (atomic_load(field) < 0)
        return;
    pthread_mutex_lock(&beacon_lock);
    for (i = 0; i < nbeacons; i++)
        if (beacons[i].field == field) {
            beacon_close(&beacons[i]);
            beacons[i] = beacons[--nbeacons];
            break;
        }
    atomic_store(field, -1);
    pthread_mutex_unlock(&beacon_lock);
}

/* Close the object's beacon (close(), or its page going away). */
static void
beacon_drop(efd_impl *impl)
{
    efd_beacon_forget(&impl->beacon_fd);
}

/* In a child that no fork handler ran in: what beacon_child() would have
 * done.  The table's epoch is cleared last, so that a sibling thread that
 * sees it cleared sees the emptied fields too. */
static void
beacon_forsake_inherited(uint64_t now)
{
    pthread_mutex_lock(&beacon_lock);
    if (atomic_load(&beacons_epoch) != now)
        beacon_close_inherited();
    pthread_mutex_unlock(&beacon_lock);
}

/* Whether the table holds another process's beacons: a raw fork child's
 * first lock.  One load while the table is empty or this process's. */
static inline void
beacon_check_inherited(void)
{
    uint64_t e = atomic_load_explicit(&beacons_epoch, memory_order_acquire);
    uint64_t now;
    if (e != 0 && e != (now = beacon_epoch()))
        beacon_forsake_inherited(now);
}

void
efd_beacon_check_inherited(void)
{
    beacon_check_inherited();
}
#else
static void beacon_drop(efd_impl *impl) { (void)impl; }
int efd_lock_byte(int fd, int cmd, short type, uint32_t byte)
{
    (void)fd; (void)cmd; (void)type; (void)byte;
    return ENOSYS;
}
int efd_beacon_register(int fd, _Atomic int *field)
{
    (void)fd; (void)field;
    return ENOSYS;
}
void efd_beacon_forget(_Atomic int *field) { (void)field; }
void efd_beacon_check_inherited(void) {}

/* Without the beacons' wipe-on-fork page (headers older than OFD locks):
 * the pid, drawn once per process -- again in a child of the C library's
 * fork, whose handler forgets it (a child of a bare clone keeps its
 * parent's: such a build cannot tell) -- so that the futex backend's
 * release makes no system call for it. */
static _Atomic uint64_t plain_epoch;
static pthread_once_t plain_once = PTHREAD_ONCE_INIT;

static void
plain_child(void)
{
    atomic_store(&plain_epoch, 0);
}

static void
plain_init(void)
{
    (void)pthread_atfork(NULL, NULL, plain_child);
}

uint64_t
efd_process_epoch(void)
{
    uint64_t e;
    pthread_once(&plain_once, plain_init);
    e = atomic_load_explicit(&plain_epoch, memory_order_relaxed);
    if (e == 0) {
        e = (uint64_t)getpid();
        atomic_store(&plain_epoch, e);
    }
    return e;
}
#endif

/* Whether the holder the word names lives. */
static int
lock_holder_alive(const efd_impl *impl, uint64_t owner)
{
    long tgid = (int32_t)(uint32_t)(owner >> 32);
    long tid = (int32_t)(uint32_t)owner;
#ifdef EFD_EXPLORE
    (void)impl;
    return efd_explore_alive(tgid, tid);
#else
    long r;
    if (owner & OWNER_BEACON) {
#  ifdef EFD_HAVE_BEACON
        uint64_t byte = owner & ~OWNER_BEACON;
        if (byte < 1 || byte > BEACON_SPAN)
            return 0;               /* no beacon has that byte */
        /* EBUSY: the beacon is held; another error: cannot tell. */
        return beacon_op(impl->shmfd, F_OFD_GETLK, F_WRLCK,
                         (uint32_t)byte) != 0;
#  else
        return 1;                   /* cannot tell: never take it over */
#  endif
    }
    if (!impl->owner_checkable || (owner & OWNER_UNCHECKABLE))
        return 1;                   /* cannot tell: never take it over */
    if (tgid <= 0 || tid <= 0)
        return 0;                   /* no thread has these numbers */
#  if defined(__linux__)
    r = syscall(SYS_tgkill, tgid, tid, 0);
#  else
    r = kill((pid_t)tgid, 0);
#  endif
    return r == 0 || errno != ESRCH;    /* EPERM: it exists; EINVAL
                                         * (no such numbers) cannot be */
#endif
}

/* 0: taken; EOWNERDEAD: taken from a holder that died inside; EBUSY: a
 * live holder has it. */
static int
lock_try(efd_impl *impl)
{
    _Atomic uint64_t *w = &impl->cnt->owner;
    uint64_t me, seen = 0;
#ifdef EFD_HAVE_BEACON
    int beacon;
    beacon_check_inherited();
    beacon = atomic_load(&impl->beacon_fd);
    if (beacon >= 0 || (beacon == -1 && beacon_make(impl) == 0))
        me = OWNER_BEACON | atomic_load_explicit(&impl->beacon,
                                                 memory_order_relaxed);
    else
#endif
        me = lock_self() | (impl->owner_checkable ? 0 : OWNER_UNCHECKABLE);
    if (atomic_compare_exchange_strong(w, &seen, me))
        return 0;
    EFD_POINT("lock: held");
    if (lock_holder_alive(impl, seen))
        return EBUSY;
    EFD_POINT("lock: holder dead");
    return atomic_compare_exchange_strong(w, &seen, me) ? EOWNERDEAD : EBUSY;
}

static void
lock_release(efd_impl *impl)
{
    atomic_store(&impl->cnt->owner, 0);
}

/* The pid namespace of this process (0 where /proc cannot tell). */
static uint64_t
pid_namespace(void)
{
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) < 0)
        return 0;
    return (uint64_t)st.st_ino;
}

/* ---- channels ---------------------------------------------------------- */

int
efd_chan_open(int *rfd, int *wfd, int allow_eventfd, int cloexec)
{
    int p[2], i, err;
#ifdef EFD_HAVE_EVENTFD
    if (allow_eventfd) {
        int fd = eventfd(0, (cloexec ? EFD_CLOEXEC : 0) | EFD_NONBLOCK);
        if (fd >= 0) {
            *rfd = *wfd = fd;
            return 0;
        }
        /* Out of descriptors or memory is an error; anything else (a
         * sandbox that refuses eventfd, whatever it answers) means: use a
         * pipe. */
        if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
            return errno;
    }
#else
    (void)allow_eventfd;
#endif
    if (pipe(p) < 0)
        return errno;
    for (i = 0; i < 2; i++) {
        if ((err = efd_set_fd_flags(p[i], cloexec, 1)) != 0) {
            efd_close_fd(&p[0]);
            efd_close_fd(&p[1]);
            return err;
        }
    }
    *rfd = p[0];
    *wfd = p[1];
    return 0;
}

void
efd_chan_close(int *rfd, int *wfd)
{
    if (*wfd != *rfd)
        efd_close_fd(wfd);
    efd_close_fd(rfd);
    *wfd = -1;
}

/* A write that never sleeps, even if another holder of the descriptor
 * cleared O_NONBLOCK on it (and filled the pipe, or the counter): this
 * runs with the GIL held, inside the sync lock.  A full channel is
 * readable already, which is all a put is for. */
static ssize_t
write_nowait(int fd, const void *buf, size_t n)
{
#if defined(__linux__)
    struct iovec iov;
    ssize_t r;
    iov.iov_base = (void *)buf;
    iov.iov_len = n;
    r = pwritev2(fd, &iov, 1, -1, RWF_NOWAIT);
    if (r >= 0 || (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL))
        return r;
#endif
    /* No RWF_NOWAIT for this kind of file here (an eventfd; a pipe before
     * Linux 5.x): make sure of the flag first (one fcntl). */
    if (efd_ensure_nonblock(fd) != 0)
        return -1;
    return write(fd, buf, n);
}

void
efd_chan_put(int rfd, int wfd)
{
    ssize_t n;
    if (rfd == wfd) {
        /* An eventfd channel: only ever this process's own (a helper's
         * door, a waiter's wake channel; a shared page's channel is a
         * pipe), made non-blocking, and a write of 1 blocks only on a
         * counter at 2**64 - 2. */
        uint64_t one = 1;
        do {
            n = write(wfd, &one, sizeof(one));
        } while (n < 0 && errno == EINTR);
    }
    else {
        char b = 1;
        do {
            n = write_nowait(wfd, &b, 1);
        } while (n < 0 && errno == EINTR);
    }
}

/* A read that never sleeps, even if another holder of the descriptor
 * cleared O_NONBLOCK on it. */
static ssize_t
read_nowait(int fd, void *buf, size_t n)
{
#if defined(__linux__)
    struct iovec iov;
    ssize_t r;
    iov.iov_base = buf;
    iov.iov_len = n;
    r = preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
    if (r >= 0 || (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL))
        return r;
    if (efd_ensure_nonblock(fd) != 0)
        return -1;
#endif
    return read(fd, buf, n);
}

void
efd_chan_take(int rfd, int wfd)
{
    /* An eventfd channel (normal mode) hands over everything in one read;
     * a pipe token is one byte, but one read takes whatever else a peer
     * holding the write end put there too (up to 64 bytes), for the same
     * one system call: a stray byte would leave the channel readable with
     * the count at zero. */
    char buf[64];
    ssize_t n;
    do {
        n = read_nowait(rfd, buf, rfd == wfd ? 8 : sizeof(buf));
    } while (n < 0 && errno == EINTR);
}

void
efd_chan_drain(int rfd)
{
    char buf[64];
    ssize_t n;
    do {
        n = read_nowait(rfd, buf, sizeof(buf));
    } while (n > 0 || (n < 0 && errno == EINTR));
}

/* ---- the count --------------------------------------------------------- */

/* The protocol that keeps readiness in step with the count, step by step.
 *
 * Shared state: `count` (changed only by CAS, never under the lock);
 * `sync`, one word holding TOKEN (the channel holds the token) and LOCKED
 * (somebody is inside `lock`, or died there), written only by the holder
 * of `lock`; `dirty` (somebody found readiness possibly out of step and
 * could not take the lock); `armed`.  Every access is sequentially
 * consistent, so all of them fall into one total order, written "<".
 *
 * The changer C of the count:
 *   C1  CAS on count (the change; `now` is what it left)
 *   C2  s = load(sync)                       (after_change)
 *   C3  if s has LOCKED, or TOKEN disagrees with now > 0: sync_token
 * The syncer Y (sync_token; C3, repair, arm):
 *   Y1  store dirty = 1; fence
 *   Y2  trylock(lock): busy -> return (the holder will see Y1, below)
 *   Y3  store sync = TOKEN-as-is | LOCKED
 *   Y4  store dirty = 0
 *   Y5  load count; put or take the token to match; store sync = TOKEN' |
 *       LOCKED  (after EOWNERDEAD, or for a waiter's repair: drain the
 *       channel first, TOKEN = 0)
 *   Y6  store sync = TOKEN' (LOCKED clear); unlock; fence
 *   Y7  load dirty: 1 -> back to Y2
 *
 * Claim: once every process has finished its operations (and none died
 * between C1 and C3 or inside Y2..Y6), the channel holds a token iff
 * count > 0.  Take the last C1 in the total order (the final count F):
 *   (a) C2 saw neither LOCKED nor a disagreement: TOKEN, at C2, matched F.
 *       No holder was inside, so every holder before C2 stored TOKEN at
 *       Y5/Y6 before C2; every holder after C2 sets LOCKED (Y3) after C2
 *       and loads count (Y5) after that, hence after C1: it sees F and
 *       stores the matching TOKEN.  Either way TOKEN ends matching F.
 *   (b) C2 saw a disagreement, unlocked: C syncs (Y1..): if its Y2
 *       succeeds, its Y5 comes after C1 and sees F.  If Y2 fails, a holder
 *       H is inside; see (c).
 *   (c) C's Y1 (dirty = 1) against the holder H: if Y1 < H's Y4, then H's
 *       Y5 loads count after C1 (C1 < C2 < Y1 < Y4 < Y5) and sees F.  If
 *       H's Y4 < Y1, then Y1 is followed by a fence and C's trylock, and
 *       H's unlock by a fence and H's Y7: of two such store-fence-load
 *       pairs at least one load sees the other's store, so either H sees
 *       dirty = 1 and syncs again (after C1: sees F), or C's Y2 sees the
 *       lock free -- then C or whoever holds it next syncs after C1.
 * The old code read TOKEN and LOCKED in two loads: between them a holder
 * could store TOKEN and unlock, so that C saw an old TOKEN that matched
 * and no LOCKED, and nobody synced (issue 17, row 2).  One word, one load.
 *
 * Deaths.  A death between C1 and C3 leaves readiness out of step until
 * the next operation in any process (its C2 sees the disagreement; a read
 * that finds the count zero runs C2 too): efd's own waiters re-check the
 * count themselves at least every EFD_RECHECK_MS, but a select() of
 * somebody else's on fileno() has nobody to repair it for it (see
 * docs/backends.rst).  A death inside the lock leaves LOCKED set: every
 * later C3 then syncs, and its trylock finds the holder gone (the lock,
 * above), takes the lock over, drains the channel and re-derives the
 * token. */

/* Y5: under the lock, make the channel hold a token iff count > 0.  After
 * a death inside the lock the channel's state is unknown: drain it. */
static uint32_t
sync_locked(efd_impl *impl, uint32_t token, int owner_died)
{
    struct efd_count *c = impl->cnt;
    uint32_t want;
    if (owner_died) {
        efd_chan_drain(impl->fd);
        EFD_POINT("sync: drained");
        token = 0;
    }
    want = atomic_load(&c->count) > 0 ? EFD_SYNC_TOKEN : 0;
    EFD_POINT("sync: count read");
    if (want && !token)
        efd_chan_put(impl->fd, impl->wfd);
    else if (!want && token)
        efd_chan_take(impl->fd, impl->wfd);
    else
        return token;
    EFD_POINT(want ? "sync: put" : "sync: take");
    atomic_store(&c->sync, want | EFD_SYNC_LOCKED);
    EFD_POINT("sync: token stored");
    return want;
}

/* Y1..Y7: bring readiness in step with the count, never waiting for the
 * lock: 0, or EBUSY if the lock was held (its holder looks at `dirty`
 * after unlocking). */
static int
sync_token(efd_impl *impl, int rederive)
{
    struct efd_count *c = impl->cnt;
    atomic_store(&c->dirty, 1);                                 /* Y1 */
    atomic_thread_fence(memory_order_seq_cst);
    EFD_POINT("sync_token: dirty=1");
    for (;;) {
        int r = lock_try(impl), died = r == EOWNERDEAD || rederive; /* Y2 */
        uint32_t token;
        EFD_POINT("sync_token: trylock");
        if (r == EBUSY)
            return EBUSY;
        token = atomic_load(&c->sync) & EFD_SYNC_TOKEN;
        atomic_store(&c->sync, token | EFD_SYNC_LOCKED);        /* Y3 */
        EFD_POINT("sync_token: locked");
        atomic_store(&c->dirty, 0);                             /* Y4 */
        EFD_POINT("sync_token: dirty=0");
        token = sync_locked(impl, token, died);                 /* Y5 */
        atomic_store(&c->sync, token);                          /* Y6 */
        EFD_POINT("sync_token: unlocking");
        lock_release(impl);
        atomic_thread_fence(memory_order_seq_cst);
        EFD_POINT("sync_token: unlocked");
        if (!atomic_load(&c->dirty))                            /* Y7 */
            return 0;
    }
}

/* C2, C3: after a change that left the count at `now`, sync readiness if
 * it disagrees (a crossing of zero makes it so, and so does a process that
 * died before its sync) or if someone is inside the lock (who may have
 * looked at the count before our change, or died there: trying the lock
 * tells, and repairs).  So whoever comes next notices a death. */
static inline void
after_change(efd_impl *impl, uint64_t now)
{
    struct efd_count *c = impl->cnt;
    uint32_t s;
    if (!atomic_load(&c->armed))
        return;
    s = atomic_load(&c->sync);                                  /* C2 */
    EFD_POINT("after_change: sync read");
    if ((s & EFD_SYNC_LOCKED) || (now > 0) != ((s & EFD_SYNC_TOKEN) != 0))
        (void)sync_token(impl, 0);                              /* C3 */
}

int
efd_count_try_read(efd_impl *impl, uint64_t *value)
{
    _Atomic uint64_t *count = &impl->cnt->count;
    uint64_t c = atomic_load(count), take;
    EFD_POINT("try_read: count read");
    do {
        if (c == 0) {
            /* Nothing to take.  If the channel still holds a token (its
             * owner died before taking it), take it: a caller that loops
             * on select() and a failed read must not spin. */
            after_change(impl, 0);
            return EAGAIN;
        }
        take = impl->semaphore ? 1 : c;
    } while (!atomic_compare_exchange_weak(count, &c, c - take));
    EFD_POINT("try_read: taken");
    after_change(impl, c - take);
    *value = take;
    return 0;
}

void
efd_count_changed(efd_impl *impl, uint64_t now)
{
    after_change(impl, now);
}

int
efd_count_try_write_limit(efd_impl *impl, uint64_t value, uint64_t limit)
{
    _Atomic uint64_t *count = &impl->cnt->count;
    uint64_t c;
    int err;
    if (value == 0)
        return 0;
    if (efd_books_own_held(impl)
            && (err = efd_books_write(impl, value, limit, &c)) != ENOENT) {
        /* This process holds units: the release settles them first, in
         * the same step (efd_books.c). */
        if (err == 0)
            after_change(impl, c);
        return err;
    }
    c = atomic_load(count);
    EFD_POINT("try_write: count read");
    do {
        if (value > limit || c > limit - value)
            return EAGAIN;
    } while (!atomic_compare_exchange_weak(count, &c, c + value));
    EFD_POINT("try_write: added");
    after_change(impl, c + value);
    return 0;
}

int
efd_count_try_write(efd_impl *impl, uint64_t value)
{
    return efd_count_try_write_limit(impl, value, EFD_MAX);
}

int
efd_count_peek(efd_impl *impl, uint64_t *value)
{
    *value = atomic_load(&impl->cnt->count);
    return 0;
}

/* The channel polled readable and a read found nothing: sync, whatever the
 * token flag says (a death inside the lock can leave flag and channel
 * apart; the robust lock tells whoever tries it). */
int
efd_count_repair(efd_impl *impl)
{
    /* A waiter found the channel readable and nothing to take: a token
     * may be stale, or a byte more than the one token may be there (a
     * peer wrote to the channel).  Re-derive it from scratch, as after a
     * death, or the waiter would find it readable again at once, and
     * spin. */
    return atomic_load(&impl->cnt->armed) ? sync_token(impl, 1) : 0;
}

void
efd_count_arm(efd_impl *impl)
{
    struct efd_count *c = impl->cnt;
    if (!atomic_load(&c->armed)) {
        atomic_store(&c->armed, 1);
        (void)sync_token(impl, 0);
    }
}

int
efd_count_fds(efd_impl *impl, int *out, int max)
{
    int n = impl->wfd != impl->fd ? 3 : 2;
    if (max < n)
        return 0;
    out[0] = impl->shmfd;
    out[1] = impl->fd;
    if (n == 3)
        out[2] = impl->wfd;
    return n;
}

void
efd_count_close(efd_impl *impl)
{
    efd_books_close(impl);
    beacon_drop(impl);
    if (impl->cnt != NULL) {
        munmap((void *)impl->cnt, sizeof(struct efd_count));
        impl->cnt = NULL;
    }
    efd_chan_close(&impl->fd, &impl->wfd);
    efd_close_fd(&impl->shmfd);
}

int
efd_count_open(efd_impl *impl, uint64_t initval, int semaphore, int cloexec,
               uint32_t magic, int channel_eventfd, int armed)
{
    void *map = NULL;
    struct efd_count *c;
    int err;

    impl->fd = impl->wfd = impl->shmfd = -1;
    impl->cnt = NULL;
    atomic_store(&impl->beacon_fd, -1);
    efd_books_init(impl);
    impl->semaphore = semaphore;
    if ((err = shm_new(sizeof(struct efd_count), cloexec, &impl->shmfd, &map)))
        return err;
    impl->cnt = c = (struct efd_count *)map;
    c->pidns = pid_namespace();
    impl->owner_checkable = 1;
    if ((err = efd_chan_open(&impl->fd, &impl->wfd,
                             channel_eventfd && impl->chan_eventfd,
                             cloexec)) != 0) {
        efd_count_close(impl);
        return err;
    }
    atomic_store(&c->count, initval);
    c->semaphore = (uint32_t)semaphore;
    if (armed && initval > 0) {
        efd_chan_put(impl->fd, impl->wfd);
        atomic_store(&c->sync, EFD_SYNC_TOKEN);
    }
    atomic_store(&c->armed, (uint32_t)armed);
    c->magic = magic;
    return 0;
}

/* Adopt (shared page, channel read end[, its write end]) as listed by
 * efd_count_fds().  On failure the caller still owns the fds. */
int
efd_count_adopt(efd_impl *impl, const int *fds, int nfds, int semaphore,
                uint32_t magic)
{
    void *map = NULL;
    int err;

    impl->fd = impl->wfd = impl->shmfd = -1;
    impl->cnt = NULL;
    atomic_store(&impl->beacon_fd, -1);
    efd_books_init(impl);
    if (nfds != 2 && nfds != 3)
        return EINVAL;
    if (fcntl(fds[1], F_GETFD) < 0 || (nfds == 3 && fcntl(fds[2], F_GETFD) < 0))
        return errno;
    if ((err = shm_adopt(fds[0], sizeof(struct efd_count), &map)))
        return err;
    if (((struct efd_count *)map)->magic != magic) {
        /* "ef" and a backend and layout: an efd page, of another kind. */
        int efd_page = (((struct efd_count *)map)->magic >> 16) == 0x6566;
        munmap(map, sizeof(struct efd_count));
        return efd_page ? EPROTO : EINVAL;
    }
    impl->cnt = (struct efd_count *)map;
    impl->owner_checkable = impl->cnt->pidns == pid_namespace();
    impl->shmfd = fds[0];
    impl->fd = fds[1];
    impl->wfd = nfds == 3 ? fds[2] : fds[1];
    impl->semaphore = semaphore >= 0 ? semaphore : (int)impl->cnt->semaphore;
    efd_books_adopted(impl);
    return 0;
}
