"""The kernels compile (and cache) for any user, even one who can write neither the package's
directory nor a home: as ``docker run --user`` runs an installed neardup under an unknown uid."""

import json
import os
import pwd
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import neardup
from neardup.core import _numba_cache

SOURCE = str(Path(neardup.__file__).parents[1])
# What an interpreter outside the usual places may need to start.
PASSED_ON = {key: os.environ[key] for key in ("LD_LIBRARY_PATH",) if key in os.environ}

# Loads every kernel a sketch uses, as a long batch does, and reports where numba cached them.
LOAD = """
import json
from neardup.core import _kernels
from neardup.core.params import Params
from neardup.core.sketch import Sketcher

sketcher = Sketcher(Params(bands=16, rows=8))
for name in ("collapse_whitespace", "char_shingle_hashes", "minhash_oph", "band_keys"):
    getattr(_kernels, name).spent = _kernels.INTERPRET_BUDGET  # no budget left: load now
signatures = sketcher.sketch(["Storms cut power to 40,000 homes.", "Rates held."]).signatures
sketcher.band_keys(signatures)
kernel = _kernels.char_shingle_hashes.compiled
cache = kernel._cache  # numba's: a NullCache when the function is not cached
print(json.dumps({
    "signature": signatures[0, :4].tolist(),
    "cached_in": getattr(cache, "_cache_path", None),
    "hits": sum(kernel.stats.cache_hits.values()),
}))
"""


def run_load(env: dict[str, str], user: int | None = None) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", LOAD],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd="/",
        env={**PASSED_ON, "PATH": "/usr/bin:/bin", "PYTHONPATH": SOURCE, **env},
        user=user,
        group=None if user is None else pwd.getpwuid(user).pw_gid,
        extra_groups=None if user is None else [],
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_no_writable_package_home_or_cache_dir_caches_in_a_private_temporary_dir(tmp_path: Path) -> None:
    """Numba's own locations, all unwritable: the package's directory is left out of numba's search
    (as a read-only site-packages would be), and HOME and NUMBA_CACHE_DIR lie under a file."""
    caching = pytest.importorskip("numba.core.caching")
    if not hasattr(caching, "UserProvidedCacheLocator"):
        pytest.skip("this numba cannot be told which cache locations to try (NUMBA_CACHE_LOCATOR_CLASSES)")
    env = {
        "NUMBA_CACHE_LOCATOR_CLASSES": "UserProvidedCacheLocator,UserWideCacheLocator",
        "HOME": "/dev/null/home",
        "NUMBA_CACHE_DIR": "/dev/null/numba",
        "TMPDIR": str(tmp_path),
    }
    first = run_load(env)
    private = tmp_path / f"neardup-numba-{os.geteuid()}"
    assert first["cached_in"] is not None
    assert Path(str(first["cached_in"])).is_relative_to(private)
    assert oct(private.stat().st_mode & 0o777) == oct(0o700)
    again = run_load(env)
    assert again["signature"] == first["signature"]
    assert again["hits"] == 1  # loaded from the private cache, not compiled again


def test_a_private_dir_someone_else_could_write_is_not_used(tmp_path: Path) -> None:
    private = tmp_path / f"neardup-numba-{os.geteuid()}"
    private.mkdir(mode=0o700)
    private.chmod(0o777)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(tmp_path))
        assert _numba_cache.private_cache_dir() is None
        private.chmod(0o700)
        assert _numba_cache.private_cache_dir() == private


def _unprivileged() -> int | None:
    """The uid of 'nobody' when this process may run the interpreter and neardup as it."""
    if os.geteuid() != 0:
        return None
    try:
        nobody = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return None
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import numba, neardup.core"],
            capture_output=True,
            check=False,
            cwd="/",
            env={**PASSED_ON, "PATH": "/usr/bin:/bin", "PYTHONPATH": SOURCE},
            user=nobody,
        )
    except OSError:  # cannot even start the interpreter as 'nobody'
        return None
    return nobody if probe.returncode == 0 else None


def test_an_unprivileged_user_without_a_home_loads_the_kernels() -> None:
    """For real: as 'nobody' (whose home does not exist), with the package not writable to it."""
    nobody = _unprivileged()
    if nobody is None:
        pytest.skip(
            "needs to run as root with an interpreter and neardup that 'nobody' may read "
            "(this one may lie under a 0700 home)"
        )
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:  # pytest's own lies under a 0700 directory
        Path(tmp).chmod(0o1777)
        result = run_load({"HOME": "/nonexistent", "TMPDIR": tmp}, user=nobody)
        assert str(result["cached_in"]).startswith(f"{tmp}/neardup-numba-{nobody}/")
