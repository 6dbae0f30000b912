import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neardup.core import EMPTY, MinHasher, Params, Sketcher, band_keys, shingles

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
