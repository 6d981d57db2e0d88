/*
 * floor.c -- the syscall floor for benchmarks/run.py.
 *
 * Each case does, in C, the same system calls that efd's native backend
 * makes for the Python case of the same name, so the gap between this
 * program and efd is what Python and the wrapper cost.  `sempair` is the
 * other floor: a futex-based POSIX semaphore (what threading,
 * multiprocessing and posix_ipc use underneath), which makes no syscall
 * while uncontended.
 *
 * Usage: floor CASE N [P C]   -> prints the seconds the timed part took.
 * Built by run.py with `cc -O2 -pthread`; not part of the package.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void
die(const char *what)
{
    perror(what);
    exit(2);
}

static int
efd(unsigned int init, int flags)
{
    int fd = eventfd(init, EFD_CLOEXEC | EFD_SEMAPHORE | flags);
    if (fd < 0)
        die("eventfd");
    return fd;
}

/* Blocking or not, a failed read/write other than EAGAIN is fatal. */
static int
rd(int fd)
{
    uint64_t v;
    ssize_t n;
    do {
        n = read(fd, &v, sizeof(v));
    } while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof(v))
        return 0;
    if (n < 0 && errno == EAGAIN)
        return EAGAIN;
    die("read");
    return -1;
}

static void
wr(int fd, uint64_t v)
{
    ssize_t n;
    do {
        n = write(fd, &v, sizeof(v));
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(v))
        die("write");
}

static void
wait_readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    while (poll(&p, 1, -1) < 0)
        if (errno != EINTR)
            die("poll");
}

/* ---- ping-pong partners ------------------------------------------------ */

struct partner {
    int req, resp;      /* the partner reads req, answers on resp */
    long n;
    int use_poll;       /* wait with poll() on a non-blocking req first */
};

static void *
partner_loop(void *arg)
{
    struct partner *p = arg;
    long i;
    for (i = 0; i < p->n; i++) {
        if (p->use_poll) {
            while (rd(p->req) == EAGAIN)
                wait_readable(p->req);
        }
        else
            rd(p->req);
        wr(p->resp, 1);
    }
    return NULL;
}

/* One side of a ping-pong: `n` round trips, timed, after one untimed. */
static double
pingpong(int req, int resp, long n)
{
    double t0;
    long i;
    wr(req, 1);
    rd(resp);
    t0 = now();
    for (i = 0; i < n; i++) {
        wr(req, 1);
        rd(resp);
    }
    return now() - t0;
}

static double
pingpong_case(long n, int use_fork, int use_poll)
{
    struct partner p;
    double t;
    p.req = efd(0, use_poll ? EFD_NONBLOCK : 0);
    p.resp = efd(0, 0);
    p.n = n + 1;
    p.use_poll = use_poll;
    if (use_fork) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            partner_loop(&p);
            _exit(0);
        }
        t = pingpong(p.req, p.resp, n);
        waitpid(pid, NULL, 0);
    }
    else {
        pthread_t th;
        if (pthread_create(&th, NULL, partner_loop, &p) != 0)
            die("pthread_create");
        t = pingpong(p.req, p.resp, n);
        pthread_join(th, NULL);
    }
    close(p.req);
    close(p.resp);
    return t;
}

/* ---- many producers, many consumers, across processes ------------------- */

static double
mpmc(long m, int producers, int consumers)
{
    int sem = efd(0, 0), go = efd(0, 0), done = efd(0, 0);
    long total = m * producers, share = total / consumers;
    int i, k;
    double t0;

    for (i = 0; i < producers + consumers; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            long j;
            rd(go);
            if (i < producers) {
                for (j = 0; j < m; j++)
                    wr(sem, 1);
            }
            else {
                long mine = share + (i - producers < total % consumers);
                for (j = 0; j < mine; j++)
                    rd(sem);
                wr(done, 1);
            }
            _exit(0);
        }
    }
    t0 = now();
    wr(go, (uint64_t)(producers + consumers));
    for (k = 0; k < consumers; k++)
        rd(done);
    t0 = now() - t0;
    while (wait(NULL) > 0)
        ;
    return t0;
}

int
main(int argc, char **argv)
{
    const char *c;
    long n, i;
    double t0, t = 0;

    if (argc < 3) {
        fprintf(stderr, "usage: floor CASE N [PRODUCERS CONSUMERS]\n");
        return 2;
    }
    c = argv[1];
    n = atol(argv[2]);

    if (strcmp(c, "pair") == 0 || strcmp(c, "pair-held") == 0) {
        int fd = efd(strcmp(c, "pair") == 0 ? 0 : 1, EFD_NONBLOCK);
        t0 = now();
        for (i = 0; i < n; i++) {
            wr(fd, 1);
            rd(fd);
        }
        t = now() - t0;
    }
    else if (strcmp(c, "fail") == 0) {
        int fd = efd(0, EFD_NONBLOCK);
        t0 = now();
        for (i = 0; i < n; i++)
            if (rd(fd) != EAGAIN)
                die("fail: read succeeded");
        t = now() - t0;
    }
    else if (strcmp(c, "timed") == 0) {
        int fd = efd(0, EFD_NONBLOCK);
        wr(fd, (uint64_t)n);
        t0 = now();
        for (i = 0; i < n; i++)
            rd(fd);
        t = now() - t0;
    }
    else if (strcmp(c, "sempair") == 0) {
        sem_t *s = mmap(NULL, sizeof(sem_t), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (s == MAP_FAILED || sem_init(s, 1, 0) < 0)
            die("sem_init");
        t0 = now();
        for (i = 0; i < n; i++) {
            sem_post(s);
            while (sem_wait(s) < 0 && errno == EINTR)
                ;
        }
        t = now() - t0;
    }
    else if (strcmp(c, "thread") == 0)
        t = pingpong_case(n, 0, 0);
    else if (strcmp(c, "process") == 0)
        t = pingpong_case(n, 1, 0);
    else if (strcmp(c, "wakeup-thread") == 0)
        t = pingpong_case(n, 0, 1);
    else if (strcmp(c, "wakeup-process") == 0)
        t = pingpong_case(n, 1, 1);
    else if (strcmp(c, "mpmc") == 0 && argc >= 5)
        t = mpmc(n, atoi(argv[3]), atoi(argv[4]));
    else {
        fprintf(stderr, "floor: unknown case %s\n", c);
        return 2;
    }
    printf("%.9f\n", t);
    return 0;
}
