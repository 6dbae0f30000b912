"""Tokens and session secrets: how they are made, hashed and ranked (standard library only)."""

from __future__ import annotations

import hashlib
import secrets
from typing import Literal

Access = Literal["read", "write", "admin"]
# Each scope can do everything the ones before it can.
ACCESS_LEVELS: tuple[Access, ...] = ("read", "write", "admin")
# A recognisable prefix, so a leaked token is easy to find with a secret scanner.
TOKEN_PREFIX = "nd_"
# Characters of the secret shown by `neardup token list` (enough to tell tokens apart, useless to guess).
SHOWN = 8


def new_secret() -> str:
    """A fresh token: the prefix and 256 random bits, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(secret: str) -> bytes:
    """The SHA-256 of a token or session secret: what the database stores and looks up."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def shown_prefix(secret: str) -> str:
    """The part of a token that ``token list`` shows and ``token revoke`` accepts."""
    return secret[: len(TOKEN_PREFIX) + SHOWN]


def allows(granted: str, needed: str) -> bool:
    """Whether a token of scope ``granted`` may do what needs ``needed``."""
    return ACCESS_LEVELS.index(granted) >= ACCESS_LEVELS.index(needed)


def new_session() -> tuple[str, str]:
    """A fresh review session: its cookie secret and its CSRF value."""
    return secrets.token_urlsafe(32), secrets.token_urlsafe(16)
