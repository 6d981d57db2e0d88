/*
 * efd_backend.c -- which backend an EventFD uses.
 *
 * EventFD() with no backend named follows the probe that the 2.6.30 commit
 * message recommends: ask the kernel for what you need, and fall back when
 * it refuses (SPEC §2, §5):
 *
 *   eventfd2(0, EFD_SEMAPHORE) works            -> eventfd
 *   only EFD_SEMAPHORE is refused, with EINVAL  -> eventfd-readback
 *   eventfd2 refused with any other errno       -> pipe
 *   EMFILE, ENFILE, ENOMEM                      -> raised, never cached
 *
 * The answer is cached in module state: the probe runs once per process.
 * A backend named by the caller (argument, or $EFD_BACKEND) needs no probe:
 * it is tried, and its own failure is the error.  from_fd() chooses by what
 * /proc says of the descriptor.
 */
#include "efd_module.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef EFD_HAVE_EVENTFD
#  include <sys/eventfd.h>
#endif

/* Errors that say nothing about support: the process (or the system) is out
 * of descriptors or memory right now. */
static int
is_passing(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOMEM;
}

static int
probe_one(int flags)
{
#ifdef EFD_HAVE_EVENTFD
    int fd = eventfd(0, flags | EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
#else
    (void)flags;
    return ENOSYS;
#endif
}

int
efd_probe(efd_state *st)
{
    int plain, sem;
    if (st->probed)
        return 0;
    plain = probe_one(0);
    if (is_passing(plain)) {
        efd_err_errno(plain);
        return -1;
    }
#ifdef EFD_HAVE_EVENTFD
    sem = plain ? plain : probe_one(EFD_SEMAPHORE);
#else
    sem = plain;
#endif
    if (is_passing(sem)) {
        efd_err_errno(sem);
        return -1;
    }
    st->err_plain = plain;
    st->err_sem = sem;
    st->probed = 1;
    return 0;
}

int
efd_state_nowait(efd_state *st)
{
    if (st->nowait < 0)
        st->nowait = efd_kernel_nowait_works();
    return st->nowait;
}

int
efd_state_bell(efd_state *st)
{
    if (st->bell < 0)
        st->bell = efd_bell_probe();
    return st->bell;
}

const efd_backend *
efd_backend_by_name(const char *name)
{
    if (strcmp(name, "eventfd") == 0)
        return &efd_backend_eventfd;
    if (strcmp(name, "eventfd-readback") == 0)
        return &efd_backend_readback;
    if (strcmp(name, "pipe") == 0)
        return efd_pipe_backend();
    if (strcmp(name, "futex") == 0)
        return &efd_backend_futex;
    return NULL;
}

PyObject *
efd_err_unavailable(const char *name, int err, int semaphore)
{
    const char *why;
    PyObject *msg;
    if (strcmp(name, "futex") == 0)
        why = err == ENOSYS ? "no process-shared futex on this system"
                            : "futex() or shared memory is refused";
    else if (strcmp(name, "pipe") == 0)
        why = "pipe() or shared memory fails";
    else if (semaphore && err == EINVAL && strcmp(name, "eventfd") == 0)
        why = "the kernel refuses EFD_SEMAPHORE";
    else
        why = "eventfd2() fails";
    msg = PyUnicode_FromFormat(
        "the '%s' backend is not available here: %s (%s)", name, why,
        strerror(err));
    if (msg != NULL) {
        PyObject *exc = PyObject_CallFunction(PyExc_OSError, "iO", err, msg);
        if (exc != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
        Py_DECREF(msg);
    }
    return NULL;
}

/* The probe's choice for a new object. */
static const efd_backend *
probed_backend(efd_state *st, int semaphore)
{
    if (efd_probe(st) < 0)
        return NULL;
    if (st->err_plain)
        return efd_pipe_backend();
    if (!semaphore || st->err_sem == 0)
        return &efd_backend_eventfd;
    if (st->err_sem == EINVAL)
        return &efd_backend_readback;
    return efd_pipe_backend();
}

const efd_backend *
efd_choose_backend(efd_state *st, PyObject *arg, int semaphore)
{
    const char *name = NULL;
    const char *origin = "backend";
    const efd_backend *b;

    if (arg != NULL && arg != Py_None) {
        Py_ssize_t len;
        if (!PyUnicode_Check(arg)) {
            PyErr_Format(PyExc_TypeError,
                         "backend must be a str or None, not %.100s",
                         Py_TYPE(arg)->tp_name);
            return NULL;
        }
        name = PyUnicode_AsUTF8AndSize(arg, &len);
        if (name == NULL)
            return NULL;
        if ((size_t)len != strlen(name)) {
            PyErr_SetString(PyExc_ValueError,
                            "backend must not contain a NUL character");
            return NULL;
        }
    }
    else {
        name = getenv("EFD_BACKEND");
        origin = "EFD_BACKEND";
        if (name != NULL && (name[0] == '\0' || strcmp(name, "auto") == 0))
            name = NULL;
    }
    if (name == NULL)
        return probed_backend(st, semaphore);
    b = efd_backend_by_name(name);
    if (b == NULL) {
        PyErr_Format(PyExc_ValueError,
                     "%s must be 'eventfd', 'eventfd-readback', 'pipe', "
                     "'futex' or None, not '%s'", origin, name);
        return NULL;
    }
    if (b->open == NULL)                /* not built here */
        return (const efd_backend *)efd_err_unavailable(name, ENOSYS, 0);
    return b;
}
