"""One error hierarchy for neardup: catch ``NeardupError`` to catch them all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Hint:
    """What the caller can do about an error, said once where it is raised and worded by each face
    in its own terms: the Python API (``str`` of the error), the command line and the HTTP service.

    ``keyword`` is an argument of the call that failed, to be given ``value``: ``exist_ok=True`` in
    Python, ``--exist-ok`` on the command line, ``"exist_ok": true`` in a request body. ``remedy``
    is a step outside the call, a key of ``REMEDIES`` (and of each face's table of its words),
    formatted with ``fields``. ``advice`` is the plain words that lead to either.
    """

    advice: str
    keyword: str | None = None
    value: object = True
    remedy: str | None = None
    fields: tuple[tuple[str, str], ...] = ()


# Each remedy in the Python API's words; the command line and the service keep their own.
REMEDIES: dict[str, str] = {
    "upgrade": "Database(url).upgrade()",
    "rebuild_neighbours": "index.rebuild(neighbours=True)",
    "changes_feed": "Database(url).changes_feed({name!r}, True)",
    "follow_install": "neardup.follower.install(source) with the same source",
    "carry_across": (
        "with PostgreSQL {made} installed Database(url).backup(FILE) for each schema, move {data_dir} "
        "aside, then with PostgreSQL {have} Database(url).restore(FILE) and Database(url).upgrade()"
    ),
}


def python_words(hint: Hint) -> str:
    """``hint`` as a Python caller reads it."""
    if hint.remedy is not None:
        return f"{hint.advice} {REMEDIES[hint.remedy].format(**dict(hint.fields))}"
    return f"{hint.advice} {hint.keyword}={hint.value!r}"


class NeardupError(Exception):
    """Base class of every error neardup raises on purpose. ``hint``, if any, is worded by the face
    that reports the error (``message`` is the part every face shares); ``str`` gives Python's words.
    """

    def __init__(self, *args: object, hint: Hint | None = None) -> None:
        super().__init__(*args)
        self.hint = hint

    @property
    def message(self) -> str:
        """The error without its hint."""
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()

    def worded(self, words: Callable[[Hint], str]) -> str:
        """The error with its hint in the words ``words`` gives (``; `` between the two)."""
        return self.message if self.hint is None else f"{self.message}; {words(self.hint)}"

    def __str__(self) -> str:
        return self.worded(python_words)


class ParamsError(NeardupError, ValueError):
    """A parameter is out of range or inconsistent with another one."""


class InputError(NeardupError, ValueError):
    """A document or record cannot be used as given; the message says which one and why."""


class ParamsMismatchError(NeardupError, ValueError):
    """Stored parameters differ from the ones a caller asked for."""


class TextNotStoredError(NeardupError, ValueError):
    """The operation needs the stored texts, and the collection was created without them."""


class ServerError(NeardupError, RuntimeError):
    """A local PostgreSQL server could not be found, initialised, started or stopped."""


class DatabaseError(NeardupError, RuntimeError):
    """The database refused or failed an operation; the message says which and why."""


class DatabaseConnectionError(DatabaseError):
    """The database could not be reached, or the connection broke."""


class SchemaError(DatabaseError):
    """The neardup schema is missing, behind or ahead of this version of neardup."""


class DistributedError(NeardupError, RuntimeError):
    """A distributed (Citus) collection cannot be made or used here; the message says what is missing."""


class CollectionNotFoundError(NeardupError, LookupError):
    """No collection of that name exists."""


class ClusterNotFoundError(NeardupError, LookupError):
    """No cluster of that id exists in the collection."""


class CollectionExistsError(NeardupError, ValueError):
    """A collection of that name exists already."""


class ChangesFeedError(NeardupError, LookupError):
    """The collection keeps no changes feed (turning one on makes it keep one)."""


class ChangesGoneError(ChangesFeedError):
    """Changes after the ``since`` asked are no longer kept (the feed's retention dropped them)."""


class InternalError(NeardupError, RuntimeError):
    """An invariant of neardup's own code does not hold: a bug, to be reported with the message."""


class UnicodeVersionWarning(UserWarning):
    """The collection was built under another Unicode database; normalisation may differ slightly."""


class OutputError(NeardupError, OSError):
    """A result could not be written where it was asked for; the message names the file."""
