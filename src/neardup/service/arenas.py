"""The serve process's malloc arenas, capped: glibc gives threads arenas of their own (up to eight
a core), and a service whose requests run on a pool of threads, each batch allocating and freeing
its arrays, leaves freed pages fragmented and resident in each arena it touched. Side by side under
writers and readers (docs/benchmarks/load.md), two arenas held less memory and climbed more slowly
than the default; the ingest's own Python heap stays flat either way. A setting the user gives
(``MALLOC_ARENA_MAX`` in the environment) stands."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas for the threads made from now on; whether it was done (not on
    another C library or platform, nor where ``MALLOC_ARENA_MAX`` is set)."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))
