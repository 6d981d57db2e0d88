/*
 * efd_ring.c -- a futex wait that an event loop can watch: the smallest
 * io_uring this needs (Linux 6.7's IORING_OP_FUTEX_WAIT), with no library.
 *
 * A loop cannot sleep in futex(): it sleeps in epoll_wait() (or whatever
 * its selector is).  A ring's descriptor polls readable while its
 * completion queue holds an entry, and a FUTEX_WAIT submitted to the ring
 * is queued on the futex word beside the threads asleep in futex() -- the
 * kernel's FUTEX_WAKE(n) picks n of them, threads and rings alike, in the
 * order they came.  So a loop that waits through a ring is one more
 * sleeper of the futex backend (efd_futex.c, "An event loop's sleep"), and
 * a release wakes one loop, not every loop that watches a descriptor.
 *
 * Cancelling a single FUTEX_WAIT is atomic: the kernel takes the request
 * off the futex word's queue, or finds it already woken (then its
 * completion says so).  FUTEX_WAITV is not (a woken vector keeps its other
 * words queued until its completion runs, and a wake-up that reaches one
 * of them meanwhile is counted and lost), which is why a loop waits on
 * each word with a request of its own.
 *
 * What a process inherits: the ring's descriptor is close-on-exec (the
 * kernel makes it so) and requests belong to the thread that submitted
 * them; a thread that exits or execs has its requests cancelled by the
 * kernel.  A fork child shares its parent's ring and must never submit to
 * it (a cancel from the child would cancel the parent's waits): the owner
 * checks its process before it does (efd_loop.c).
 *
 * The structures are the kernel's ABI, spelled out here so that the build
 * needs no io_uring headers (older build hosts have none, or none that
 * know the futex operations); a kernel without them answers the probe
 * with EINVAL, one that forbids io_uring (kernel.io_uring_disabled, a
 * seccomp profile) with EPERM or ENOSYS, and the loops then wait as they
 * did before: on the readiness descriptor, looking at the count every
 * EFD_RECHECK_MS.
 */
#include "efd.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__)
#  include <sys/mman.h>
#  include <sys/syscall.h>
#endif

#if defined(__linux__) && !defined(EFD_EXPLORE) \
    && (defined(__NR_io_uring_setup) || defined(__x86_64__) \
        || defined(__aarch64__))

#ifndef __NR_io_uring_setup
#  define __NR_io_uring_setup 425
#  define __NR_io_uring_enter 426
#endif

/* The kernel's ABI (include/uapi/linux/io_uring.h). */
struct ring_sqe {
    uint8_t opcode, flags;
    uint16_t ioprio;
    int32_t fd;             /* FUTEX_WAIT: futex2 flags */
    uint64_t off;           /* FUTEX_WAIT: the expected value (addr2) */
    uint64_t addr;          /* the futex word; ASYNC_CANCEL: the tag */
    uint32_t len;
    uint32_t op_flags;      /* FUTEX_WAIT: 0 (reserved) */
    uint64_t user_data;
    uint16_t buf_index, personality;
    int32_t splice_fd_in;
    uint64_t addr3;         /* FUTEX_WAIT: the bitset mask */
    uint64_t pad;
};
struct ring_cqe {
    uint64_t user_data;
    int32_t res;
    uint32_t flags;
};
struct ring_sqring_offsets {
    uint32_t head, tail, ring_mask, ring_entries, flags, dropped, array,
             resv1;
    uint64_t user_addr;
};
struct ring_cqring_offsets {
    uint32_t head, tail, ring_mask, ring_entries, overflow, cqes, flags,
             resv1;
    uint64_t user_addr;
};
struct ring_params {
    uint32_t sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle,
             features, wq_fd, resv[3];
    struct ring_sqring_offsets sq_off;
    struct ring_cqring_offsets cq_off;
};

_Static_assert(sizeof(struct ring_sqe) == 64, "io_uring_sqe is 64 bytes");
_Static_assert(sizeof(struct ring_params) == 120, "io_uring_params");

#define RING_OP_ASYNC_CANCEL 14
#define RING_OP_FUTEX_WAIT 51           /* Linux 6.7 */
#define RING_ENTER_GETEVENTS 1u
#define RING_FEAT_SINGLE_MMAP 1u
#define RING_OFF_SQ_RING 0ULL
#define RING_OFF_CQ_RING 0x8000000ULL
#define RING_OFF_SQES 0x10000000ULL
#define RING_FUTEX2_SIZE_U32 0x02       /* shared: no FUTEX2_PRIVATE */
#define RING_ENTRIES 8

int
efd_ring_open(efd_ring *r)
{
    struct ring_params p;
    int fd;
    memset(r, 0, sizeof(*r));
    r->fd = -1;
    memset(&p, 0, sizeof(p));
    fd = (int)syscall(__NR_io_uring_setup, RING_ENTRIES, &p);
    if (fd < 0)
        return errno;
    r->fd = fd;
    r->sq_len = p.sq_off.array + p.sq_entries * sizeof(uint32_t);
    r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct ring_cqe);
    if (p.features & RING_FEAT_SINGLE_MMAP) {
        if (r->cq_len > r->sq_len)
            r->sq_len = r->cq_len;
        r->cq_len = 0;
    }
    r->sq_map = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_POPULATE, fd, RING_OFF_SQ_RING);
    if (r->sq_map == MAP_FAILED) {
        r->sq_map = NULL;
        goto fail;
    }
    if (r->cq_len) {
        r->cq_map = mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_POPULATE, fd, RING_OFF_CQ_RING);
        if (r->cq_map == MAP_FAILED) {
            r->cq_map = NULL;
            goto fail;
        }
    }
    r->sqe_len = p.sq_entries * sizeof(struct ring_sqe);
    r->sqes = mmap(NULL, r->sqe_len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, RING_OFF_SQES);
    if (r->sqes == MAP_FAILED) {
        r->sqes = NULL;
        goto fail;
    }
    {
        char *sq = r->sq_map, *cq = r->cq_map ? r->cq_map : r->sq_map;
        r->sq_head = (void *)(sq + p.sq_off.head);
        r->sq_tail = (void *)(sq + p.sq_off.tail);
        r->sq_mask = *(uint32_t *)(void *)(sq + p.sq_off.ring_mask);
        r->sq_array = (void *)(sq + p.sq_off.array);
        r->cq_head = (void *)(cq + p.cq_off.head);
        r->cq_tail = (void *)(cq + p.cq_off.tail);
        r->cq_mask = *(uint32_t *)(void *)(cq + p.cq_off.ring_mask);
        r->cqes = (void *)(cq + p.cq_off.cqes);
    }
    return 0;
fail:
    {
        int err = errno;
        efd_ring_close(r);
        return err;
    }
}

void
efd_ring_close(efd_ring *r)
{
    if (r->sqes != NULL)
        munmap(r->sqes, r->sqe_len);
    if (r->cq_map != NULL)
        munmap(r->cq_map, r->cq_len);
    if (r->sq_map != NULL)
        munmap(r->sq_map, r->sq_len);
    if (r->fd >= 0)
        close(r->fd);
    memset(r, 0, sizeof(*r));
    r->fd = -1;
}

/* The next free submission entry, zeroed; NULL if the queue is full (it
 * holds RING_ENTRIES, and a sleeper queues one -- its wait, or a cancel --
 * before it submits). */
static struct ring_sqe *
next_sqe(efd_ring *r)
{
    uint32_t tail = *r->sq_tail, head;
    struct ring_sqe *sqe;
    head = __atomic_load_n(r->sq_head, __ATOMIC_ACQUIRE);
    if (tail - head >= RING_ENTRIES)
        return NULL;
    sqe = &((struct ring_sqe *)r->sqes)[tail & r->sq_mask];
    memset(sqe, 0, sizeof(*sqe));
    r->sq_array[tail & r->sq_mask] = tail & r->sq_mask;
    r->pending++;
    return sqe;
}

static void
publish(efd_ring *r)
{
    __atomic_store_n(r->sq_tail, *r->sq_tail + 1, __ATOMIC_RELEASE);
}

int
efd_ring_wait(efd_ring *r, _Atomic uint32_t *word, uint32_t val, uint64_t tag)
{
    struct ring_sqe *sqe = next_sqe(r);
    if (sqe == NULL)
        return EBUSY;
    sqe->opcode = RING_OP_FUTEX_WAIT;
    sqe->addr = (uintptr_t)word;
    sqe->off = val;
    sqe->addr3 = UINT32_MAX;            /* FUTEX_BITSET_MATCH_ANY */
    sqe->fd = RING_FUTEX2_SIZE_U32;
    sqe->user_data = tag;
    publish(r);
    return 0;
}

int
efd_ring_cancel(efd_ring *r, uint64_t tag, uint64_t cancel_tag)
{
    struct ring_sqe *sqe = next_sqe(r);
    if (sqe == NULL)
        return EBUSY;
    sqe->opcode = RING_OP_ASYNC_CANCEL;
    sqe->addr = tag;
    sqe->user_data = cancel_tag;
    publish(r);
    return 0;
}

/* Take back the entries the kernel has not consumed: after a failed
 * submission they must not go out with the next one (a stale FUTEX_WAIT
 * whose word came back to its old value would sleep under a tag nobody
 * reaps, and could take a release's wake-up with it).  Only the kernel
 * moves sq_head, and only inside io_uring_enter(): with none running, the
 * entries between the head and the tail are ours to drop. */
static void
withdraw(efd_ring *r)
{
    __atomic_store_n(r->sq_tail, __atomic_load_n(r->sq_head, __ATOMIC_ACQUIRE),
                     __ATOMIC_RELEASE);
    r->pending = 0;
}

int
efd_ring_submit(efd_ring *r)
{
    while (r->pending > 0) {
        long n = syscall(__NR_io_uring_enter, r->fd, r->pending, 0, 0,
                         NULL, (size_t)0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int err = n < 0 ? errno : EBUSY;
            withdraw(r);
            return err;
        }
        r->pending -= (unsigned)n;
    }
    return 0;
}

int
efd_ring_next(efd_ring *r, uint64_t *tag, int32_t *res)
{
    uint32_t head = *r->cq_head;
    const struct ring_cqe *cqe;
    if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
        return 0;
    cqe = &((const struct ring_cqe *)r->cqes)[head & r->cq_mask];
    *tag = cqe->user_data;
    *res = cqe->res;
    __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
    return 1;
}

int
efd_ring_probe(void)
{
    /* A wait for a value the word does not hold: the kernel answers
     * EAGAIN where it has the operation, EINVAL where it does not. */
    _Atomic uint32_t word = 1;
    efd_ring r;
    uint64_t tag = 0;
    int32_t res = 0;
    int err = efd_ring_open(&r);
    if (err)
        return err;
    err = efd_ring_wait(&r, &word, 0, 7);
    if (err == 0)
        err = efd_ring_submit(&r);
    if (err == 0) {
        if (!efd_ring_next(&r, &tag, &res)) {
            /* Completed inline, or not at all: ask once more. */
            (void)syscall(__NR_io_uring_enter, r.fd, 0, 1,
                          RING_ENTER_GETEVENTS, NULL, (size_t)0);
            if (!efd_ring_next(&r, &tag, &res))
                err = ENOSYS;
        }
        if (err == 0 && (tag != 7 || res != -EAGAIN))
            err = res < 0 ? -res : EINVAL;
    }
    efd_ring_close(&r);
    return err;
}

#else  /* no io_uring here */

int efd_ring_open(efd_ring *r) { r->fd = -1; return ENOSYS; }
void efd_ring_close(efd_ring *r) { r->fd = -1; }
int efd_ring_wait(efd_ring *r, _Atomic uint32_t *word, uint32_t val,
                  uint64_t tag)
{ (void)r; (void)word; (void)val; (void)tag; return ENOSYS; }
int efd_ring_cancel(efd_ring *r, uint64_t tag, uint64_t cancel_tag)
{ (void)r; (void)tag; (void)cancel_tag; return ENOSYS; }
int efd_ring_submit(efd_ring *r) { (void)r; return ENOSYS; }
int efd_ring_next(efd_ring *r, uint64_t *tag, int32_t *res)
{ (void)r; (void)tag; (void)res; return 0; }
int efd_ring_probe(void) { return ENOSYS; }

#endif
