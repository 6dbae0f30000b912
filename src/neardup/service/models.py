"""The JSON shapes of the API, as the OpenAPI document describes them."""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from neardup.config import CREATE_PARAMETERS, Parameter
from neardup.database import Change as StoredChange
from neardup.database import LabelRow


class Strict(BaseModel):
    """Unknown fields are refused, so a misspelt option is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid")


class Health(BaseModel):
    """The database answered."""

    status: Literal["ok"]


class _NamedCollection(Strict):
    """A collection to create: its name, and whether an existing one with the same parameters will do."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    exist_ok: bool = Field(False, description="open an existing collection with the same parameters")


def _field(parameter: Parameter) -> tuple[Any, Any]:
    """A request field for one creation parameter: its type (its choices as a Literal, None allowed
    when the library takes None), default, bounds and help, all from ``config.CREATE_PARAMETERS``."""
    checks: dict[str, Any] = {}
    if parameter.choices:
        kind: Any = Literal[parameter.choices]
    else:  # strict, as the library: true is no count, "5" no number, "yes" no boolean
        kind, checks["strict"] = parameter.type, True
    if parameter.pattern:
        checks["pattern"] = parameter.pattern
    if parameter.nullable:
        kind = kind | None
    if parameter.low is not None:
        checks["gt" if parameter.low_open else "ge"] = parameter.low
    if parameter.high is not None:
        checks["lt" if parameter.high_open else "le"] = parameter.high
    described = f"{parameter.help} (unset: {parameter.unset})" if parameter.unset else parameter.help
    return kind, Field(parameter.default, description=described, **checks)


if TYPE_CHECKING:  # the parameters' fields are made at run time; the fixed ones are what code reads
    NewCollection = _NamedCollection
else:
    NewCollection = create_model(
        "NewCollection",
        __base__=_NamedCollection,
        __doc__="A collection to create, with every parameter of ``neardup init`` and its default.",
        **{p.name: _field(p) for p in CREATE_PARAMETERS},
    )


class CollectionSummary(BaseModel):
    """A collection's name and threshold."""

    name: str
    threshold: float
    store_text: bool


class CollectionList(BaseModel):
    """Collections the token may see, by name."""

    collections: list[CollectionSummary]


class CollectionInfo(BaseModel):
    """A collection's parameters and, when asked for one collection, its counts."""

    name: str
    threshold: float
    store_text: bool
    params: dict[str, Any]
    keep: str | None = None
    """Which document of a cluster is its representative (``neardup init --keep``)."""
    stats: dict[str, Any] | None = None


class AddSummary(BaseModel):
    """What an add did."""

    added: int
    replaced: int
    unchanged: int
    empty: int
    new_pairs: int


class Neighbour(BaseModel):
    """Another document and its similarity."""

    id: str
    jaccard: float
    method: str


class Document(BaseModel):
    """A stored document with its near-duplicates."""

    id: str
    text: str | None
    meta: dict[str, Any] | None
    cluster: int
    pairs: list[Neighbour]


class Query(Strict):
    """A text to look up. Numbers are JSON numbers (``true`` is no count, ``"5"`` no number), as
    the library takes them."""

    text: str = Field(max_length=10_000_000, strict=True)
    min_jaccard: float | None = Field(None, ge=0.0, le=1.0, strict=True)
    limit: int | None = Field(
        None, ge=1, le=100_000, strict=True, description="at most this many matches (unset: all)"
    )
    top_k: int | None = Field(
        None,
        ge=1,
        le=100_000,
        strict=True,
        description="the k nearest stored documents (a collection with neighbours)",
    )
    min_containment: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        strict=True,
        description="stored documents containing at least this share of the text",
    )
    direction: Literal["contains", "within"] = Field(
        "contains",
        description="within: stored documents the text contains at least min_containment of (needs "
        "min_containment)",
    )

    @model_validator(mode="after")
    def _within_needs_a_share(self) -> Query:
        if self.direction == "within" and self.min_containment is None:
            raise ValueError(
                "direction 'within' goes with min_containment (as --within with --min-containment)"
            )
        return self


class Match(BaseModel):
    """A stored document similar to the text asked about (with its containment, when asked)."""

    id: str
    jaccard: float
    containment: float | None = None


class Matches(BaseModel):
    """Matches, best first."""

    matches: list[Match]


class Checked(BaseModel):
    """One checked document's stored near-duplicates, best first."""

    id: str
    matches: list[Match]


class CheckResults(BaseModel):
    """Each checked document, in input order."""

    results: list[Checked]


class Pair(BaseModel):
    """A stored pair."""

    id_a: str
    id_b: str
    jaccard: float
    method: str


class PairPage(BaseModel):
    """A page of pairs by (id_a, id_b); ``next`` is the cursor of the next page (null on the last)."""

    pairs: list[Pair]
    next: str | None


class Cluster(BaseModel):
    """A cluster: its lasting id, its representative (the collection's keep policy) and its ids, sorted."""

    cluster: int
    representative: str
    ids: list[str]
    dense: bool = False
    """Of ``dense_cluster_size`` distinct texts or more: its stored pairs are a verified subset
    that connects it; ``/clusters/{cluster}/pairs`` streams every pair."""


class ClusterPage(BaseModel):
    """A page of clusters by representative; ``next`` as for pairs."""

    clusters: list[Cluster]
    next: str | None


def _mirrored(source: type, doc: str) -> type[BaseModel]:
    """A response model named and shaped as the dataclass ``source`` (its fields, types and
    defaults), as JSON carries it: a datetime as its ISO text, as the dataclass's ``to_dict`` writes."""
    hints = typing.get_type_hints(source)
    fields: dict[str, Any] = {
        f.name: (
            str if hints[f.name] is datetime else hints[f.name],
            ... if f.default is dataclasses.MISSING else f.default,
        )
        for f in dataclasses.fields(source)
    }
    return create_model(source.__name__.removesuffix("Row"), __doc__=doc, **fields)


Change = _mirrored(
    StoredChange,
    """One write to the collection, numbered in commit order: ``id`` for a document's,
    ``id_a``/``id_b`` (and ``jaccard`` when added) for a pair's, ``cluster``/``clusters`` for a
    cluster's (merged: the one kept and those merged into it; split: the one split and those its
    contents are in now); ``dense`` for a cluster's: whether the cluster is dense (its stored pairs
    a connecting subset).""",
)


class Changes(BaseModel):
    """Changes after ``since`` in order; ``last_seq`` is the ``since`` to ask with next."""

    results: list[Change]  # type: ignore[valid-type]  # a model made at import, which mypy cannot see
    last_seq: int


class NewLabel(Strict):
    """A person's verdict on a pair."""

    id_a: str = Field(min_length=1, max_length=2000)
    id_b: str = Field(min_length=1, max_length=2000)
    label: Literal["duplicate", "not_duplicate"]
    note: str = Field("", max_length=10_000)


Label = _mirrored(
    LabelRow, "A stored label with the pair's current similarity (null: no longer a stored pair)."
)


class Labels(BaseModel):
    """Labels by pair."""

    labels: list[Label]  # type: ignore[valid-type]  # as Changes.results


# The request body of add and check, for the OpenAPI document (the route parses it itself, to
# take NDJSON too and to name a bad record's position).
DOCUMENTS_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["id", "text"],
                        "properties": {
                            # An integer id is taken as its decimal text, as `neardup add` reads one.
                            "id": {"type": ["string", "integer"], "minLength": 1},
                            "text": {"type": "string"},
                            "meta": {"type": "object"},
                        },
                    },
                }
            },
            "application/x-ndjson": {"schema": {"type": "string"}},
        },
    }
}


# The query's body, declared for the OpenAPI document; the route parses it itself (one pydantic
# call on the raw bytes, without FastAPI's generic body handling, a noticeable share of a query).
QUERY_BODY: dict[str, Any] = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": Query.model_json_schema()}}}
}
