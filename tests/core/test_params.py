import dataclasses
import json

import pytest

from neardup.core import HASH_VERSION, Params, Sketcher, optimal_params
from neardup.core.content import CONTENT_HASH_VERSION
from neardup.errors import NeardupError, ParamsError, ParamsMismatchError


def test_for_threshold_uses_the_tuner() -> None:
    params = Params.for_threshold(0.7, num_perm=64, fn_weight=0.8, fp_weight=0.2, seed=9)
    expected = optimal_params(0.7, 64, 0.2, 0.8, recall_at_threshold=0.99)
    assert (params.bands, params.rows, params.num_perm, params.seed) == (expected.bands, expected.rows, 64, 9)
    assert params.recall_at_threshold == 0.99
    untargeted = Params.for_threshold(0.5, fn_weight=0.8, fp_weight=0.2, recall_at_threshold=None)
    assert (untargeted.bands, untargeted.rows, untargeted.recall_at_threshold) == (30, 4, None)
    banding = params.banding(0.7)
    assert banding.false_negative_rate == pytest.approx(expected.false_negative_rate)
    assert params.hash_version == HASH_VERSION


def test_round_trip_through_json() -> None:
    params = Params(
        bands=16, rows=8, scheme="classic", shingle="word", k=3, case="lower", unicode_form="none"
    )
    assert Params.from_dict(json.loads(json.dumps(params.to_dict()))) == params


def test_unknown_and_missing_fields_are_named() -> None:
    data = Params(bands=4, rows=4).to_dict()
    with pytest.raises(ParamsError, match="unknown parameter fields: colour"):
        Params.from_dict({**data, "colour": "red"})
    del data["seed"]
    with pytest.raises(ParamsError, match="missing parameter fields: seed"):
        Params.from_dict(data)


def test_mismatch_names_every_differing_field() -> None:
    stored = Params(bands=16, rows=8)
    asked = dataclasses.replace(stored, seed=2, k=7)
    assert stored.differences(stored) == []
    with pytest.raises(ParamsMismatchError) as info:
        stored.require_same(asked)
    message = str(info.value)
    assert "seed: 1 != 2" in message
    assert "k: 5 != 7" in message
    assert "bands" not in message
    assert isinstance(info.value, NeardupError)


def test_params_are_frozen() -> None:
    params = Params(bands=4, rows=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.seed = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"bands": 20, "rows": 8}, r"bands\*rows = 20\*8 = 160 exceeds num_perm = 128"),
        ({"bands": 4, "rows": 4, "k": 0}, "shingle k"),
        ({"bands": 4, "rows": 4, "case": "upper"}, "case"),
        ({"bands": 4, "rows": 4, "scheme": "bbit"}, "scheme"),
        ({"bands": 4, "rows": 4, "hash_version": 0}, "hash_version"),
    ],
)
def test_invalid_params_are_refused_with_numbers(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ParamsError, match=message):
        Params(**fields)  # type: ignore[arg-type]


def test_a_future_hash_version_is_refused_by_the_sketcher() -> None:
    with pytest.raises(
        ParamsMismatchError,
        match=f"hash_version: the parameters say 99, this neardup computes {HASH_VERSION}",
    ):
        Sketcher(Params(bands=4, rows=4, hash_version=99))


def test_content_hash_defaults_to_the_newest_version_and_is_stored() -> None:
    params = Params(bands=4, rows=4)
    assert params.content_hash == CONTENT_HASH_VERSION == 2
    assert Params.from_dict(json.loads(json.dumps(params.to_dict()))).content_hash == 2


def test_params_stored_before_content_hash_existed_read_as_version_1() -> None:
    data = Params(bands=4, rows=4).to_dict()
    del data["content_hash"]
    assert Params.from_dict(data).content_hash == 1


@pytest.mark.parametrize("version", [0, -1, True, "2", 2.0])
def test_a_malformed_content_hash_is_refused(version: object) -> None:
    with pytest.raises(ParamsError, match="content_hash must be a positive integer"):
        Params(bands=4, rows=4, content_hash=version)  # type: ignore[arg-type]


def test_a_future_content_hash_is_refused_by_the_sketcher() -> None:
    with pytest.raises(ParamsMismatchError, match=r"content_hash: the parameters say 3, .* newer neardup"):
        Sketcher(Params(bands=4, rows=4, content_hash=3))


def test_content_hash_is_not_compared_but_every_other_field_is() -> None:
    stored = Params(bands=16, rows=8, content_hash=1)
    assert stored.differences(Params(bands=16, rows=8)) == []
    assert stored.differences(Params(bands=16, rows=8, seed=2)) == ["seed: 1 != 2"]


def test_the_recall_target_is_stored_checked_and_legacy_rows_read_as_none() -> None:
    params = Params.for_threshold(0.5, fp_weight=0.2, fn_weight=0.8, recall_at_threshold=0.999)
    assert params.banding(0.5).threshold_bin_recall >= 0.999
    assert Params.from_dict(json.loads(json.dumps(params.to_dict()))) == params
    legacy = {k: v for k, v in Params(bands=30, rows=4).to_dict().items() if k != "recall_at_threshold"}
    assert Params.from_dict(legacy).recall_at_threshold is None
    assert Params(bands=30, rows=4).differences(Params.from_dict(legacy)) == [
        "recall_at_threshold: 0.99 != None"
    ]
    with pytest.raises(ParamsError, match="recall_at_threshold must be in"):
        Params(bands=4, rows=4, recall_at_threshold=1.0)
