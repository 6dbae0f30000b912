"""The kernels run as numpy or interpreted (small inputs, until they have cost what loading would) and
compiled, with the same bits, golden values included; a cold small batch imports no numba."""

import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neardup
from neardup.core import _kernels
from neardup.core.params import Params
from neardup.core.ragged import Ragged
from neardup.core.shingle import distinct_rows
from neardup.core.sketch import Sketcher

from . import test_lsh, test_minhash, test_shingle

MODES = ("compiled", "interpreted", "numpy")


@contextlib.contextmanager
def forced(mode: str) -> Iterator[None]:
    """Every kernel runs compiled, or every one interpreted, or each as numpy where it has a numpy
    version (else interpreted), whatever its input's size."""

    def compiled(self: Any, *args: Any) -> Any:
        return self.compiled(*args)

    def interpreted(self: Any, *args: Any) -> Any:
        return _kernels.interpreted(self.name)(*args)

    def vectorised(self: Any, *args: Any) -> Any:
        return (self.vectorised or _kernels.interpreted(self.name))(*args)

    runs = {"compiled": compiled, "interpreted": interpreted, "numpy": vectorised}
    with mock.patch.object(_kernels._Kernel, "__call__", runs[mode]):
        yield


GOLDEN: dict[str, Callable[[], None]] = {
    "minhash oph": lambda: test_minhash.test_golden_signatures_in_this_and_a_fresh_process("oph"),
    "minhash classic": lambda: test_minhash.test_golden_signatures_in_this_and_a_fresh_process("classic"),
    "shingles": test_shingle.test_golden_hashes_never_change,
    "band keys": test_lsh.test_golden_keys_never_change,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("golden", GOLDEN)
def test_golden_values_hold_compiled_and_interpreted(golden: str, mode: str) -> None:
    with forced(mode):
        GOLDEN[golden]()


texts = st.lists(
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=120)
    | st.text(" \t\nab\u00e9\u4e2d\U0001f600", max_size=90),
    max_size=6,
)


def everything(batch: list[str], params: Params) -> list[Any]:
    """Every kernel's output on a batch: sketch, distinct sets, band keys, candidate pairs, similarities."""
    sketcher = Sketcher(params)
    sketch = sketcher.sketch(batch)
    rows = np.arange(len(batch), dtype=np.int64)
    sets = sketch.distinct_shingles(rows)
    (raw,) = sketch.shingles  # one part: a batch this small is sketched on one thread
    keys = sketcher.band_keys(sketch.signatures)
    left, right = np.triu_indices(len(batch), 1)
    left, right = left.astype(np.int64), right.astype(np.int64)
    members = np.argsort(keys[:, 0], kind="stable").astype(np.int64)
    groups = np.array([0, len(batch)], dtype=np.int64)
    return [
        *(a for part in sketch.shingles for a in (part.values, part.offsets)),
        sketch.signatures,
        sets.values,
        sets.offsets,
        keys,
        _kernels.pair_jaccard(sets.values, sets.offsets, sets.values, sets.offsets, left, right),
        _kernels.pair_jaccard_unsorted(raw.values, raw.offsets, raw.values, raw.offsets, left, right),
        _kernels.pair_agreement(sketch.signatures, left, right),
        _kernels.group_pairs(np.sort(members), groups, len(batch) // 2),
        _kernels.positional_pairs(
            np.sort(members), members % 3, sets.lengths(), groups, len(batch) // 2, 0.8 / 1.8
        ),
        _kernels.lists_meet(np.sort(members), np.r_[0, len(batch) // 2, len(batch)], left % 2, right % 2),
        # Bucket keys as held in memory: ranges of some in all of them, and a merge of two runs.
        *_kernels.sorted_ranges(np.sort(keys.reshape(-1)), np.sort(keys[:, 0])),
        *_kernels.merge_runs(
            np.sort(keys[:, 1:].reshape(-1)),
            np.zeros(keys[:, 1:].size, np.int16),
            np.arange(keys[:, 1:].size, dtype=np.int64),
            np.sort(keys[:, 0]),
            np.ones(keys.shape[0], np.int16),
            np.arange(keys.shape[0], dtype=np.int64),
        ),
    ]


@given(
    batch=texts,
    scheme=st.sampled_from(["oph", "classic"]),
    kind=st.sampled_from(["char", "word"]),
    k=st.integers(1, 7),
    seed=st.integers(0, 2**63 - 1),
)
def test_interpreted_and_numpy_kernels_give_the_compiled_bits(
    batch: list[str], scheme: str, kind: str, k: int, seed: int
) -> None:
    params = Params(bands=4, rows=8, num_perm=32, scheme=scheme, seed=seed, shingle=kind, k=k)  # type: ignore[arg-type]
    results = {}
    for mode in MODES:
        with forced(mode):
            results[mode] = everything(batch, params)
    for other in ("interpreted", "numpy"):
        for compiled, result in zip(results["compiled"], results[other], strict=True):
            assert compiled.dtype == result.dtype
            assert compiled.shape == result.shape
            np.testing.assert_array_equal(compiled, result)


def test_long_documents_sort_alike_both_ways() -> None:
    """Rows on each side of the sort's cut-over (insertion below 64 values, radix above), long ones
    too, sort and dedupe as numpy's sort does in the interpreted kernels."""
    rng = np.random.default_rng(7)
    lengths = np.array([0, 1, 63, 64, 65, 700, 5_119, 5_120, 9_000], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = rng.integers(0, 2**32, size=int(offsets[-1]), dtype=np.uint32)
    values[::3] = values[1::3][: values[::3].size]  # repeats to drop
    outputs = []
    for mode in MODES:
        with forced(mode):
            outputs.append(Ragged(*_kernels.unique_sorted(values, offsets)))
            outputs.append(distinct_rows(Ragged(values, offsets), np.array([5, 0, 3, 5, 8, 6, 7])))
    for compiled, other in (
        (outputs[0], outputs[2]),
        (outputs[1], outputs[3]),
        (outputs[0], outputs[4]),
        (outputs[1], outputs[5]),
    ):
        np.testing.assert_array_equal(compiled.values, other.values)
        np.testing.assert_array_equal(compiled.offsets, other.offsets)


# The neardup under test, also for the subprocesses (an installed one may be another checkout).
SOURCE = str(Path(neardup.__file__).parents[1])

COLD = """
import json
import sys
import numpy as np
import neardup
from neardup.core import _kernels
from neardup.core.params import Params
from neardup.core.sketch import Sketcher

kernels = {n: k for n, k in vars(_kernels).items() if isinstance(k, _kernels._Kernel)}
def compiled():
    return sorted(n for n, k in kernels.items() if k.loaded)
sketcher = Sketcher(Params(bands=16, rows=8))
texts = ["Storms cut power to 40,000 homes.", "Storms cut power to 40,000 homes!", "Rates held."]
small = sketcher.sketch(texts)
sketcher.band_keys(small.signatures)
report = {"small": compiled(), "numba": "numba" in sys.modules}
while not kernels["band_keys"].loaded:  # many small calls: it compiles once past its budget
    sketcher.band_keys(small.signatures)
report["budget"] = compiled()
sketcher.sketch(["a long text " * 50_000])  # its shingling alone costs more than loading
report["large"] = compiled()
for _ in range(20):  # each long batch spends budget until every kernel it uses loads
    sketcher.band_keys(sketcher.sketch(["a long text " * 50_000]).signatures)
report["all"] = compiled()
print(json.dumps(report))
"""


def test_a_cold_small_batch_compiles_nothing_and_large_work_compiles() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = {"NUMBA_CACHE_DIR": cache, "PATH": "/usr/bin:/bin", "PYTHONPATH": SOURCE}
        done = subprocess.run(
            [sys.executable, "-c", COLD], capture_output=True, text=True, env=env, check=False, timeout=300
        )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["small"] == []
    assert not report["numba"]
    assert report["budget"] == ["band_keys"]
    assert set(report["large"]) == {"band_keys", "char_shingle_hashes"}
    assert set(report["all"]) == {"band_keys", "char_shingle_hashes", "collapse_whitespace", "minhash_oph"}


long_texts = st.lists(
    st.text(st.characters(codec="utf-8"), max_size=2_000)
    | st.builds(lambda word, times: (word + " ") * times, st.text(max_size=9), st.integers(0, 400)),
    max_size=3,
)


@settings(max_examples=40, deadline=None)
@given(
    batch=long_texts,
    scheme=st.sampled_from(["oph", "classic"]),
    kind=st.sampled_from(["char", "word"]),
    k=st.integers(1, 9),
)
def test_numpy_sketches_of_long_texts_are_the_compiled_ones(
    batch: list[str], scheme: str, kind: str, k: int
) -> None:
    """Signatures and band keys of the default length, on texts long and short, surrogates included."""
    params = Params(bands=16, rows=8, scheme=scheme, shingle=kind, k=k)  # type: ignore[arg-type]
    results = {}
    for mode in ("compiled", "numpy"):
        with forced(mode):
            sketcher = Sketcher(params)
            sketch = sketcher.sketch(batch)
            (raw,) = sketch.shingles
            results[mode] = [
                raw.values,
                raw.offsets,
                sketch.signatures,
                sketcher.band_keys(sketch.signatures),
            ]
    for compiled, result in zip(results["compiled"], results["numpy"], strict=True):
        assert compiled.dtype == result.dtype
        np.testing.assert_array_equal(compiled, result)
