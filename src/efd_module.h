/*
 * efd_module.h -- the Python side: module state, the EventFD object, and the
 * wait loop that every blocking call goes through.
 */
#ifndef EFD_MODULE_H
#define EFD_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sys/types.h>

#include "efd.h"

/* Per-interpreter state.  The probe answers are cached here: the probe runs
 * once per process (per interpreter), never per call. */
typedef struct {
    PyTypeObject *EventFD_type;
    int probed;
    int err_plain;     /* errno of eventfd2(0, CLOEXEC|NONBLOCK); 0: works */
    int err_sem;       /* errno of the same with EFD_SEMAPHORE; 0: works */
    volatile uint32_t pid;  /* getpid(), refreshed in a fork child */
} efd_state;

typedef struct {
    PyObject_HEAD
    efd_impl impl;
    int closed;        /* set by close(); read without the GIL by waiters */
    int nonblocking;   /* describes read()/write(), not the descriptor */
    int users;         /* threads waiting with the GIL released */
    pid_t users_pid;   /* the process those users belong to (fork) */
    int wake_rfd;      /* woken by close() while users > 0; made lazily */
    int wake_wfd;
    pid_t wake_pid;
    PyObject *weakreflist;
} eventfd_object;

/* No deadline. */
#define EFD_FOREVER (-1.0)

/* What efd_wait() does once the object is ready: take (a read), add *value
 * (a write), or nothing (wait until the object polls readable, without
 * consuming: efd.Event's wait). */
enum { EFD_OP_READ, EFD_OP_WRITE, EFD_OP_READY };

/* One operation `op`; a read's result lands in *value.
 * blocking == 0: try once.  timeout < 0: no deadline.
 * Returns 1 if done, 0 if it would block or the time ran out,
 * -1 with an exception set (a signal handler raised, the object was closed
 * while waiting, or an OS error). */
int efd_wait(eventfd_object *self, int op, uint64_t *value,
             int blocking, double timeout);

/* A timeout argument: None -> EFD_FOREVER, else non-negative seconds
 * (inf, or an int too large for a double, -> EFD_FOREVER). */
int efd_to_timeout(PyObject *obj, double *out);

/* Release what the object holds now if nobody is waiting in it; otherwise
 * wake the waiters and leave the final close to the last of them. */
void efd_object_close(eventfd_object *self);

/* The "closed" error every method raises after close(). */
PyObject *efd_err_closed(void);

/* OSError for a backend errno. */
PyObject *efd_err_errno(int err);

/* METH_FASTCALL | METH_KEYWORDS argument parsing: fill out[0..n) from the
 * positional args and keywords by the names in `names` (NULL-terminated;
 * the first `npos` may be given by position).  Unset slots stay NULL; the
 * caller checks required ones.  Messages follow CPython's. */
int efd_parse_args(const char *fname, const char *const *names, int npos,
                   PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                   PyObject **out);

/* Types and functions defined in efd_object.c, used by efd_module.c. */
extern PyType_Spec efd_eventfd_spec;
efd_state *efd_state_from_type(PyTypeObject *type);
int efd_probe(efd_state *st);

#endif /* EFD_MODULE_H */
