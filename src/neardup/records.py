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
# Ids are keys of a btree index, whose entries must fit in a third of an 8 KiB page (2,704 bytes);
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
    doc_id = check_id(doc_id, where)
    if not isinstance(text, str):
        raise InputError(
            f"{where} (id {doc_id!r:.80}): field 'text' must be a string, got {type(text).__name__}"
        )
    _check_string(text, "text", f"{where} (id {doc_id!r:.80})")
    if meta is None:
        return Document(doc_id, text, None)
    if not isinstance(meta, Mapping):
        raise InputError(
            f"{where} (id {doc_id!r:.80}): field 'meta' must be a mapping, got {type(meta).__name__}"
        )
    return Document(doc_id, text, _json_object(meta, f"{where} (id {doc_id!r:.80}): field 'meta'"))


def check_id(doc_id: object, where: str) -> str:
    """``doc_id`` if it can be a stored document's id (a non-empty string of at most
    ``ID_MAX_BYTES`` UTF-8 bytes, no NUL, no lone surrogate), else InputError naming ``where``."""
    if not isinstance(doc_id, str) or not doc_id:
        raise InputError(f"{where}: field 'id' must be a non-empty string, got {doc_id!r:.80}")
    if len(doc_id) > ID_MAX_BYTES // 4 and len(doc_id.encode("utf-8", "replace")) > ID_MAX_BYTES:
        raise InputError(f"{where}: field 'id' is longer than {ID_MAX_BYTES} bytes ({doc_id!r:.80}...)")
    _check_string(doc_id, "id", f"{where} (id {doc_id!r:.80})")
    return doc_id


def _check_string(value: str, field_name: str, where: str) -> None:
    if "\x00" in value:
        raise InputError(f"{where}: field {field_name!r} contains a NUL character")
    if not value.isascii() and not _encodable(value):
        raise InputError(f"{where}: field {field_name!r} is not valid Unicode (a lone surrogate)")


def documents(records: Iterable[Record], start: int = 0) -> Iterator[Document]:
    """Each record as a ``Document``, checked where it stands (``record {start + i}``); an id
    repeated anywhere in ``records`` is refused with InputError naming both places."""
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


# Ids seen are moved from a dict into sorted numpy arrays this often: a dict entry costs ~170 bytes
# an id with its place (measured with tracemalloc: 167 MB for 1M), the arrays 16.
_MERGE_EVERY = 50_000
# A place is a source (a file, or "record") and a number (a line, or a position) in one int64.
_NUMBER_BITS = 40


class SeenIds:
    """The ids read so far and where each was read, in about 16 bytes an id, so reading stays flat
    in memory: 64-bit hashes of the ids with their places in sorted arrays, the newest in a dict.
    Two different ids with equal 64-bit hashes would be taken for a repeat (odds ~n²/2⁶⁵)."""

    def __init__(self) -> None:
        self._hashes = np.empty(0, np.int64)
        self._places = np.empty(0, np.int64)
        self._recent: dict[int, int] = {}
        self._sources: dict[str, int] = {}
        self._names: list[str] = []

    def place_of(self, doc_id: str) -> str | None:
        """Where ``doc_id`` was read before (as given to ``add``), or None."""
        key = hash(doc_id)
        place = self._recent.get(key)
        if place is None and self._hashes.size:
            i = int(np.searchsorted(self._hashes, key))
            if i < self._hashes.size and self._hashes[i] == key:
                place = int(self._places[i])
        if place is None:
            return None
        name, number = self._names[place >> _NUMBER_BITS], place & ((1 << _NUMBER_BITS) - 1)
        return f"{name}{number}" if number else name

    def add(self, doc_id: str, where: str) -> None:
        """Remember that ``doc_id`` was read at ``where`` (``file:line``, ``record N``, or a file)."""
        name, number = _split_place(where)
        source = self._sources.get(name)
        if source is None:
            source = self._sources[name] = len(self._names)
            self._names.append(name)
        self._recent[hash(doc_id)] = (source << _NUMBER_BITS) | number
        if len(self._recent) >= _MERGE_EVERY:
            hashes = np.concatenate([self._hashes, np.fromiter(self._recent.keys(), np.int64)])
            places = np.concatenate([self._places, np.fromiter(self._recent.values(), np.int64)])
            order = np.argsort(hashes, kind="stable")
            self._hashes, self._places, self._recent = hashes[order], places[order], {}


def _split_place(where: str) -> tuple[str, int]:
    """``where`` as a name and the number that ends it (``in.jsonl:`` 7, ``record `` 7), so that
    ``f"{name}{number}"`` gives it back; a place without such a number is (where, 0)."""
    digits = len(where) - len(where.rstrip("0123456789"))
    if digits and where[-digits] != "0" and len(where) > digits and where[-digits - 1] in ": ":
        number = int(where[-digits:])
        if number < 1 << _NUMBER_BITS:
            return where[:-digits], number
    return where, 0
