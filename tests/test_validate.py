"""The argument checks every face shares: one rule and one message per kind of value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from neardup import validate
from neardup.errors import InputError, ParamsError


@pytest.mark.parametrize("check", [validate.positive_int, validate.non_negative_int, validate.cluster_id])
def test_a_bool_is_never_a_number(check: object) -> None:
    for flag in (True, False):
        with pytest.raises(ParamsError, match=r"got (True|False)$"):
            check(flag, "n")  # type: ignore[operator]
    with pytest.raises(ParamsError, match=r"^n must be in \[0, 1\], got True$"):
        validate.fraction(True, "n")


def test_counts() -> None:
    assert validate.positive_int(np.int64(3), "jobs") == 3
    assert type(validate.positive_int(np.int64(3), "j")) is int
    with pytest.raises(ParamsError, match=r"^jobs must be a positive integer, got 0$"):
        validate.jobs(0)
    with pytest.raises(ParamsError, match=r"^batch_size must be a positive integer, got 2\.0$"):
        validate.batch_size(2.0)
    assert validate.batch_size(None, whole=True) is None
    with pytest.raises(ParamsError, match="batch_size must be a positive integer, got None"):
        validate.batch_size(None)
    assert validate.limit(None) is None
    assert validate.limit(0) == 0
    with pytest.raises(ParamsError, match=r"^limit must be a non-negative integer, got -1$"):
        validate.limit(-1)
    assert validate.cluster_id(2**63 - 1) == 2**63 - 1
    with pytest.raises(ParamsError, match=r"cluster must be a cluster id"):
        validate.cluster_id(2**63, "cluster")


def test_fractions() -> None:
    assert validate.fraction(0, "min_jaccard") == 0.0
    assert validate.fraction(np.float32(0.5), "x") == 0.5
    with pytest.raises(ParamsError, match=r"^min_containment must be in \(0, 1\], got 0$"):
        validate.fraction(0, "min_containment", zero=False)
    for outside in (math.nan, -0.1, 1.5, "0.5", None):
        with pytest.raises(ParamsError, match=r"^x must be in \[0, 1\]"):
            validate.fraction(outside, "x")


def test_flags_and_texts() -> None:
    assert validate.flag(False, "store_text") is False
    with pytest.raises(ParamsError, match=r"^store_text must be True or False, got 1$"):
        validate.flag(1, "store_text")
    assert validate.text("words") == "words"
    with pytest.raises(InputError, match=r"^query text must be a string, got bytes$"):
        validate.text(b"words")
