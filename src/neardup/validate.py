"""The checks of arguments that cross from a caller into neardup, written once.

``Index``, ``Database``, the command line and the service take their arguments through these, so
that one kind of value gets one rule and one message wherever it is given; storage is handed
values already checked. Each returns the value in its plain Python type, or raises ParamsError
(InputError for a text) naming the argument. ``bool`` is never taken for a number: ``True`` is an
``int`` to Python, and a flag passed where a count belongs is a mistake to report, not a 1.
"""

from __future__ import annotations

from numbers import Integral, Real

from neardup.errors import InputError, ParamsError

# A changes feed's longest retention, about 114 years: longer is no retention at all (leave it out),
# and a far larger number would overflow the interval it is stored as.
MAX_RETENTION_HOURS = 1_000_000

# A cluster id is a PostgreSQL bigint that neardup never makes negative.
CLUSTER_IDS = 2**63


def _whole(value: object) -> int | None:
    """``value`` as an int if it is a whole number (a numpy integer too), else None."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        return None
    return int(value)


def positive_int(value: object, name: str) -> int:
    """``value`` as a count of at least 1."""
    whole = _whole(value)
    if whole is None or whole < 1:
        raise ParamsError(f"{name} must be a positive integer, got {value!r}")
    return whole


def max_text_length(value: object) -> int:
    """``value`` as the longest text a reader takes: a count from 1 to the longest text
    PostgreSQL can store (``text_limits.LONGEST_TEXT``)."""
    from neardup.text_limits import LONGEST_TEXT

    return whole_in(value, "max_text_length", 1, LONGEST_TEXT, shown=f"[1, {LONGEST_TEXT:,}]")


def non_negative_int(value: object, name: str) -> int:
    """``value`` as a count of at least 0."""
    whole = _whole(value)
    if whole is None or whole < 0:
        raise ParamsError(f"{name} must be a non-negative integer, got {value!r}")
    return whole


def whole_in(value: object, name: str, low: int, high: int, *, shown: str | None = None) -> int:
    """``value`` as a whole number in [low, high] (``shown``: how the message writes the range)."""
    whole = _whole(value)
    if whole is None or not low <= whole <= high:
        raise ParamsError(f"{name} must be an integer in {shown or f'[{low}, {high}]'}, got {value!r}")
    return whole


def fraction(value: object, name: str, *, zero: bool = True, one: bool = True) -> float:
    """``value`` as a float in [0, 1]; without ``zero`` 0 is outside, without ``one`` 1 is."""
    share = float(value) if isinstance(value, Real) and not isinstance(value, bool) else None
    # Written so that NaN fails every comparison, and so the check.
    above = share is not None and (share >= 0.0 if zero else share > 0.0)
    if share is None or not above or not (share <= 1.0 if one else share < 1.0):
        span = f"{'[' if zero else '('}0, 1{']' if one else ')'}"
        raise ParamsError(f"{name} must be in {span}, got {value!r}")
    return share


def flag(value: object, name: str) -> bool:
    """``value`` as a flag: only ``True`` or ``False`` (a 0 or 1 is not one)."""
    if not isinstance(value, bool):
        raise ParamsError(f"{name} must be True or False, got {value!r}")
    return value


def limit(value: object, name: str = "limit") -> int | None:
    """``value`` as a most number of answers (None: every one)."""
    return None if value is None else non_negative_int(value, name)


def jobs(value: object) -> int:
    """``value`` as a number of writer processes."""
    return positive_int(value, "jobs")


def batch_size(value: object, *, whole: bool = False) -> int | None:
    """``value`` as a number of records per round (None: all in one, where ``whole`` allows it)."""
    if value is None and whole:
        return None
    return positive_int(value, "batch_size")


def cluster_id(value: object, name: str = "cluster_id") -> int:
    """``value`` as a cluster id: a whole number in [0, 2**63)."""
    whole = _whole(value)
    if whole is None or not 0 <= whole < CLUSTER_IDS:
        raise ParamsError(f"{name} must be a cluster id (a whole number in [0, 2**63)), got {value!r}")
    return whole


def retention_hours(hours: object, on: object) -> int | None:
    """A changes feed's retention in whole hours (None: keep every change), given only with the feed on."""
    if hours is None:
        return None
    kept = whole_in(
        hours,
        "changes_retention_hours",
        1,
        MAX_RETENTION_HOURS,
        shown=f"[1, {MAX_RETENTION_HOURS}] hours (leave it out to keep every change)",
    )
    if not on:
        raise ParamsError("changes_retention_hours is the changes feed's: give it with changes_feed")
    return kept


def feed_request(since: object, limit: object, timeout: object) -> tuple[int, int, float]:
    """A request of the changes feed: since >= 0, limit >= 1, timeout a finite number of seconds >= 0."""
    first = non_negative_int(since, "since")
    most = positive_int(limit, "limit")
    wait = float(timeout) if isinstance(timeout, Real) and not isinstance(timeout, bool) else None
    if wait is None or not 0.0 <= wait < float("inf"):
        raise ParamsError(f"timeout must be a number of seconds, at least 0, got {timeout!r}")
    return first, most, wait


def text(value: object, what: str = "query text") -> str:
    """``value`` as a text to sketch; InputError (the value is the caller's data) otherwise."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    return value
