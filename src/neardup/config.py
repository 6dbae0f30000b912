"""What an index is configured with, and the one rule for choosing or checking it.

A collection stores its threshold, whether it keeps the texts, and its ``Params`` (every choice
that changes signatures or bucket keys). ``IndexConfig`` holds the three together: ``create``,
``rebuild`` and the command line build one here and nowhere else, so a threshold or banding is
checked by one rule everywhere, and the command line's defaults are these.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, get_args

from neardup import validate
from neardup.core.minhash import DEFAULT_NUM_PERM, MAX_NUM_PERM, MAX_SEED, SCHEMES
from neardup.core.normalize import CaseMode, UnicodeForm
from neardup.core.params import Params
from neardup.core.shingle import MAX_K, SHINGLE_KINDS
from neardup.core.tuning import (
    DEFAULT_RECALL_AT_THRESHOLD,
    THRESHOLD_BIN,
    Banding,
    BinDensity,
    check_threshold,
)
from neardup.errors import ParamsError, ParamsMismatchError

# Documents per transaction in add(): large enough that COPY and the set-based statements
# dominate, small enough that a batch's shingles and signatures stay in a few hundred MB.
DEFAULT_BATCH_SIZE = 50_000


# A pair sharing 80% of its shingles is a near-copy in the sense of Broder's web study and of
# most dedup pipelines (MMDS ch. 3 uses 0.8 as its running example).
DEFAULT_THRESHOLD = 0.8
# The tuner weighs a missed pair four times a false candidate: candidates are verified exactly, so a
# false positive costs a set merge while a false negative is a duplicate nobody ever sees.
# At t = 0.8, n = 128 these weights alone pick 16 x 8; with the recall target in the threshold's
# bin (DEFAULT_RECALL_AT_THRESHOLD) 16 x 7 (docs/benchmarks/threshold.md).
FP_WEIGHT, FN_WEIGHT = 0.2, 0.8
# Params fields a caller may set; bands and rows are chosen here, hash_version and content_hash by
# the code (a rebuild keeps the collection's content_hash).
PARAM_FIELDS: tuple[str, ...] = tuple(
    f.name
    for f in dataclasses.fields(Params)
    if f.name not in ("bands", "rows", "hash_version", "content_hash")
)
# Their defaults (those of Params), for the command line's options.
PARAM_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(Params) if f.name in PARAM_FIELDS
}


# Which document of a cluster is kept (its representative): the earliest inserted, the longest
# text, the smallest id, or by a metadata field (``meta:FIELD``, ``meta:FIELD:desc``).
KEEP_POLICIES = ("first", "longest", "id", "meta:FIELD", "meta:FIELD:desc")
DEFAULT_KEEP = "first"
KEEP_PATTERN = r"^(first|longest|id|meta:[^:]{1,100}(:asc|:desc)?)$"


def check_keep(keep: object) -> str:
    """The representative policy ``keep`` in its stored form (``meta:FIELD:asc`` as ``meta:FIELD``),
    or ParamsError naming the allowed ones."""
    if isinstance(keep, str):
        if keep in ("first", "longest", "id"):
            return keep
        parts = keep.split(":")
        if (
            parts[0] == "meta"
            and len(parts) in (2, 3)
            and 1 <= len(parts[1]) <= 100
            and (len(parts) == 2 or parts[2] in ("asc", "desc"))
        ):
            return keep.removesuffix(":asc")
    raise ParamsError(
        f"keep must be one of {', '.join(KEEP_POLICIES)} (FIELD: 1 to 100 characters, no colon), "
        f"got {keep!r:.120}"
    )


@dataclass(frozen=True)
class Parameter:
    """One parameter of a new collection, as ``Index.create``, ``neardup init`` and the service's
    create request take it: its type, default, allowed values and help. ``rebuild``: whether a
    rebuild can change it (the stored parameters can change, the layout chosen at creation not)."""

    name: str
    type: type[Any]
    default: Any
    help: str
    choices: tuple[Any, ...] = ()
    low: int | float | None = None
    high: int | float | None = None
    low_open: bool = False
    """Whether ``low`` itself is outside the range (the threshold's 0)."""
    high_open: bool = False
    """Whether ``high`` itself is outside the range (the recall target's 1)."""
    nullable: bool = False
    """Whether None is a value; ``unset`` says what it means."""
    unset: str = ""
    rebuild: bool = True
    pattern: str = ""
    """A regular expression a text value must match (checked again by the library)."""

    def range_text(self) -> str:
        """The allowed values in words: ``(0, 1]``, ``at least 1``, ``char, word`` or ``""``."""
        if self.choices:
            return ", ".join(map(str, self.choices))
        if self.low is not None and self.high is not None:
            return f"{'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"
        return f"at least {self.low}" if self.low is not None else ""


# Every parameter of a new collection, once: the command line's init and rebuild options and the
# service's create request are built from these, so each takes every parameter with one default.
CREATE_PARAMETERS: tuple[Parameter, ...] = (
    Parameter(
        "threshold",
        float,
        DEFAULT_THRESHOLD,
        "Jaccard similarity of a near-duplicate",
        low=0,
        high=1,
        low_open=True,
    ),
    Parameter("num_perm", int, PARAM_DEFAULTS["num_perm"], "signature length", low=1, high=MAX_NUM_PERM),
    Parameter("bands", int, None, "LSH bands, given with rows", low=1, nullable=True, unset="tuned"),
    Parameter("rows", int, None, "rows per band, given with bands", low=1, nullable=True, unset="tuned"),
    Parameter(
        "recall_at_threshold",
        float,
        DEFAULT_RECALL_AT_THRESHOLD,
        f"expected recall of the pairs in [threshold, threshold + {THRESHOLD_BIN:g}) that tuned "
        "bands and rows must reach",
        low=0,
        high=1,
        low_open=True,
        high_open=True,
    ),
    Parameter("scheme", str, PARAM_DEFAULTS["scheme"], "MinHash scheme", choices=SCHEMES),
    Parameter("seed", int, PARAM_DEFAULTS["seed"], "seed of the hash functions", low=0, high=MAX_SEED),
    Parameter("shingle", str, PARAM_DEFAULTS["shingle"], "character or word shingles", choices=SHINGLE_KINDS),
    Parameter("k", int, PARAM_DEFAULTS["k"], "shingle length (characters or words)", low=1, high=MAX_K),
    Parameter(
        "unicode_form",
        str,
        PARAM_DEFAULTS["unicode_form"],
        "Unicode normalisation",
        choices=get_args(UnicodeForm),
    ),
    Parameter("case", str, PARAM_DEFAULTS["case"], "case folding", choices=get_args(CaseMode)),
    Parameter(
        "collapse_whitespace",
        bool,
        PARAM_DEFAULTS["collapse_whitespace"],
        "treat every run of whitespace as one space",
    ),
    Parameter(
        "store_text",
        bool,
        True,
        "keep the texts (exact verification, eval and re-sketching rebuilds need them)",
        rebuild=False,
    ),
    Parameter(
        "keep",
        str,
        DEFAULT_KEEP,
        "which document of a cluster is kept (its representative): first (the earliest inserted), "
        "longest, id (the smallest), meta:FIELD or meta:FIELD:desc (by a metadata field's value); "
        "changing it re-sketches nothing",
        pattern=KEEP_PATTERN,
    ),
    Parameter(
        "neighbours",
        bool,
        PARAM_DEFAULTS["neighbours"],
        "keep text fingerprints for top-k and containment queries (needs store_text)",
    ),
    Parameter(
        "neighbour_floor",
        float,
        PARAM_DEFAULTS["neighbour_floor"],
        "lowest Jaccard of a top-k answer",
        low=0,
        high=1,
        low_open=True,
    ),
    Parameter(
        "dense_cluster_size",
        int,
        PARAM_DEFAULTS["dense_cluster_size"],
        "contents from which a cluster is dense: it stores a verified subset of its pairs that "
        "connects it, not every pair (`pairs --cluster ID --complete` lists them all)",
        low=2,
    ),
    Parameter(
        "distributed",
        bool,
        None,
        "make its tables Citus tables (docs/distributed.md)",
        nullable=True,
        unset="as the schema is",
        rebuild=False,
    ),
    Parameter(
        "shards",
        int,
        None,
        "with distributed: shards per table, for a schema's first distributed collection",
        low=1,
        nullable=True,
        unset="Citus's citus.shard_count",
        rebuild=False,
    ),
    Parameter(
        "changes_feed",
        bool,
        None,
        "number every write in a changes feed (`neardup changes`)",
        nullable=True,
        unset="off",
        rebuild=False,
    ),
    Parameter(
        "changes_retention_hours",
        int,
        None,
        "with changes_feed: hours each change is kept",
        low=1,
        high=validate.MAX_RETENTION_HOURS,
        nullable=True,
        unset="every change",
        rebuild=False,
    ),
)
PARAMETERS: dict[str, Parameter] = {p.name: p for p in CREATE_PARAMETERS}

# Changing only these re-bands stored signatures; anything else re-sketches every stored text.
_BANDING_FIELDS = frozenset({"bands", "rows", "recall_at_threshold", "neighbour_floor", "dense_cluster_size"})


@dataclass(frozen=True)
class IndexConfig:
    """A collection's threshold, text storage and signature parameters, checked together."""

    threshold: float
    params: Params
    store_text: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", check_threshold(self.threshold))
        validate.flag(self.store_text, "store_text")
        if self.params.neighbours and not self.store_text:
            raise ParamsError("neighbours need the stored texts: a collection without its texts keeps none")

    @classmethod
    def new(
        cls,
        threshold: float = DEFAULT_THRESHOLD,
        *,
        bands: int | None = None,
        rows: int | None = None,
        store_text: bool = True,
        **fields: Any,
    ) -> IndexConfig:
        """A configuration for a new collection: bands and rows tuned for ``threshold`` (weighing
        a miss four times a false candidate, and reaching ``recall_at_threshold`` in the threshold's bin)
        unless both are given; ``fields`` are other ``Params`` fields."""
        threshold = check_threshold(threshold)
        _refuse_unknown(fields)
        return cls(threshold, _params(threshold, bands, rows, fields), store_text)

    def changed(
        self,
        threshold: float | None = None,
        *,
        bands: int | None = None,
        rows: int | None = None,
        density: BinDensity | None = None,
        **fields: Any,
    ) -> IndexConfig:
        """This configuration with some fields changed, as ``rebuild`` applies it: bands and rows
        are re-tuned for the (new) threshold and recall target unless both are given, the
        threshold's bin weighed by ``density`` (default the tuner's prior)."""
        new_threshold = self.threshold if threshold is None else check_threshold(threshold)
        _refuse_unknown(fields)
        base = {name: getattr(self.params, name) for name in PARAM_FIELDS}
        base.update(fields)
        base["content_hash"] = self.params.content_hash
        if bands is None and rows is None and threshold is None and not fields:
            bands, rows = self.params.bands, self.params.rows  # nothing asked: nothing changes
        return IndexConfig(new_threshold, _params(new_threshold, bands, rows, base, density), self.store_text)

    def banding(self) -> Banding:
        """The bands and rows with their expected error rates at the threshold (approximate)."""
        return self.params.banding(self.threshold)

    def differences(self, other: IndexConfig) -> list[str]:
        """One line per differing field: ``name: <self> != <other>``."""
        diffs = self.params.differences(other.params)
        for name in ("threshold", "store_text"):
            if getattr(self, name) != getattr(other, name):
                diffs.append(f"{name}: {getattr(self, name)!r} != {getattr(other, name)!r}")
        return diffs

    def require_same(self, other: IndexConfig, mine: str = "stored", theirs: str = "requested") -> None:
        """Raise ParamsMismatchError naming every field where ``other`` differs from this one."""
        if diffs := self.differences(other):
            raise ParamsMismatchError(f"parameters differ ({mine} != {theirs}): " + "; ".join(diffs))

    def rebands_only(self, other: IndexConfig) -> bool:
        """Whether going from this configuration to ``other`` keeps every signature (only the
        threshold, bands or rows change), so buckets can be recomputed without reading text."""
        return {d.split(":")[0] for d in self.params.differences(other.params)} <= _BANDING_FIELDS


def _refuse_unknown(fields: dict[str, Any]) -> None:
    if unknown := sorted(set(fields) - set(PARAM_FIELDS)):
        raise ParamsError(f"unknown parameter(s): {', '.join(unknown)} (known: {', '.join(PARAM_FIELDS)})")


def _params(
    threshold: float,
    bands: int | None,
    rows: int | None,
    fields: dict[str, Any],
    density: BinDensity | None = None,
) -> Params:
    if (bands is None) != (rows is None):
        raise ParamsError("give both bands and rows, or neither (to have them tuned for the threshold)")
    fields = dict(fields)
    if bands is None or rows is None:
        num_perm = fields.pop("num_perm", DEFAULT_NUM_PERM)
        return Params.for_threshold(threshold, num_perm, FP_WEIGHT, FN_WEIGHT, density=density, **fields)
    return Params(bands=bands, rows=rows, **fields)


__all__ = [
    "CREATE_PARAMETERS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_KEEP",
    "DEFAULT_THRESHOLD",
    "FN_WEIGHT",
    "FP_WEIGHT",
    "KEEP_POLICIES",
    "PARAMETERS",
    "PARAM_DEFAULTS",
    "PARAM_FIELDS",
    "IndexConfig",
    "Parameter",
    "check_keep",
]
