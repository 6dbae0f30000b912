"""Option values and the option groups several commands share, each defined once here.

Every range is checked by the library's own rule (``check_threshold``, ``check_minhash``, ...), so
each command takes the same values with the same message; those rules are imported when a value
is parsed, not when the parser is built, so ``neardup --help`` loads no numeric library.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from neardup import validate
from neardup.cli.output import OUTPUT_FORMATS, TABLE_FORMATS
from neardup.errors import ParamsError

if TYPE_CHECKING:
    from neardup.config import Parameter

_T = TypeVar("_T")


def _integer(text: str) -> int:
    # ASCII only: int() also takes other scripts' digits ("\u0663", full-width "\uff13").
    try:
        if not text.isascii():
            raise ValueError(text)
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def option_type(parse: Callable[[str], _T], check: Callable[[_T], object], name: str) -> Callable[[str], _T]:
    """An argparse ``type``: ``parse`` the text, then ``check`` the value (ParamsError says the range)."""

    def convert(text: str) -> _T:
        value = parse(text)
        try:
            check(value)
        except ParamsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    convert.__name__ = name  # argparse names the type in some messages
    return convert


def _in(name: str, low: float, high: float, *, open_low: bool = False) -> Callable[[float], None]:
    def check(value: float) -> None:
        inside = (low < value if open_low else low <= value) and value <= high
        if not inside:  # NaN is outside every range
            bracket = "(" if open_low else "["
            raise ParamsError(f"{name} must be in {bracket}{low:g}, {high:g}], got {value!r}")

    return check


def _fraction(name: str, *, zero: bool = True) -> Callable[[float], object]:
    return lambda value: validate.fraction(value, name, zero=zero)


def _at_least(low: int) -> Callable[[float], None]:
    def check(value: float) -> None:
        if not value >= low:
            raise ParamsError(f"must be at least {low}, got {value!r}")

    return check


def _threshold(value: float) -> None:
    from neardup.core.tuning import check_threshold

    check_threshold(value)


def _minhash(num_perm: int | None = None, seed: int | None = None) -> None:
    from neardup.core.minhash import DEFAULT_NUM_PERM, DEFAULT_SCHEME, DEFAULT_SEED, check_minhash

    check_minhash(
        DEFAULT_NUM_PERM if num_perm is None else num_perm,
        DEFAULT_SEED if seed is None else seed,
        DEFAULT_SCHEME,
    )


def _k(value: int) -> None:
    from neardup.core.shingle import check_shingling

    check_shingling("char", value)


THRESHOLD = option_type(_number, _threshold, "threshold")
MIN_JACCARD = option_type(_number, _fraction("min_jaccard"), "min_jaccard")
TARGET = option_type(_number, _fraction("target", zero=False), "target")
FLOOR = option_type(_number, _fraction("floor", zero=False), "floor")
WEIGHT = option_type(_number, _in("weight", 0, float("inf")), "weight")
POSITIVE = option_type(_integer, _at_least(1), "positive")
NON_NEGATIVE = option_type(_integer, _at_least(0), "non_negative")
MIN_CONTAINMENT = option_type(_number, _fraction("min_containment", zero=False), "min_containment")
PORT = option_type(_integer, _in("port", 0, 65535), "port")
NUM_PERM = option_type(_integer, lambda n: _minhash(num_perm=n), "num_perm")
SEED = option_type(_integer, lambda n: _minhash(seed=n), "seed")
K = option_type(_integer, _k, "k")
MAX_TEXT_LENGTH = option_type(_integer, validate.max_text_length, "max_text_length")


def _keep(value: str) -> None:
    from neardup.config import check_keep

    check_keep(value)


KEEP = option_type(str, _keep, "keep")


def _recall_target(value: float) -> None:
    from neardup.core.tuning import check_recall_target

    check_recall_target(value)


RECALL_AT_THRESHOLD = option_type(_number, _recall_target, "recall_at_threshold")


def library_default(function: Callable[..., Any], parameter: str) -> Any:
    """The default of one of a library function's parameters, so an option's default is that one."""
    return inspect.signature(function).parameters[parameter].default


# -- groups of options ----------------------------------------------------------------------------


def output_format(p: argparse.ArgumentParser, *, tables: bool = False) -> None:
    """--format of what a command writes to stdout; with ``tables``, parquet too, and --out."""
    if not tables:
        p.add_argument("--format", choices=OUTPUT_FORMATS, default="tsv", help="output format (default tsv)")
        return
    p.add_argument(
        "--format",
        choices=TABLE_FORMATS,
        default="tsv",
        help="output format (default tsv); parquet needs --out and pyarrow (pip install 'neardup[arrow]')",
    )
    p.add_argument("--out", metavar="FILE", help="write to FILE (whole or not at all) instead of stdout")


# How each input format is read, for the help of the commands that read records.
FORMAT_HELP = (
    "input format (default: by name: .jsonl, .ndjson and .json are jsonl; .csv, .tsv; .parquet, .pq; "
    ".arrow, .feather, .ipc, .arrows; else txt). "
    "jsonl: one JSON object a line (a key given twice is refused); "
    'csv: RFC 4180 (quoted fields may hold commas, line breaks and doubled quotes ""); '
    'tsv: tab-separated values without quoting or escapes (a " is an ordinary character, a '
    "field holds no tab or line break); txt: one document a line, its id file:line; "
    "parquet (.parquet, .pq, or a directory of them) and arrow (Arrow IPC files or streams: .arrow, "
    ".feather, .ipc, .arrows): read by record batch, a bad row named by its row group (record batch) "
    "and row, counted from 0; they need pyarrow (pip install 'neardup[arrow]')"
)


def inputs(p: argparse.ArgumentParser, format_option: str = "--format") -> None:
    """Input files, how to read their records, and the longest text they may hold."""
    from neardup.inputs import DIRECTORY_HELP, INPUT_FORMATS
    from neardup.readers import read_records

    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help=f"files (gzip ok), directories, or - for stdin; {DIRECTORY_HELP}",
    )
    p.add_argument(format_option, dest="input_format", choices=INPUT_FORMATS, help=FORMAT_HELP)
    id_field, text_field = (
        library_default(read_records, "id_field"),
        library_default(read_records, "text_field"),
    )
    p.add_argument(
        "--id-field",
        default=id_field,
        metavar="NAME",
        help=f"the field (column) holding each record's id (default {id_field}); an integer id becomes its "
        "decimal text",
    )
    p.add_argument(
        "--text-field",
        default=text_field,
        metavar="NAME",
        help=f"the field (column) holding each record's text (default {text_field})",
    )
    max_text_length(p, "the longest text of a record; add refuses longer ones as bad records")


def max_text_length(p: argparse.ArgumentParser, help_text: str) -> None:
    """--max-text-length: the longest text, which also bounds what reading one record may take."""
    from neardup.text_limits import BYTES_PER_CHARACTER, DEFAULT_MAX_TEXT_LENGTH, record_limit

    p.add_argument(
        "--max-text-length",
        type=MAX_TEXT_LENGTH,
        default=DEFAULT_MAX_TEXT_LENGTH,
        metavar="CHARS",
        help=f"{help_text} (default {DEFAULT_MAX_TEXT_LENGTH:,} characters); reading stops with an error "
        "at a line (a CSV record) longer than the longest record such a text can be in, "
        f"{BYTES_PER_CHARACTER} bytes for each character (a JSON escape) and 1 MiB besides "
        f"({record_limit(DEFAULT_MAX_TEXT_LENGTH) >> 20} MiB by default)",
    )


def min_jaccard(
    p: argparse.ArgumentParser, help_text: str = "lowest similarity, in [0, 1] (default: threshold)"
) -> None:
    """--min-jaccard, checked as every command checks it."""
    p.add_argument("--min-jaccard", type=MIN_JACCARD, help=help_text)


def neighbour_options(p: argparse.ArgumentParser) -> None:
    """--top N, --min-containment C and --within: the questions of a collection made with
    --neighbours (``Index.query``'s k, min_containment and direction)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--top", type=POSITIVE, metavar="N", help="the N nearest stored documents (needs --neighbours)"
    )
    g.add_argument(
        "--min-containment",
        type=MIN_CONTAINMENT,
        metavar="C",
        help="stored documents that contain at least C of the text's shingles (needs --neighbours)",
    )
    p.add_argument(
        "--within", action="store_true", help="with --min-containment: those the text contains at least C of"
    )


def neighbour_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """``Index.query``/``check`` keywords of the options ``neighbour_options`` added."""
    if args.within and args.min_containment is None:
        raise ParamsError("--within goes with --min-containment")
    if args.top is None and args.min_containment is None:
        return {}
    if args.top is not None:
        return {"k": args.top}
    return {"min_containment": args.min_containment, "direction": "within" if args.within else "contains"}


def plot(p: argparse.ArgumentParser, help_text: str) -> None:
    """--plot PNG: a picture beside the rows (needs matplotlib)."""
    p.add_argument("--plot", metavar="PNG", help=help_text)


# The command line's parsing of the creation parameters whose values need more than their type.
_TYPES: dict[str, Callable[[str], Any]] = {
    "threshold": THRESHOLD,
    "num_perm": NUM_PERM,
    "seed": SEED,
    "k": K,
    "keep": KEEP,
    "recall_at_threshold": RECALL_AT_THRESHOLD,
}
_METAVARS = {"num_perm": "N", "keep": "POLICY", "recall_at_threshold": "R"}


def parameter_options(*, new: bool) -> dict[str, dict[str, Any]]:
    """``add_argument`` keywords of each creation parameter (``config.CREATE_PARAMETERS``), by
    name: of ``init`` with ``new`` (the library's defaults), else of ``rebuild`` (only what a
    rebuild can change; None, unchanged, by default)."""
    from neardup.config import CREATE_PARAMETERS

    options: dict[str, dict[str, Any]] = {}
    for param in CREATE_PARAMETERS:
        if new or param.rebuild:
            options[param.name] = _parameter_option(param, new)
    return options


def _parameter_option(param: Parameter, new: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"dest": param.name, "default": param.default if new else None}
    shown = [f"default: {param.unset}" if param.default is None else f"default {param.default}"]
    help_text = param.help
    if param.type is bool:
        shown = [f"default --{'' if param.default else 'no-'}{param.name.replace('_', '-')}"]
        if param.nullable:  # only ever switched on
            spec.update(action="store_const", const=True)
            shown = [f"default: {param.unset}"]
        elif param.rebuild:
            spec["action"] = argparse.BooleanOptionalAction
        else:  # on unless switched off
            spec["action"] = "store_false"
            help_text, shown = f"do not {param.help}", []
    elif param.choices:
        spec["choices"] = param.choices
    else:
        spec["type"] = _TYPES.get(param.name, POSITIVE)
        if allowed := param.range_text():
            shown.insert(0, allowed if allowed.startswith("at least") else f"in {allowed}")
    if param.name in _METAVARS:
        spec["metavar"] = _METAVARS[param.name]
    if not new:
        shown = [text for text in shown if not text.startswith("default")] + ["default: unchanged"]
    spec["help"] = help_text + (f" ({'; '.join(shown)})" if shown else "")
    return spec


def _flag(name: str, spec: dict[str, Any]) -> str:
    off = spec.get("action") == "store_false"
    return f"--{'no-' if off else ''}{name.replace('_', '-')}"


def parameters(p: argparse.ArgumentParser, *, new: bool) -> None:
    """The creation parameters as options: those of ``init`` with ``new``, else of ``rebuild``."""
    for name, spec in parameter_options(new=new).items():
        p.add_argument(_flag(name, spec), **spec)
