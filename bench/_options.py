"""The command-line options the benchmarks share, each defined once with its help: the database
(--db), where the report goes (--out, --out-dir), the corpora (the Debian descriptions with their
ground truth, a make_corpus.py corpus), rounds, the wait for autovacuum, and the parsers of list
and size values."""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import DEBIAN, DEBIAN_TRUTH_NAME, REPO

PAGES = REPO / "docs" / "benchmarks"


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A script's parser, with its docstring, as written, for the description."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_db(ap: argparse.ArgumentParser) -> None:
    """--db: the server to use as it is, in a schema of the run's own (``_common.database``)."""
    ap.add_argument("--db", help="PostgreSQL URL (default: a durable local server made for the run)")


def add_out(ap: argparse.ArgumentParser, page: str | None) -> None:
    """--out: the report's file, by default ``page`` in docs/benchmarks (None: no file unless given)."""
    if page is None:
        ap.add_argument("--out", type=Path, help="also write the report here")
    else:
        ap.add_argument(
            "--out",
            type=Path,
            default=PAGES / page,
            help=f"the report's file (default docs/benchmarks/{page})",
        )


def add_out_dir(ap: argparse.ArgumentParser) -> None:
    """--out-dir: the folder of the report and its plots (default docs/benchmarks)."""
    ap.add_argument(
        "--out-dir",
        type=Path,
        default=PAGES,
        help="folder of the report and its plots (default docs/benchmarks)",
    )


def add_debian(
    ap: argparse.ArgumentParser, *, flag: str = "corpus", truth: bool = False, limit: bool = True
) -> None:
    """The corpus (``flag``: positional, or an option when it starts with --), by default the Debian
    descriptions; --truth, its ground truth (``truth_file``); --limit, its first N documents."""
    what = "JSONL(.gz) of {id, text} (default: the Debian bookworm descriptions)"
    if flag.startswith("--"):
        ap.add_argument(flag, type=Path, default=DEBIAN, help=what)
    else:
        ap.add_argument(flag, nargs="?", type=Path, default=DEBIAN, help=what)
    if truth:
        ap.add_argument(
            "--truth", type=Path, help=f"truth TSV (default: {DEBIAN_TRUTH_NAME} beside the corpus)"
        )
    if limit:
        ap.add_argument("--limit", type=int, help="use only the first N documents (for a quick check)")


def truth_file(args: argparse.Namespace) -> Path:
    """The ground truth of ``add_debian(truth=True)``: --truth, else the Debian truth beside the corpus."""
    return Path(args.truth or args.corpus.parent / DEBIAN_TRUTH_NAME)


def add_synthetic(ap: argparse.ArgumentParser, n: int, *, flag: str = "--corpus", count: str = "--n") -> None:
    """A make_corpus.py corpus (``_common.synthetic_corpus``): the file, used if present (its first
    N documents) and else made there, or made for the run without it; and N, ``n`` by default."""
    ap.add_argument(
        flag,
        type=Path,
        help="make_corpus.py JSONL: used if present, else written there (default: made for the run)",
    )
    ap.add_argument(count, type=int, default=n, help=f"documents of it (default {n:,})")


def add_rounds(ap: argparse.ArgumentParser, default: int, *, flag: str = "--rounds") -> None:
    """How many rounds, the ways compared taking turns in each (``_common.alternated``)."""
    ap.add_argument(
        flag, type=int, default=default, help=f"rounds, the ways compared alternated (default {default})"
    )


def add_settle(ap: argparse.ArgumentParser, default: float) -> None:
    """--settle: how long after a load to wait at most for autovacuum's pass (``_autovacuum``)."""
    ap.add_argument(
        "--settle",
        type=float,
        default=default,
        help=f"seconds after the load to wait at most for autovacuum's first pass (default {default:g})",
    )


def numbers(text: str) -> list[int]:
    """Integers from '100000,1_000_000'."""
    return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]


def fractions(text: str) -> list[float]:
    """Numbers such as thresholds from '0.5,0.7,0.8'."""
    return [float(part) for part in text.split(",") if part.strip()]


def size(text: str) -> int:
    """Bytes from '6G', '512M', '6GB' or a plain number (binary units)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)
