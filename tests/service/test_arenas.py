"""The serve process caps glibc's malloc arenas, so that its request threads share two instead of
fragmenting one each (a slow climb of resident memory under writers), and keeps large blocks mapped
on their own whatever was freed before; a user's settings stand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.service.arenas import ARENAS

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")

# Sixteen threads each allocate with malloc (numpy arrays), then glibc describes its arenas.
SCRIPT = """
import ctypes, ctypes.util, sys, threading
import numpy as np
if sys.argv[1] == "capped":
    from neardup.service.app import create_app
    from neardup.service.context import Settings
    create_app(Settings("postgresql://nobody@127.0.0.1:1/none", "neardup", True, 1 << 20))
libc = ctypes.CDLL(ctypes.util.find_library("c"))
gate = threading.Barrier(16)
def work():
    gate.wait()
    kept = [np.ones(1000) for _ in range(100)]
    gate.wait()
threads = [threading.Thread(target=work) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
libc.fopen.restype = ctypes.c_void_p
out = libc.fopen(sys.argv[2].encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(out))
libc.fclose(ctypes.c_void_p(out))
"""


def _arenas(tmp_path: Path, how: str, env: dict[str, str]) -> int:
    report = tmp_path / f"{how}.xml"
    src = str(Path(__file__).resolve().parents[2] / "src")
    subprocess.run(
        [sys.executable, "-c", SCRIPT, how, str(report)],
        env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))},
        check=True,
        timeout=120,
    )
    return report.read_text().count("<heap nr=")


def test_the_service_caps_malloc_arenas_unless_the_user_set_them(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert _arenas(tmp_path, "plain", env) > ARENAS  # threads take arenas of their own
    assert _arenas(tmp_path, "capped", env) == ARENAS
    assert _arenas(tmp_path, "capped", {**env, "MALLOC_ARENA_MAX": "4"}) == 4


# A 4 MiB block is freed (glibc then raises its mmap threshold to 4 MiB), then four 2 MiB blocks are
# kept: prints the bytes of blocks mapped on their own, from glibc's mallinfo2.
MAPPED = """
import ctypes, ctypes.util, sys
import numpy as np
if sys.argv[1] == "fixed":
    from neardup.service.app import create_app
    from neardup.service.context import Settings
    create_app(Settings("postgresql://nobody@127.0.0.1:1/none", "neardup", True, 1 << 20))
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Info
big = np.ones(4 << 20, dtype=np.uint8)
del big
kept = [np.ones(2 << 20, dtype=np.uint8) for _ in range(4)]
print(libc.mallinfo2().hblkhd)
"""


def _mapped(how: str, env: dict[str, str]) -> int:
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run(
        [sys.executable, "-c", MAPPED, how],
        env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(done.stdout)


def test_large_blocks_stay_mapped_after_larger_ones_were_freed_unless_the_user_set_it() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    kept = 4 * (2 << 20)
    # By default the freed 4 MiB block raised the threshold: the 2 MiB blocks came from the heap,
    # where a freed one stays resident below any live block.
    assert _mapped("plain", env) < kept
    assert _mapped("fixed", env) >= kept  # the service maps them: freed, they leave
    assert _mapped("fixed", {**env, "MALLOC_MMAP_THRESHOLD_": str(64 << 20)}) < kept
