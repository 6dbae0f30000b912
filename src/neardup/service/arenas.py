"""The serve process's malloc, set for a long-running service: arenas capped, and large blocks
always mapped on their own.

glibc gives threads arenas of their own (up to eight a core), and a service whose requests run on
a pool of threads, each batch allocating and freeing its arrays, leaves freed pages fragmented and
resident in each arena it touched. Side by side under writers and readers (docs/benchmarks/load.md),
two arenas held less memory and climbed more slowly than the default; the ingest's own Python heap
stays flat either way.

Large blocks (a request's numpy arrays: signatures, keys, candidate pairs) are mapped on their own
above a threshold and unmapped when freed. But glibc raises that threshold to the size of each
mapped block freed, up to its own ceiling, so that after a few large requests blocks of up to that size come
from the arenas instead, and a freed one stays resident wherever a smaller live block sits above it:
resident memory then climbs with the largest requests seen so far (their sizes grow with the
collection). A fixed threshold keeps them mapped, and returned, whatever came before.

Settings the user gives (``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_`` in the environment) stand."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

ARENAS = 2
# Blocks from this size up are mapped on their own and unmapped when freed (glibc's starting value,
# which it would otherwise raise as large blocks are freed).
MMAP_THRESHOLD = 128 * 1024
_M_ARENA_MAX = -8  # mallopt's parameter numbers, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def _mallopt(parameter: int, value: int, unless: str) -> bool:
    """glibc's ``mallopt(parameter, value)``; whether it was done (not on another C library or
    platform, nor where the environment variable ``unless`` is set)."""
    if not sys.platform.startswith("linux") or unless in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    return bool(mallopt(parameter, value))


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas for the threads made from now on; whether it was done."""
    return _mallopt(_M_ARENA_MAX, arenas, "MALLOC_ARENA_MAX")


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Map every block of ``threshold`` bytes or more on its own, from now on, whatever sizes were
    freed before; whether it was done."""
    return _mallopt(_M_MMAP_THRESHOLD, threshold, "MALLOC_MMAP_THRESHOLD_")
