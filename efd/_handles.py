"""Handles: an efd object, whole, for a program started with exec, or for an
unrelated process over a Unix socket; and pickles that stay in one process
(other interpreters of it).

A handle is a short text::

    efd1:<class>:<backend>:<mode>:<bound>:<fds>

    efd1:Semaphore:futex:semaphore:-:5,6,7
    efd1:BoundedSemaphore:eventfd:semaphore:4:9
    efd1:EventFD:pipe:counter+nonblocking:-:3,4,5

``efd1`` is the format's version: a later format gets a new tag, and this
parser refuses any text it does not know, whole (no field is guessed, no
whitespace is stripped, numbers have no sign or leading zeros).  ``<fds>``
are the descriptor numbers in the sender's process, in the order the
backend lists them: one kernel eventfd, or (``pipe``, ``futex``) the shared
page, the readiness pipe's read end and its write end.  A handle names
descriptors; it does not carry them: the program that receives it must
have received the descriptors too, under the same numbers
(``pass_fds=h.fds``), or through :func:`send_handle`, which sends both.

The receiver trusts nothing: each descriptor must be open, not owned by a
live efd object of the process, and of the kind the handle says (a kernel
eventfd of the right mode; a regular file for the page, whose size and
magic number the C core checks, and the two ends of one pipe); otherwise
:func:`from_handle` raises :class:`ValueError` and adopts nothing.
"""
import array
import os
import re
import socket
import stat
import struct
import sys
import weakref
from typing import Any, Optional, Tuple

from . import _efd

__all__ = ["Handle", "from_handle", "send_handle", "recv_handle"]

VERSION = "efd1"
CLASSES = ("EventFD", "Semaphore", "BoundedSemaphore", "Event",
           "aio.Semaphore", "aio.BoundedSemaphore", "aio.Lock", "aio.Event")
#: What each class is in the count's terms: (semaphore mode?, bounded?).
_KINDS = {"EventFD": (None, False), "Semaphore": (True, False),
          "BoundedSemaphore": (True, True), "Event": (False, False),
          "aio.Semaphore": (True, False), "aio.BoundedSemaphore": (True, True),
          "aio.Lock": (True, True), "aio.Event": (False, False)}
BACKENDS = ("eventfd", "eventfd-readback", "pipe", "futex")
_NFDS = {"eventfd": 1, "eventfd-readback": 1, "pipe": 3, "futex": 3}
_NUMBER = r"(?:0|[1-9][0-9]{0,19})"
_FORMAT = re.compile(
    r"efd1:(%s):(%s):(semaphore|counter)(\+nonblocking)?:(-|%s):(%s(?:,%s){0,2})"
    % ("|".join(re.escape(c) for c in CLASSES),
       "|".join(re.escape(b) for b in BACKENDS),
       _NUMBER, _NUMBER, _NUMBER), re.ASCII)
_MAX = 2**64 - 2
#: The longest handle text there can be (recv_handle's buffer).
_MAX_TEXT = 160


class _Parsed:
    __slots__ = ("cls", "backend", "semaphore", "nonblocking", "bound", "fds",
                 "adopted")

    def __init__(self, cls: str, backend: str, semaphore: bool,
                 nonblocking: bool, bound: Optional[int],
                 fds: Tuple[int, ...]) -> None:
        self.cls = cls
        self.backend = backend
        self.semaphore = semaphore
        self.nonblocking = nonblocking
        self.bound = bound
        self.fds = fds
        self.adopted = False

    def text(self) -> str:
        return "%s:%s:%s:%s%s:%s:%s" % (
            VERSION, self.cls, self.backend,
            "semaphore" if self.semaphore else "counter",
            "+nonblocking" if self.nonblocking else "",
            "-" if self.bound is None else self.bound,
            ",".join(str(fd) for fd in self.fds))


def _parse(text: Any) -> _Parsed:
    if not isinstance(text, str):
        raise TypeError("a handle is a str, not %s" % type(text).__name__)
    m = _FORMAT.fullmatch(text)
    if m is None:
        if not text.startswith(VERSION + ":"):
            raise ValueError("not an efd handle (or one of a format this efd "
                             "does not know; it reads %r): %.80r"
                             % (VERSION, text))
        raise ValueError("malformed efd handle: %.80r" % (text,))
    cls, backend, mode, nb, bound, fds_text = m.groups()
    fds = tuple(int(f) for f in fds_text.split(","))
    semaphore = mode == "semaphore"
    if len(fds) != _NFDS[backend]:
        raise ValueError("malformed efd handle: the %r backend has %d "
                         "descriptor(s), not %d: %.80r"
                         % (backend, _NFDS[backend], len(fds), text))
    if len(set(fds)) != len(fds) or max(fds) > 2**31 - 1:
        raise ValueError("malformed efd handle: bad descriptor numbers: %.80r"
                         % (text,))
    want_sem, bounded = _KINDS[cls]
    if want_sem is not None and want_sem != semaphore:
        raise ValueError("malformed efd handle: an %s is never in %s mode: "
                         "%.80r" % (cls, mode, text))
    if cls != "EventFD" and nb:
        raise ValueError("malformed efd handle: only an EventFD is "
                         "non-blocking: %.80r" % (text,))
    if (bound == "-") == bounded:
        raise ValueError("malformed efd handle: a bound is for a bounded "
                         "semaphore or a lock (and they need one): %.80r"
                         % (text,))
    value = None if bound == "-" else int(bound)
    if value is not None and value > _MAX:
        raise ValueError("malformed efd handle: bound past 2**64 - 2: %.80r"
                         % (text,))
    return _Parsed(cls, backend, semaphore, bool(nb), value, fds)


class Handle(str):
    """A text that names an efd object -- class, backend, mode, bound and
    descriptor numbers -- for :func:`efd.from_handle` in another program.

    It is a :class:`str`, so it fits in an environment variable or an
    argument; :attr:`fds` lists the descriptors to pass with it
    (``subprocess.Popen(..., pass_fds=h.fds, env={..., "JOBS": h})``).
    ``Handle(text)`` checks the text, as :func:`efd.from_handle` does.
    """

    __slots__ = ()
    __module__ = "efd"

    def __new__(cls, text: str) -> "Handle":
        _parse(text)
        return str.__new__(cls, text)

    @property
    def fds(self) -> Tuple[int, ...]:
        """The descriptor numbers the handle names, in its order."""
        return _parse(str(self)).fds


def _class_name(obj: Any) -> str:
    from . import BoundedSemaphore, Event, EventFD, Semaphore, aio
    for cls in (aio.Lock, aio.BoundedSemaphore, aio.Semaphore, aio.Event):
        if isinstance(obj, cls):
            return "aio." + cls.__name__
    for cls in (BoundedSemaphore, Semaphore, Event, EventFD):
        if isinstance(obj, cls):
            return cls.__name__
    raise TypeError("not an efd object: %s" % type(obj).__name__)


def _event_fd(obj: Any) -> Any:
    from . import EventFD
    return obj if isinstance(obj, EventFD) else obj._ev


def _describe(obj: Any) -> _Parsed:
    cls = _class_name(obj)
    ev = _event_fd(obj)
    if cls != "EventFD" and ev.closed:     # the closed error names the class
        raise ValueError("I/O operation on closed %s" % type(obj).__name__)
    fds = ev._fds()                # ValueError if closed
    core = obj._core if cls.startswith("aio.") else obj
    return _Parsed(cls, ev.backend, ev.semaphore,
                   cls == "EventFD" and ev.nonblocking,
                   core._bound if _KINDS[cls][1] else None, fds)


def handle(obj: Any) -> Handle:
    """The handle of an open efd object (see :meth:`efd.EventFD.handle`)."""
    return Handle(_describe(obj).text())


# ---- checking what a peer handed over ---------------------------------------

def _link(fd: int) -> str:
    try:
        return os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        return ""


def _fdinfo_semaphore(fd: int) -> Optional[bool]:
    try:
        with open("/proc/self/fdinfo/%d" % fd) as f:
            for line in f:
                if line.startswith("eventfd-semaphore:"):
                    return line.split(":", 1)[1].strip() != "0"
    except OSError:
        pass
    return None


def _check(p: _Parsed) -> None:
    # Every descriptor open, nobody's here, and of the kind the handle says.
    modes = []
    for fd in p.fds:
        try:
            modes.append(os.fstat(fd).st_mode)
        except OSError:
            raise ValueError(
                "descriptor %d named by the handle is not open in this "
                "process (pass the handle's fds along with it: "
                "pass_fds=h.fds, or efd.send_handle)" % fd) from None
    for fd in p.fds:
        if _efd._owned(fd):
            raise ValueError(
                "descriptor %d named by the handle is owned by a live efd "
                "object of this process (descriptors are owned once)" % fd)
    if p.backend in ("eventfd", "eventfd-readback"):
        fd = p.fds[0]
        if _link(fd) != "anon_inode:[eventfd]":
            raise ValueError("descriptor %d is not an eventfd, as the handle "
                             "(backend %r) says" % (fd, p.backend))
        kernel_sem = _fdinfo_semaphore(fd)
        want = p.semaphore and p.backend == "eventfd"
        if kernel_sem is not None and kernel_sem != want:
            raise ValueError("eventfd %d is %s in the kernel, not what the "
                             "handle (%s, %s) says" % (
                                 fd, "semaphore-mode" if kernel_sem
                                 else "counter-mode", p.backend,
                                 "semaphore" if p.semaphore else "counter"))
        return
    page, rfd, wfd = p.fds
    if not stat.S_ISREG(modes[0]):
        raise ValueError("descriptor %d is not a shared page, as the handle "
                         "says" % page)
    if not (stat.S_ISFIFO(modes[1]) and stat.S_ISFIFO(modes[2])):
        raise ValueError("descriptors %d and %d are not a pipe, as the handle "
                         "says" % (rfd, wfd))
    import fcntl
    accmode = getattr(os, "O_ACCMODE", 3)
    r_acc = fcntl.fcntl(rfd, fcntl.F_GETFL) & accmode
    w_acc = fcntl.fcntl(wfd, fcntl.F_GETFL) & accmode
    if (r_acc != os.O_RDONLY or w_acc != os.O_WRONLY
            or os.fstat(rfd).st_ino != os.fstat(wfd).st_ino):
        raise ValueError("descriptors %d and %d are not the read and write "
                         "ends of one pipe, as the handle says" % (rfd, wfd))


def _adopt(p: _Parsed) -> Any:
    # The descriptors are the caller's until this returns an object.
    import errno
    from . import BoundedSemaphore, Event, EventFD, Semaphore, _sync
    _check(p)
    try:
        ev = EventFD._from_fds(p.fds, p.backend, p.semaphore, p.nonblocking)
    except OSError as e:
        if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
            raise
        raise ValueError("the descriptors are not what the handle says "
                         "(%s): %s" % (p.backend, e)) from None
    p.adopted = True               # the object owns the descriptors now
    if p.cls == "EventFD":
        return ev
    from . import aio
    name = p.cls[4:] if p.cls.startswith("aio.") else p.cls
    core_cls = {"Semaphore": Semaphore, "BoundedSemaphore": BoundedSemaphore,
                "Lock": BoundedSemaphore, "Event": Event}[name]
    try:
        if p.bound is not None:
            core = _sync._rebuild(core_cls, ev, p.bound)
        else:
            core = _sync._rebuild(core_cls, ev)
        if not p.cls.startswith("aio."):
            return core
        return aio._rebuild(getattr(aio, name), core)
    except BaseException:
        ev.close()
        raise


def from_handle(text: str) -> Any:
    """Rebuild the efd object that :meth:`~efd.EventFD.handle` described.

    The descriptors the handle names must have been passed to this process
    under the same numbers (``pass_fds=h.fds``); the new object owns them.
    It is the same class (:class:`~efd.EventFD`, :class:`~efd.Semaphore`,
    :class:`~efd.BoundedSemaphore` or :class:`~efd.Event`), backend, mode
    and bound as the original, over the same count.

    Args:
        text: The handle (an :class:`efd.Handle`, or the plain text, as
            read from an environment variable).

    Returns:
        The object.

    Raises:
        ValueError: The text is not a handle this efd reads; a descriptor it
            names is not open, is owned by a live efd object of this
            process, or is not what the handle says.  Nothing is adopted.
        TypeError: ``text`` is not a str.
    """
    return _adopt(_parse(text))


# ---- Unix sockets ------------------------------------------------------------

_HEADER = struct.Struct("!I")


def send_handle(sock: socket.socket, obj: Any) -> None:
    """Send an efd object, whole, over a Unix socket (SCM_RIGHTS).

    The peer -- any process, related or not -- receives it with
    :func:`recv_handle`.  This process keeps its own object; both then share
    the count.  One call sends one message (its length first, then the
    handle, with the descriptors attached), so it works on stream, datagram
    and seqpacket sockets, between other traffic.

    Raises:
        ValueError: ``obj`` is closed.
        TypeError: ``obj`` is not an efd object.
        OSError: The socket refused the message.
    """
    p = _describe(obj)
    data = _HEADER.pack(len(p.text())) + p.text().encode("ascii")
    # sendmsg/recvmsg on every Python (socket.send_fds is 3.9+ and could
    # not ask for MSG_CMSG_CLOEXEC on the receiving side).
    sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                  array.array("i", p.fds))])
    if sent < len(data):           # a stream socket took part: the rest
        sock.sendall(data[sent:])  # (the descriptors went with the first)


def _take_fds(ancdata: Any, into: list) -> None:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            n = len(data) // 4
            into.extend(array.array("i", data[:n * 4]))


def recv_handle(sock: socket.socket) -> Any:
    """Receive an efd object that :func:`send_handle` sent.

    The descriptors arrive close-on-exec and are checked before use, as
    :func:`from_handle` checks them; whatever goes wrong, none is left open.

    Returns:
        The object (same class, backend, mode and bound as the sender's).

    Raises:
        ValueError: The message is not an efd handle, or its descriptors are
            not what it says.
        EOFError: The peer closed the connection.
    """
    fds: list = []
    p = None
    flags = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
    space = socket.CMSG_SPACE(4 * 4)
    try:
        stream = sock.type == socket.SOCK_STREAM
        first = _HEADER.size if stream else _HEADER.size + _MAX_TEXT
        data, anc, mflags, _ = sock.recvmsg(first, space, flags)
        _take_fds(anc, fds)
        if not data:
            raise EOFError("the peer closed the socket before sending a handle")
        if mflags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
            raise ValueError("not an efd handle: the message was truncated")
        if stream:
            while len(data) < _HEADER.size:
                more = sock.recv(_HEADER.size - len(data))
                if not more:
                    raise EOFError("the peer closed the socket mid-handle")
                data += more
        (size,) = _HEADER.unpack(data[:_HEADER.size])
        if size > _MAX_TEXT:
            raise ValueError("not an efd handle: %d bytes long" % size)
        body = data[_HEADER.size:]
        if stream:
            while len(body) < size:
                more = sock.recv(size - len(body))
                if not more:
                    raise EOFError("the peer closed the socket mid-handle")
                body += more
        if len(body) != size:
            raise ValueError("not an efd handle: wrong length")
        try:
            text = body.decode("ascii")
        except UnicodeDecodeError:
            raise ValueError("not an efd handle: not ASCII") from None
        p = _parse(text)
        if len(fds) != len(p.fds):
            raise ValueError("the handle names %d descriptor(s) but %d came "
                             "with it" % (len(p.fds), len(fds)))
        p.fds = tuple(fds)
        obj = _adopt(p)
    except BaseException:
        for fd in ([] if p is not None and p.adopted else fds):
            try:
                os.close(fd)
            except OSError:
                pass
        raise
    return obj


# ---- pickles that stay in this process -------------------------------------

def reduce_local(obj: Any, cls: Any, state: Tuple[Any, ...]) -> Tuple[Any, ...]:
    # A pickle for this process only (another interpreter, a queue's get):
    # no descriptor, just who made it and which live object it names.
    nonce, token = _event_fd(obj)._token()
    return (_load_local, (os.getpid(), nonce, token, cls) + state)


def _load_local(pid: int, nonce: int, token: int, cls: Any, *state: Any) -> Any:
    from . import EventFD, _sync
    if pid != os.getpid():
        raise RuntimeError(
            "%s objects should only be shared between processes through "
            "inheritance (this pickle was made in another process; use "
            "multiprocessing's process arguments, handle() or send_handle())"
            % getattr(cls, "__name__", "efd"))
    try:
        ev = EventFD._from_token(nonce, token)
    except RuntimeError:
        raise RuntimeError(
            "%s objects should only be shared between processes through "
            "inheritance (this pickle was made in another process)"
            % getattr(cls, "__name__", "efd")) from None
    if isinstance(cls, type) and issubclass(cls, EventFD):
        return ev
    try:
        return _sync._rebuild(cls, ev, *state)
    except BaseException:
        ev.close()
        raise


# ---- objects a spawned child was given --------------------------------------

def _close_if_alive(ref: "weakref.ref[Any]") -> None:
    obj = ref()
    if obj is not None:
        obj.close()


def close_at_exit(ev: Any) -> None:
    # A multiprocessing child (spawn, forkserver) closes what it was given
    # when its process ends, before the interpreter's teardown would find
    # it open and warn (ResourceWarning), as multiprocessing's own objects
    # are cleaned up by its finalizers.  Weak: an object the child drops is
    # closed by the garbage collector as usual.
    if sys.version_info < (3, 10):
        # There a spawn child unpickles its arguments before the process
        # bootstrap, which clears multiprocessing's finalizer registry:
        # close at interpreter exit instead (atexit runs before teardown).
        import atexit
        atexit.register(_close_if_alive, weakref.ref(ev))
        return
    from multiprocessing import util
    util.Finalize(ev, _close_if_alive, args=(weakref.ref(ev),),
                  exitpriority=0)


if sys.version_info < (3, 8):  # pragma: no cover
    raise ImportError("efd needs Python 3.8 or later")
