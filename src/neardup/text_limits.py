"""How long a text may be, and so how much reading one record or one whole file may take: the
bounds the input readers enforce and the command line's options describe (a module of its own, so
that describing them loads no reader)."""

from __future__ import annotations

# A UTF-8 byte-order mark (what Windows tools write), skipped at the start of a file.
UTF8_BOM = b"\xef\xbb\xbf"
# A longer "document" is almost always a dump or a concatenation mistaken for one; its shingles
# alone take 4 bytes a character in memory. Real ones get through with --max-text-length.
DEFAULT_MAX_TEXT_LENGTH = 10_000_000
# Bytes one character of a text can take in a line: 12 as a JSON escape of a character beyond
# U+FFFF (a surrogate pair, "\ud83d\ude00"), which json.dumps writes by default.
BYTES_PER_CHARACTER = 12
# Room in a record beside its text: the id, the other fields, the format's punctuation.
RECORD_FRAMING = 1 << 20
# The longest text there can be: PostgreSQL keeps a text value of under a gigabyte, and a character
# takes a byte at least. A longer --max-text-length could only overflow the readers' bounds.
LONGEST_TEXT = (1 << 30) - 1
# Bytes of a UTF-8 character, at most: the bound of a whole file read as one text.
UTF8_MAX_BYTES = 4


def record_limit(max_text_length: int) -> int:
    """The most bytes a line (a CSV record) may take when a text may have ``max_text_length``
    characters: longer, no valid record fits in it, and reading it whole could take any memory."""
    return BYTES_PER_CHARACTER * max_text_length + RECORD_FRAMING


def text_limit(max_text_length: int) -> int:
    """The most bytes of a file read whole as one text of at most ``max_text_length`` characters."""
    return UTF8_MAX_BYTES * max_text_length + len(UTF8_BOM)
