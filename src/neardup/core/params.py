"""The parameters of an index: every choice that changes signatures or bucket keys, versioned."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from neardup import validate
from neardup.core.content import CONTENT_HASH_VERSION
from neardup.core.lsh import check_banding
from neardup.core.minhash import DEFAULT_NUM_PERM, DEFAULT_SCHEME, DEFAULT_SEED, Scheme, check_minhash
from neardup.core.normalize import CaseMode, Normalization, UnicodeForm
from neardup.core.shingle import ShingleKind, check_shingling
from neardup.core.tuning import (
    DEFAULT_RECALL_AT_THRESHOLD,
    Banding,
    BinDensity,
    check_recall_target,
    evaluate_banding,
    optimal_params,
)
from neardup.errors import ParamsError, ParamsMismatchError

# Bump whenever any fixed function changes its output for the same Params: the shingle hash,
# the whitespace set, the coefficient draw, the densification probes or the band key. A stored
# index records the version it was built with, and a different one is refused.
HASH_VERSION = 1
# The Jaccard floor of top-k answers: below it, a neighbour is no longer "near" (what a user of
# the k nearest documents asks is rarely below a third of shared shingles).
DEFAULT_NEIGHBOUR_FLOOR = 0.3
# The content hash of collections stored before Params had the field (UTF-32; ``core.content``).
LEGACY_CONTENT_HASH = 1
# Contents from which a cluster is dense: it stores a verified subset of its pairs that connects
# it, not every pair (docs/design.md, "Dense clusters"). Every stored pair of a cluster just under
# the bound costs a verification and a row, about half the bound per content: at 128, some 64
# pairs a content, which costs about what the rest of its ingest does (sketch, rows, buckets);
# a larger bound buys listings of larger clusters at a price that grows with it.
DEFAULT_DENSE_CLUSTER_SIZE = 128


@dataclass(frozen=True)
class Params:
    """Every choice that changes signatures or bucket keys; stored with an index, compared on open."""

    bands: int
    rows: int
    num_perm: int = DEFAULT_NUM_PERM
    scheme: Scheme = DEFAULT_SCHEME
    seed: int = DEFAULT_SEED
    shingle: ShingleKind = "char"
    k: int = 5
    unicode_form: UnicodeForm = "NFKC"
    case: CaseMode = "fold"
    collapse_whitespace: bool = True
    # The recall target the bands and rows were tuned for (``optimal_params``): it changes no
    # signature, but which bucket keys a re-tuning rebuild picks. None: tuned without one (stored
    # before the field existed, with the FP/FN weights only).
    recall_at_threshold: float | None = DEFAULT_RECALL_AT_THRESHOLD
    hash_version: int = HASH_VERSION
    # Which bytes of a normalised text its content hash is taken over (``core.content``): the
    # collection's own, chosen when it is made and kept by rebuilds, so a text added again is still
    # found as a copy of what is stored. Not compared on open (any version finds the same copies).
    content_hash: int = CONTENT_HASH_VERSION
    # Text fingerprints (``core.fingerprints``) kept for top-k and containment queries, and the
    # Jaccard floor of a top-k answer. Off, the collection stores neither, and neither is written
    # into its stored parameters (a collection that does not use them is stored as before).
    neighbours: bool = False
    neighbour_floor: float = DEFAULT_NEIGHBOUR_FLOOR
    # Clusters of at least this many contents are dense: they store a connecting subset of their
    # pairs. It changes no signature or bucket, but which pairs are stored, so a rebuild re-bands.
    dense_cluster_size: int = DEFAULT_DENSE_CLUSTER_SIZE

    def __post_init__(self) -> None:
        check_minhash(self.num_perm, self.seed, self.scheme)
        check_banding(self.bands, self.rows, self.num_perm)
        check_shingling(self.shingle, self.k)
        self.normalization  # noqa: B018 -- validates the normalisation fields
        if self.recall_at_threshold is not None:
            check_recall_target(self.recall_at_threshold)
        for name in ("hash_version", "content_hash"):
            validate.positive_int(getattr(self, name), name)
        validate.flag(self.neighbours, "neighbours")
        validate.whole_in(self.dense_cluster_size, "dense_cluster_size", 2, 2**63 - 1, shown="[2, 2**63)")
        validate.fraction(self.neighbour_floor, "neighbour_floor", zero=False)

    @classmethod
    def for_threshold(
        cls,
        threshold: float,
        num_perm: int = DEFAULT_NUM_PERM,
        fp_weight: float = 0.5,
        fn_weight: float = 0.5,
        *,
        density: BinDensity | None = None,
        **fields: Any,
    ) -> Params:
        """Params whose bands and rows are tuned for ``threshold`` (see ``optimal_params``) and
        the ``recall_at_threshold`` field (default DEFAULT_RECALL_AT_THRESHOLD; None: no target),
        the threshold's bin weighed by ``density`` (default the prior)."""
        recall = fields.setdefault("recall_at_threshold", DEFAULT_RECALL_AT_THRESHOLD)
        banding = optimal_params(
            threshold, num_perm, fp_weight, fn_weight, recall_at_threshold=recall, density=density
        )
        return cls(bands=banding.bands, rows=banding.rows, num_perm=num_perm, **fields)

    @property
    def normalization(self) -> Normalization:
        """The normalisation part of these parameters."""
        return Normalization(self.unicode_form, self.case, self.collapse_whitespace)

    def banding(self, threshold: float) -> Banding:
        """These bands and rows with their expected error rates at ``threshold`` (approximate)."""
        return evaluate_banding(threshold, self.bands, self.rows, self.num_perm)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields, for storage (the neighbours' fields only where they are on)."""
        data = dataclasses.asdict(self)
        if not self.neighbours:
            del data["neighbours"], data["neighbour_floor"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Params:
        """Params from ``to_dict`` output; unknown or missing fields are refused by name (a missing
        ``content_hash`` is version 1, a missing ``recall_at_threshold`` None, a missing
        ``neighbours`` off, a missing ``dense_cluster_size`` the default: stored before they
        existed, when every pair was stored, which a dense cluster allows)."""
        data = {
            "content_hash": LEGACY_CONTENT_HASH,
            "recall_at_threshold": None,
            "neighbours": False,
            "neighbour_floor": DEFAULT_NEIGHBOUR_FLOOR,
            "dense_cluster_size": DEFAULT_DENSE_CLUSTER_SIZE,
            **data,
        }
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ParamsError(f"unknown parameter fields: {', '.join(unknown)}")
        missing = sorted(names - set(data))
        if missing:
            raise ParamsError(f"missing parameter fields: {', '.join(missing)}")
        return cls(**data)

    def differences(self, other: Params) -> list[str]:
        """One line per differing field: ``name: <self> != <other>`` (``content_hash`` is the
        collection's own, never asked for, so it is not compared)."""
        return [
            f"{f.name}: {getattr(self, f.name)!r} != {getattr(other, f.name)!r}"
            for f in dataclasses.fields(self)
            if f.name != "content_hash" and getattr(self, f.name) != getattr(other, f.name)
        ]

    def require_same(self, other: Params, mine: str = "stored", theirs: str = "requested") -> None:
        """Raise ParamsMismatchError naming every field where ``other`` differs from these."""
        diffs = self.differences(other)
        if diffs:
            raise ParamsMismatchError(f"parameters differ ({mine} != {theirs}): " + "; ".join(diffs))
