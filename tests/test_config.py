"""IndexConfig: the recall target chooses bands and rows, and moving it only re-bands."""

from __future__ import annotations

import dataclasses

import pytest

from neardup.config import IndexConfig
from neardup.core import optimal_params
from neardup.errors import ParamsError


def test_a_new_config_reaches_the_default_target_at_every_threshold() -> None:
    for t in (0.5, 0.6, 0.7, 0.8, 0.9):
        config = IndexConfig.new(t)
        assert config.params.recall_at_threshold == 0.99
        assert config.banding().threshold_bin_recall >= 0.99


def test_changing_the_target_re_tunes_and_only_re_bands() -> None:
    config = IndexConfig.new(0.8)
    stricter = config.changed(recall_at_threshold=0.999)
    expected = optimal_params(0.8, 128, 0.2, 0.8, recall_at_threshold=0.999)
    assert (stricter.params.bands, stricter.params.rows) == (expected.bands, expected.rows)
    assert stricter.params.recall_at_threshold == 0.999
    assert stricter.banding().threshold_bin_recall >= 0.999
    assert config.rebands_only(stricter)
    assert stricter == IndexConfig.new(0.8, recall_at_threshold=0.999)  # the state of a fresh one
    assert not config.rebands_only(config.changed(num_perm=256))


def test_a_collection_stored_without_a_target_keeps_the_old_rule_when_re_tuned() -> None:
    legacy = dataclasses.replace(
        IndexConfig.new(0.8),
        params=dataclasses.replace(IndexConfig.new(0.8).params, recall_at_threshold=None),
    )
    moved = legacy.changed(threshold=0.5)
    assert (moved.params.bands, moved.params.rows, moved.params.recall_at_threshold) == (30, 4, None)
    adopted = legacy.changed(threshold=0.5, recall_at_threshold=0.99)
    expected = optimal_params(0.5, 128, 0.2, 0.8, recall_at_threshold=0.99)
    assert (adopted.params.bands, adopted.params.rows) == (expected.bands, expected.rows) == (31, 3)


def test_a_bad_target_is_refused_by_name() -> None:
    with pytest.raises(ParamsError, match="recall_at_threshold"):
        IndexConfig.new(0.8, recall_at_threshold=1.0)
