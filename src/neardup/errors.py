"""One error hierarchy for neardup: catch ``NeardupError`` to catch them all."""

from __future__ import annotations


class NeardupError(Exception):
    """Base class of every error neardup raises on purpose."""


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
    """The collection keeps no changes feed (``neardup changes-feed on`` turns one on)."""


class ChangesGoneError(ChangesFeedError):
    """Changes after the ``since`` asked are no longer kept (the feed's retention dropped them)."""


class InternalError(NeardupError, RuntimeError):
    """An invariant of neardup's own code does not hold: a bug, to be reported with the message."""


class UnicodeVersionWarning(UserWarning):
    """The collection was built under another Unicode database; normalisation may differ slightly."""


class OutputError(NeardupError, OSError):
    """A result could not be written where it was asked for; the message names the file."""
