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
