"""What a record is and the checks it must pass to become a ``Document`` the index stores.

Reading records from files is ``readers.py``'s work; this module reads nothing. One rule for a
repeated id holds everywhere: ``documents`` refuses an id seen earlier in the same input, however
far apart the two are (``Index.add`` and ``neardup add`` both go through it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from neardup.errors import InputError

Record = tuple[str, str] | tuple[str, str, Mapping[str, Any] | None] | Mapping[str, Any]
# Ids are keys of a btree index, whose entries must fit in a third of a default page (2,704 bytes);
# 2,000 leaves room for the rest of the entry and refuses a too-long id before it reaches SQL.
ID_MAX_BYTES = 2000


class Document(NamedTuple):
    """A record that passed the checks (meta as jsonb will store it); not checked again."""

    id: str
    text: str
    meta: dict[str, Any] | None


def to_document(record: Record, where: str) -> Document:
    """The ``Document`` of one record, or InputError naming ``where`` and the field that is wrong.
    A ``Document`` is returned as it is: it was checked where it was made (the command line checks
    where it reads, file:line), and ``Index.add`` does not repeat the work."""
    if type(record) is Document:
        return record
    if isinstance(record, Mapping):
        if "id" not in record or "text" not in record:
            missing = "id" if "id" not in record else "text"
            raise InputError(f"{where}: field {missing!r} is missing")
        doc_id, text, meta = record["id"], record["text"], record.get("meta")
    elif isinstance(record, tuple) and len(record) in (2, 3):
        doc_id, text = record[0], record[1]
        meta = record[2] if len(record) == 3 else None
    else:
        raise InputError(
            f"{where}: expected (id, text), (id, text, meta) or a dict, got {type(record).__name__}"
        )
    return document_of(doc_id, text, meta, where)


def document_of(doc_id: object, text: object, meta: object, where: str) -> Document:
    """The ``Document`` of an id, a text and metadata, or InputError naming ``where`` and the field
    that is wrong. Messages are formatted only for a bad record: a good one costs a few checks."""
    doc_id = check_id(doc_id, where)
    if not isinstance(text, str):
        raise InputError(
            f"{_with_id(where, doc_id)}: field 'text' must be a string, got {type(text).__name__}"
        )
    if problem := _string_problem(text):
        raise InputError(f"{_with_id(where, doc_id)}: field 'text' {problem}")
    if meta is None:
        return Document(doc_id, text, None)
    if not isinstance(meta, Mapping):
        raise InputError(
            f"{_with_id(where, doc_id)}: field 'meta' must be a mapping, got {type(meta).__name__}"
        )
    return Document(doc_id, text, _json_object(meta, f"{_with_id(where, doc_id)}: field 'meta'"))


def check_id(doc_id: object, where: str) -> str:
    """``doc_id`` if it can be a stored document's id (a non-empty string of at most
    ``ID_MAX_BYTES`` UTF-8 bytes, no NUL, no lone surrogate), else InputError naming ``where``."""
    if not isinstance(doc_id, str) or not doc_id:
        raise InputError(f"{where}: field 'id' must be a non-empty string, got {doc_id!r:.80}")
    if len(doc_id) > ID_MAX_BYTES // 4 and len(doc_id.encode("utf-8", "replace")) > ID_MAX_BYTES:
        raise InputError(f"{where}: field 'id' is longer than {ID_MAX_BYTES} bytes ({doc_id!r:.80}...)")
    if problem := _string_problem(doc_id):
        raise InputError(f"{_with_id(where, doc_id)}: field 'id' {problem}")
    return doc_id


def _with_id(where: str, doc_id: str) -> str:
    return f"{where} (id {doc_id!r:.80})"


def _string_problem(value: str) -> str | None:
    """Why PostgreSQL's text cannot hold ``value`` (a NUL, a lone surrogate), or None."""
    if "\x00" in value:
        return "contains a NUL character"
    if not value.isascii() and not _encodable(value):
        return "is not valid Unicode (a lone surrogate)"
    return None


class Checked(Iterator[Document]):
    """Documents whose ids the maker has checked against the whole input already (``readers.checked``,
    a table's rows, a parallel writer's share of them): ``documents`` hands them on as they are, so
    that one input keeps one table of the ids seen, however many stages it passes."""

    def __init__(self, docs: Iterable[Document]) -> None:
        self._docs = iter(docs)

    def __next__(self) -> Document:
        return next(self._docs)


def documents(records: Iterable[Record], start: int = 0) -> Iterator[Document]:
    """Each record as a ``Document``, checked where it stands (``record {start + i}``); an id
    repeated anywhere in ``records`` is refused with InputError naming both places. ``Checked``
    documents are handed on as they are."""
    return records if isinstance(records, Checked) else _documents(records, start)


def _documents(records: Iterable[Record], start: int) -> Iterator[Document]:
    seen = SeenIds()
    for position, record in enumerate(records, start):
        where = f"record {position}"
        document = to_document(record, where)
        if (earlier := seen.place_of(document.id)) is not None:
            raise InputError(f"{where}: id {document.id!r:.80} repeats {earlier}")
        seen.add(document.id, where)
        yield document


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_object(meta: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``meta`` as PostgreSQL's jsonb will store it (a JSON round trip), or InputError saying why not."""
    try:
        dumped = json.dumps(meta, ensure_ascii=False, allow_nan=False)
        dumped.encode("utf-8")
        loaded: dict[str, Any] = json.loads(dumped)
    except RecursionError as exc:
        raise InputError(f"{where} is nested too deeply to store as JSON") from exc
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise InputError(f"{where} is not storable as JSON ({exc})") from exc
    if _has_nul(loaded):
        raise InputError(f"{where} contains a NUL character, which jsonb cannot store")
    return loaded


def _has_nul(value: Any) -> bool:
    """Whether a JSON value holds a NUL in any string or key (iterative: nesting has no limit here)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


# Ids seen are moved from a dict into sorted numpy arrays this often: a dict entry with its place
# costs ten times the arrays' 16 bytes an id.
_MERGE_EVERY = 50_000
# A place is a source (a file, or "record") and a number (a line, or a position) in one int64.
_NUMBER_BITS = 40
# The bitmap in front of the sorted arrays has at least this many bits for each id in them (and at
# most twice as many): about one bit in 16 is set, so a new id reaches the arrays' binary search
# one time in 16 or less. That search is a numpy call, which releases and retakes the GIL; ids are
# read on a thread beside the sketching and writing ones, and a call per id cost them the GIL at
# every record, which was a large share of the reading thread's time.
_BITS_PER_ID = 16
_MIN_BITMAP_BYTES = 1 << 16


class SeenIds:
    """The ids read so far and where each was read, in about 20 bytes an id, so reading stays flat
    in memory: 64-bit hashes of the ids with their places in sorted arrays (16 bytes), the newest in
    a dict, and a bitmap of the arrays' hashes (2 to 4 bytes) that answers most lookups of a new id
    in Python alone.
    Two different ids with equal 64-bit hashes would be taken for a repeat (odds ~n²/2⁶⁵)."""

    def __init__(self) -> None:
        self._hashes = np.empty(0, np.int64)
        self._places = np.empty(0, np.int64)
        self._bitmap = bytearray()
        self._mask = -1  # bits in the bitmap - 1 (a power of two); -1 while it is empty
        self._recent: dict[int, int] = {}
        self._sources: dict[str, int] = {}
        self._names: list[str] = []
        self._last_name = ""

    def place_of(self, doc_id: str) -> str | None:
        """Where ``doc_id`` was read before (as given to ``add``), or None."""
        key = hash(doc_id)
        place = self._recent.get(key)
        if place is None:
            bit = key & self._mask
            if self._mask < 0 or not self._bitmap[bit >> 3] >> (bit & 7) & 1:
                return None
            i = int(np.searchsorted(self._hashes, key))
            if i == self._hashes.size or self._hashes[i] != key:
                return None
            place = int(self._places[i])
        name, number = self._names[place >> _NUMBER_BITS], place & ((1 << _NUMBER_BITS) - 1)
        return f"{name}{number}" if number else name

    def add(self, doc_id: str, where: str) -> None:
        """Remember that ``doc_id`` was read at ``where`` (``file:line``, ``record N``, or a file)."""
        name, number = self._split(where)
        source = self._sources.get(name)
        if source is None:
            source = self._sources[name] = len(self._names)
            self._names.append(name)
        self._recent[hash(doc_id)] = (source << _NUMBER_BITS) | number
        if len(self._recent) >= _MERGE_EVERY:
            self._merge()

    def _split(self, where: str) -> tuple[str, int]:
        """``_split_place(where)``, without its general parse when ``where`` is the last numbered
        place's name followed by a number, as each line of one file is."""
        name = self._last_name
        if name and where.startswith(name):
            digits = where[len(name) :]
            # As _split_place: ASCII digits, no leading zero, under 2**40 (12 digits at most).
            if digits.isascii() and digits.isdigit() and digits[0] != "0" and len(digits) <= 12:
                return name, int(digits)
        name, number = _split_place(where)
        if number:
            self._last_name = name
        return name, number

    def _merge(self) -> None:
        """Move the recent ids into the sorted arrays and mark them in the bitmap."""
        fresh = np.fromiter(self._recent.keys(), np.int64, len(self._recent))
        hashes = np.concatenate([self._hashes, fresh])
        places = np.concatenate([self._places, np.fromiter(self._recent.values(), np.int64)])
        order = np.argsort(hashes, kind="stable")
        self._hashes, self._places, self._recent = hashes[order], places[order], {}
        if (self._mask + 1) < _BITS_PER_ID * hashes.size:
            size = max(_MIN_BITMAP_BYTES, 1 << int(_BITS_PER_ID * hashes.size // 8).bit_length())
            self._bitmap, self._mask, fresh = bytearray(size), 8 * size - 1, hashes
        bits = fresh & self._mask
        marks = np.frombuffer(self._bitmap, np.uint8)
        np.bitwise_or.at(marks, bits >> 3, np.left_shift(1, bits & 7).astype(np.uint8))


def _split_place(where: str) -> tuple[str, int]:
    """``where`` as a name and the number that ends it (``in.jsonl:`` 7, ``record `` 7), so that
    ``f"{name}{number}"`` gives it back; a place without such a number is (where, 0)."""
    digits = len(where) - len(where.rstrip("0123456789"))
    if digits and where[-digits] != "0" and len(where) > digits and where[-digits - 1] in ": ":
        number = int(where[-digits:])
        if number < 1 << _NUMBER_BITS:
            return where[:-digits], number
    return where, 0
