/*
 * efd_registry.c -- the process's table of live efd objects.
 *
 * Two rules need to know, in every interpreter of the process, which
 * descriptors the live efd objects own:
 *
 *  - "Owned once" (SPEC §6): EventFD.from_fd and efd.from_handle refuse a
 *    descriptor that a live efd object of this process already owns, so
 *    that no object ever closes a descriptor under another.
 *  - Pickling inside one process (concurrent.interpreters' Queue.put,
 *    Interpreter.call, InterpreterPoolExecutor): a dump names its source
 *    object by this process's nonce and the object's token, and holds no
 *    descriptor; the load, in whichever interpreter, duplicates the
 *    source's descriptors, found here, if the source is still open.
 *
 * Why a process-global table behind a mutex, when everything else in the
 * module is per interpreter: each interpreter imports efd._efd anew (its
 * own module state, types and probe cache), and since 3.12 interpreters
 * may each have their own GIL (the module declares
 * Py_MOD_PER_INTERPRETER_GIL_SUPPORTED), so no GIL orders one interpreter's
 * close() against another's load.  The mutex does.  The table holds plain C
 * data only -- a token, descriptor numbers, the backend's table, the mode
 * -- and never a Python object: an interpreter must not touch another's
 * objects, not even their reference counts.  Nothing done under the mutex
 * waits for anything but the kernel (fstat, readlink, a /proc read, dup),
 * and nobody takes the GIL while holding it, so it cannot deadlock with a
 * GIL.
 *
 * Safety of the duplicates: an object enters the table once it is open and
 * leaves it, under the mutex, *before* close(), detach() or its finalizer
 * can close (or give away) a descriptor.  So a loader that finds the entry
 * while holding the mutex duplicates descriptors that are still the
 * object's: never a recycled number.
 *
 * fork(): pthread_atfork holds the mutex across fork(), so no child
 * inherits it locked, and gives the child a new nonce (a pickle made in the
 * parent does not load in the child: a pickle is for its own process).
 * The child's copy of the table describes the child's copies of the
 * objects, which is right: they own the same numbers there.
 *
 * What "the same descriptor" means (owned once).  Two numbers are the same
 * if they are equal, or if they name the same file: a pipe's or a memfd's
 * inode (st_dev, st_ino) is the object itself, so a dup'd number, or the
 * other end of an object's pipe, is refused.  Every eventfd shares one
 * anonymous inode, so for eventfds the kernel's `eventfd-id` (fdinfo, Linux
 * 6.0 and later) tells them apart; where the kernel does not show it, only
 * the number itself is compared (a dup'd number of an owned eventfd is
 * then not recognised: documented in docs/processes.rst).
 */
#include "efd_module.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct efd_reg {
    struct efd_reg *next, *prev;
    uint64_t token;
    int fds[3];
    int nfds;
    const efd_backend *ops;
    int semaphore, nonblocking;
    /* Pickles made of the object and not loaded yet, and whether the
     * object is gone: an orphan's descriptors are the table's own
     * duplicates, kept for those pickles (see efd_reg_remove). */
    unsigned dumps;
    int orphan;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static struct efd_reg *reg_head;
static uint64_t reg_next_token = 1;
static uint64_t reg_nonce;
/* Changes in the parent and in the child at every fork() made through the
 * C library -- pthread_atfork runs for any caller: os.fork, multiprocessing,
 * an extension, ctypes -- where os.register_at_fork's hooks see Python's
 * forks only.  The parent's goes up by one, the child's by 2**32: never a
 * value an object of that process recorded before (EventFD._alone()). */
static uint64_t reg_lineage;

static uint64_t
new_nonce(void)
{
    struct timespec a, b;
    uint64_t x = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &x, sizeof(x)) != (ssize_t)sizeof(x))
            x = 0;
        close(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_REALTIME, &b);
    x ^= (uint64_t)a.tv_nsec * UINT64_C(0x9e3779b97f4a7c15)
         ^ (uint64_t)b.tv_sec ^ ((uint64_t)getpid() << 32);
    return x ? x : 1;
}

static void reg_prepare(void) { pthread_mutex_lock(&reg_lock); }
static void
reg_parent(void)
{
    reg_lineage++;
    pthread_mutex_unlock(&reg_lock);
}

static void
reg_child(void)
{
    reg_lineage += UINT64_C(1) << 32;
    pthread_mutex_unlock(&reg_lock);
    reg_nonce = new_nonce();
}

static void
reg_init(void)
{
    reg_nonce = new_nonce();
    (void)pthread_atfork(reg_prepare, reg_parent, reg_child);
}

/* One of the numbers the fork handlers change, read under the mutex. */
static uint64_t
read_locked(const uint64_t *number)
{
    uint64_t n;
    pthread_once(&reg_once, reg_init);
    pthread_mutex_lock(&reg_lock);
    n = *number;
    pthread_mutex_unlock(&reg_lock);
    return n;
}

uint64_t
efd_reg_lineage(void)
{
    return read_locked(&reg_lineage);
}

uint64_t
efd_reg_nonce(void)
{
    return read_locked(&reg_nonce);
}

void
efd_reg_add(eventfd_object *self)
{
    struct efd_reg *e;
    pthread_once(&reg_once, reg_init);
    if (self->reg != NULL || self->impl.ops == NULL
            || self->impl.ops->fds == NULL)
        return;
    e = (struct efd_reg *)calloc(1, sizeof(*e));
    if (e == NULL)
        return;     /* unlisted: not picklable in-process, not guarded */
    e->nfds = self->impl.ops->fds(&self->impl, e->fds, 3);
    e->ops = self->impl.ops;
    e->semaphore = self->impl.semaphore;
    e->nonblocking = self->nonblocking;
    pthread_mutex_lock(&reg_lock);
    e->token = reg_next_token++;
    e->next = reg_head;
    e->prev = NULL;
    if (reg_head != NULL)
        reg_head->prev = e;
    reg_head = e;
    pthread_mutex_unlock(&reg_lock);
    self->reg = e;
}

static void
unlink_locked(struct efd_reg *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        reg_head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
}

/* Pickles whose source is garbage-collected before they are loaded (an
 * Interpreter.call's result: the callee's object is dropped as the call
 * returns, before the caller loads it) must still load: an object that was
 * collected -- not closed -- while pickles of it are pending leaves its
 * entry behind as an orphan holding duplicates of its descriptors, until
 * those pickles are loaded.  An explicit close() ends them at once: loading
 * then raises ValueError.  (A pickle that is never loaded keeps the
 * orphan's duplicates open until the process ends.) */
void
efd_reg_remove(eventfd_object *self, int collected)
{
    struct efd_reg *e = self->reg;
    int i;
    if (e == NULL)
        return;
    self->reg = NULL;
    pthread_mutex_lock(&reg_lock);
    if (collected && e->dumps > 0) {
        for (i = 0; i < e->nfds; i++) {
            int fd = fcntl(e->fds[i], F_DUPFD_CLOEXEC, 0);
            if (fd < 0)
                break;
            e->fds[i] = fd;
        }
        if (i == e->nfds) {
            e->orphan = 1;
            pthread_mutex_unlock(&reg_lock);
            return;
        }
        while (i-- > 0)
            close(e->fds[i]);
    }
    unlink_locked(e);
    pthread_mutex_unlock(&reg_lock);
    free(e);
}

uint64_t
efd_reg_dump(eventfd_object *self)
{
    uint64_t token = 0;
    if (self->reg == NULL)
        return 0;
    pthread_mutex_lock(&reg_lock);
    self->reg->dumps++;
    token = self->reg->token;
    pthread_mutex_unlock(&reg_lock);
    return token;
}

/* The kernel's eventfd-id of fd, or -1 if it is not shown. */
static long long
eventfd_id(int fd)
{
    char path[64], line[256];
    long long id = -1;
    FILE *f;
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    f = fopen(path, "re");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        long long v;
        if (sscanf(line, "eventfd-id: %lld", &v) == 1) {
            id = v;
            break;
        }
    }
    fclose(f);
    return id;
}

/* How fd is told apart from other descriptors (see the top). */
struct ident {
    int fd;
    int ok;                 /* fstat worked */
    dev_t dev;
    ino_t ino;
    int anon;               /* an eventfd: compare ids, not inodes */
    long long evid;         /* -1: unknown */
};

static void
ident_of(int fd, struct ident *id)
{
    struct stat st;
    id->fd = fd;
    id->evid = -1;
    id->anon = 0;
    id->ok = fstat(fd, &st) == 0;
    if (!id->ok)
        return;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    if (efd_fd_is_eventfd(fd) == 1) {
        id->anon = 1;
        id->evid = eventfd_id(fd);
    }
}

static int
same(const struct ident *a, int fd)
{
    struct ident b;
    if (a->fd == fd)
        return 1;
    if (!a->ok)
        return 0;
    ident_of(fd, &b);
    if (!b.ok || a->dev != b.dev || a->ino != b.ino || a->anon != b.anon)
        return 0;
    if (!a->anon)
        return 1;
    return a->evid >= 0 && a->evid == b.evid;
}

int
efd_reg_owned(int fd)
{
    struct ident id;
    struct efd_reg *e;
    int i, found = 0;
    pthread_once(&reg_once, reg_init);
    ident_of(fd, &id);
    pthread_mutex_lock(&reg_lock);
    for (e = reg_head; e != NULL && !found; e = e->next) {
        for (i = 0; i < e->nfds && !found; i++)
            found = same(&id, e->fds[i]);
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

int
efd_reg_dup(uint64_t nonce, uint64_t token, int *fds, int *nfds,
            const efd_backend **ops, int *semaphore, int *nonblocking)
{
    struct efd_reg *e;
    int i, err = 0;
    pthread_once(&reg_once, reg_init);
    pthread_mutex_lock(&reg_lock);
    if (nonce != reg_nonce) {
        pthread_mutex_unlock(&reg_lock);
        return ESRCH;
    }
    for (e = reg_head; e != NULL; e = e->next) {
        if (e->token == token)
            break;
    }
    if (e == NULL) {
        pthread_mutex_unlock(&reg_lock);
        return ENOENT;
    }
    for (i = 0; i < e->nfds; i++) {
        fds[i] = fcntl(e->fds[i], F_DUPFD_CLOEXEC, 0);
        if (fds[i] < 0) {
            err = errno;
            while (i-- > 0)
                close(fds[i]);
            break;
        }
    }
    if (!err) {
        *nfds = e->nfds;
        *ops = e->ops;
        *semaphore = e->semaphore;
        *nonblocking = e->nonblocking;
        if (e->dumps > 0)
            e->dumps--;
        if (e->orphan && e->dumps == 0) {
            for (i = 0; i < e->nfds; i++)
                close(e->fds[i]);
            unlink_locked(e);
            free(e);
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return err;
}
