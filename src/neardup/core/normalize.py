"""Text normalisation: Unicode form, then case, then whitespace; and batch encoding to code points."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from neardup import validate
from neardup.core import _kernels
from neardup.core.ragged import Ragged
from neardup.errors import InputError, ParamsError

UnicodeForm = Literal["NFKC", "NFC", "none"]
CaseMode = Literal["fold", "lower", "keep"]

UNICODE_FORMS: tuple[UnicodeForm, ...] = ("NFKC", "NFC", "none")
CASE_MODES: tuple[CaseMode, ...] = ("fold", "lower", "keep")

# The code points Python's str.split() treats as whitespace (Unicode 14/15: White_Space minus
# U+180E, plus the C0 separators U+001C..U+001F). Frozen here, not read from unicodedata, so
# that a Python upgrade cannot silently move word and shingle boundaries of a stored index.
WHITESPACE: tuple[int, ...] = (
    *range(0x09, 0x0E), *range(0x1C, 0x21), 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
)  # fmt: skip
_IS_SPACE = np.zeros(max(WHITESPACE) + 1, dtype=np.bool_)
_IS_SPACE[list(WHITESPACE)] = True
_SPLIT_CHARS = "".join(map(chr, WHITESPACE))


@dataclass(frozen=True)
class Normalization:
    """How text is normalised before shingling: Unicode form, then case, then whitespace."""

    unicode_form: UnicodeForm = "NFKC"
    case: CaseMode = "fold"
    collapse_whitespace: bool = True

    def __post_init__(self) -> None:
        if self.unicode_form not in UNICODE_FORMS:
            raise ParamsError(f"unicode_form must be one of {UNICODE_FORMS}, got {self.unicode_form!r}")
        if self.case not in CASE_MODES:
            raise ParamsError(f"case must be one of {CASE_MODES}, got {self.case!r}")
        validate.flag(self.collapse_whitespace, "collapse_whitespace")


DEFAULT_NORMALIZATION = Normalization()


def _form_and_case(text: str, norm: Normalization) -> str:
    if norm.unicode_form != "none":
        text = unicodedata.normalize(norm.unicode_form, text)
    if norm.case == "fold":
        return text.casefold()
    if norm.case == "lower":
        return text.lower()
    return text


def split_words(text: str) -> list[str]:
    """Words of a text: maximal runs of non-whitespace (the frozen WHITESPACE set)."""
    for ch in _SPLIT_CHARS[1:]:
        text = text.replace(ch, _SPLIT_CHARS[0])
    return [w for w in text.split(_SPLIT_CHARS[0]) if w]


def normalize(text: str, normalization: Normalization = DEFAULT_NORMALIZATION) -> str:
    """One normalised text (the reference the batch path must equal)."""
    text = _form_and_case(text, normalization)
    if normalization.collapse_whitespace:
        return " ".join(split_words(text))
    return text


def encode_batch(texts: Sequence[str], normalization: Normalization = DEFAULT_NORMALIZATION) -> Ragged:
    """Normalised code points of many texts (uint8 when the batch is ASCII, else uint32: the same
    values either way)."""
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"text {i}: expected str, got {type(text).__name__}")
    joined = "".join(texts)
    if joined.isascii():
        # NFKC and NFC leave ASCII as it is, and folding or lowering its case maps A-Z to a-z
        # only: done on the bytes of the whole batch, with no per-text Python work.
        prepared: Sequence[str] = texts
        data = joined.encode("ascii")
        # bytes.lower() maps A-Z to a-z and nothing else: one C loop, faster than a numpy table lookup
        # and with no temporary arrays.
        cps: np.ndarray = np.frombuffer(data if normalization.case == "keep" else data.lower(), np.uint8)
    else:
        prepared = [_form_and_case(t, normalization) for t in texts]
        # surrogatepass: a lone surrogate (from surrogateescape decoding, say) is a code point too.
        cps = np.frombuffer("".join(prepared).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    offsets = np.zeros(len(prepared) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, prepared), dtype=np.int64, count=len(prepared)), out=offsets[1:])
    if normalization.collapse_whitespace:
        cps, offsets = _kernels.collapse_whitespace(cps, offsets, _IS_SPACE)
    return Ragged(cps, offsets)


def is_space_table() -> np.ndarray:
    """Lookup table: ``table[c]`` is True when code point ``c`` is whitespace (c beyond it is not)."""
    return _IS_SPACE
