"""Compiling the kernels with numba, cached wherever this user can write.

Numba caches a compiled function beside its source (``__pycache__``), else under the user's cache
directory (``$XDG_CACHE_HOME``, ``~/.cache``), or in ``$NUMBA_CACHE_DIR`` when that is set; when it
can write none of them (an installed package run under a uid with no home, as ``docker run --user``
does, or with a NUMBA_CACHE_DIR made for another user) it refuses to compile a cached function at
all. Then the kernels cache in a private directory under the system's temporary directory, and,
failing that too, compile without a cache.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def private_cache_dir() -> Path | None:
    """``<tmp>/neardup-numba-<uid>``, made if missing; None unless it is a directory of this user that
    no one else can write (numba's cache files are pickles: loading another user's runs their code)."""
    path = Path(tempfile.gettempdir()) / f"neardup-numba-{os.geteuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None
    return path


def jit(function: Callable[..., Any], options: dict[str, Any]) -> Any:
    """``numba.njit(**options)(function)``; with ``cache=True`` and no cache location numba can write,
    cached in ``private_cache_dir()`` instead, else not cached."""
    from numba import njit
    from numba.core import config as numba_config

    config: Any = numba_config  # its settings are read from the environment, untyped

    try:
        return njit(**options)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        if not options.get("cache"):
            raise
    private = private_cache_dir()
    if private is not None and str(private) != config.CACHE_DIR:
        # Numba looks in CACHE_DIR first as it looks for a cache location, so this process's later
        # cached functions go there as well. A CACHE_DIR already set was unwritable: replaced too.
        config.CACHE_DIR = str(private)
        try:
            return njit(**options)(function)
        except RuntimeError:
            pass
    return njit(**{key: value for key, value in options.items() if key != "cache"})(function)
