import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.core import EMPTY, MinHasher, Params, Sketcher, band_keys, shingles
from neardup.core import sketch as sketch_module
from neardup.core.ragged import concat
from neardup.errors import InternalError

texts = st.text(alphabet=st.sampled_from("abc de\n✓É"), max_size=40)


@given(st.lists(texts, max_size=6), st.sampled_from(["oph", "classic"]), st.sampled_from(["char", "word"]))
def test_text_pipeline_equals_the_parts(batch: list[str], scheme: str, kind: str) -> None:
    params = Params(bands=8, rows=4, num_perm=32, scheme=scheme, shingle=kind, k=3)  # type: ignore[arg-type]
    sketcher = Sketcher(params)
    sigs = sketcher.signatures(batch)
    mh = MinHasher(32, params.seed, params.scheme)
    assert sigs.shape == (len(batch), 32)
    for i, text in enumerate(batch):
        assert sigs[i].tolist() == mh.signature(shingles(text, params.shingle, 3)).tolist()
    assert np.array_equal(sketcher.band_keys(sigs), band_keys(sigs, 8, 4))


def test_near_copies_agree_more_than_strangers() -> None:
    sketcher = Sketcher(Params.for_threshold(0.8))
    base = "Debian package of a library for parsing and writing configuration files. " * 3
    sigs = sketcher.signatures(
        [base, base.replace("parsing", "reading"), "Completely unrelated text about birds.", ""]
    )
    near = (sigs[0] == sigs[1]).mean()
    far = (sigs[0] == sigs[2]).mean()
    assert near > 0.7
    assert far < 0.1
    assert (sigs[3] == EMPTY).all()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=25), st.integers(2, 4))
def test_threads_give_the_same_sketch_and_signatures(texts: list[str], threads: int) -> None:
    """Chunks of three texts here (2,000 in use), so that small batches split over threads too."""
    sketcher = Sketcher(Params(bands=4, rows=2, num_perm=8))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sketch_module, "_CHUNK_TEXTS", 3)
        parallel, one = sketcher.sketch(texts, threads=threads), sketcher.sketch(texts)
        signatures = sketcher.signatures(texts, threads=threads)
    assert (parallel.signatures == one.signatures).all()
    assert (signatures == one.signatures).all()
    assert parallel.content_hashes == one.content_hashes
    assert len(one.shingles) == 1
    assert len(parallel.shingles) == max(1, -(-len(texts) // 3))  # one part a chunk, none copied
    joined = concat(*parallel.shingles)
    assert joined.offsets.tolist() == one.shingles[0].offsets.tolist()
    assert joined.values.tolist() == one.shingles[0].values.tolist()
    assert parallel.shingle_counts.tolist() == one.shingle_counts.tolist()
    # Every row, and the rows backwards: the parts' distinct sets are the single batch's.
    for rows in (np.arange(len(texts)), np.arange(len(texts))[::-1]):
        got, want = parallel.distinct_shingles(rows), one.distinct_shingles(rows)
        assert got.offsets.tolist() == want.offsets.tolist()
        assert got.values.tolist() == want.values.tolist()


@settings(max_examples=20, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=12), st.integers(1, 3))
def test_a_sketch_without_hashes_is_the_same_sketch_and_refuses_to_give_them(
    texts: list[str], threads: int
) -> None:
    sketcher = Sketcher(Params(bands=4, rows=2, num_perm=8))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sketch_module, "_CHUNK_TEXTS", 3)
        bare, full = sketcher.sketch(texts, threads, hashed=False), sketcher.sketch(texts, threads)
    assert (bare.signatures == full.signatures).all()
    assert [p.values.tolist() for p in bare.shingles] == [p.values.tolist() for p in full.shingles]
    assert [p.offsets.tolist() for p in bare.shingles] == [p.offsets.tolist() for p in full.shingles]
    assert len(full.content_hashes) == len(texts)
    with pytest.raises(InternalError, match="without content hashes"):
        _ = bare.content_hashes
