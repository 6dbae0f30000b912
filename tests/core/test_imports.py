"""Importing neardup or its core is cheap: names load on first use, heavy dependencies where needed."""

import subprocess
import sys
from pathlib import Path

import pytest

import neardup
import neardup.core
from neardup.core.normalize import normalize

SOURCE = str(Path(neardup.__file__).parents[1])


def test_every_public_core_name_loads_from_its_module() -> None:
    assert set(neardup.core.__all__) == set(neardup.core._HOME_OF) | {"Normalization", "normalize"}
    assert neardup.core.normalize is normalize
    for name in neardup.core._HOME_OF:
        value = getattr(neardup.core, name)
        module = sys.modules[f"neardup.core.{neardup.core._HOME_OF[name]}"]
        assert value is getattr(module, name)
    assert set(neardup.core.__all__) <= set(dir(neardup.core))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = neardup.core.nothing


def imported_after(code: str) -> set[str]:
    """The top-level packages a fresh interpreter has imported after running ``code``."""
    script = f"import sys\n{code}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={"PYTHONPATH": SOURCE, "PATH": "/usr/bin:/bin"},
    )
    return set(done.stdout.split())


HEAVY = {"numba", "scipy", "sqlalchemy", "alembic", "psycopg"}


def test_import_neardup_and_its_core_load_nothing_heavy() -> None:
    assert not imported_after("import neardup") & (HEAVY | {"numpy"})
    assert not imported_after("import neardup.core") & HEAVY


def test_a_small_sketch_loads_numpy_only() -> None:
    code = (
        "from neardup.core import Params, Sketcher\n"
        "s = Sketcher(Params(bands=16, rows=8))\n"
        "s.band_keys(s.sketch(['one text', 'another text']).signatures)"
    )
    loaded = imported_after(code)
    assert "numpy" in loaded
    assert not loaded & HEAVY
