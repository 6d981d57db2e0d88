"""Build script for efd's C extension.

All metadata lives in pyproject.toml; this file exists only because the
extension module (efd._efd, the C sources in src/) has to be declared in code.

Environment switches (read at build time):

EFD_NO_EVENTFD=1  build as if <sys/eventfd.h> did not exist (and without
                  memfd), so that only the POSIX `pipe` backend is compiled:
                  this proves the emulation builds and works without Linux.
EFD_DEBUG=1       -O0 -g3 -UNDEBUG, for gdb and valgrind.
EFD_SANITIZE=1    AddressSanitizer + UndefinedBehaviorSanitizer.
EFD_WERROR=1      -Wall -Wextra -Werror (CI builds with gcc and clang).
"""
import os
import sys

from setuptools import Extension, setup


def _flag(name):
    return os.environ.get(name, "") not in ("", "0")


sources = [
    "src/efd_module.c",
    "src/efd_util.c",
    "src/efd_object.c",
    "src/efd_registry.c",
    "src/efd_backend.c",
    "src/efd_wait.c",
    "src/efd_herd.c",
    "src/efd_eventfd.c",
    "src/efd_readback.c",
    "src/efd_shm.c",
    "src/efd_books.c",
    "src/efd_watch.c",
    "src/efd_pipe.c",
    "src/efd_futex.c",
    "src/efd_ring.c",
    "src/efd_loop.c",
    "src/efd_sync.c",
]
define_macros = []
extra_compile_args = ["-std=gnu11", "-fvisibility=hidden"]
extra_link_args = []

if _flag("EFD_NO_EVENTFD"):
    define_macros += [("EFD_NO_EVENTFD", "1"), ("EFD_NO_MEMFD", "1")]
if _flag("EFD_DEBUG"):
    extra_compile_args += ["-O0", "-g3", "-UNDEBUG"]
if _flag("EFD_SANITIZE"):
    san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
           "-fno-sanitize-recover=undefined"]
    extra_compile_args += san + ["-O1", "-g"]
    extra_link_args += san
if _flag("EFD_WERROR"):
    extra_compile_args += ["-Wall", "-Wextra", "-Werror",
                           "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        Extension(
            "efd._efd",
            sources=sources,
            depends=["src/efd.h", "src/efd_module.h"],
            define_macros=define_macros,
            extra_compile_args=extra_compile_args,
            extra_link_args=extra_link_args,
            # shm_open and the robust-mutex calls live in librt and
            # libpthread on older glibc; macOS and the BSDs have them in libc.
            libraries=["rt", "pthread"] if sys.platform.startswith("linux") else [],
        )
    ],
)
