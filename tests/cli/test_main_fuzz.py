"""Hypothesis runs every command, in-process, with arbitrary option values (in range, out of range,
not numbers at all) and arbitrary input files (any bytes, byte-order marks, UTF-16, invalid UTF-8,
NUL, JSON nested 100,000 deep, a 1 MB line, gzip cut short) against a real PostgreSQL collection.
The law: the exit status is 0, 1 or 2; on 1 standard error is exactly one ``neardup: error:``
line, on 2 it is argparse's usage message; nothing raises (no traceback ever); and on a non-zero
status the collection's stored state is unchanged. ``add`` gets batch sizes above any input's
record count here, so a refused input is one refused batch (smaller batches commit the batches
before a bad record, which test_bad_input checks)."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.cli import main
from tests._state import collection_state

pytestmark = pytest.mark.distributed_variant

COLLECTION = "cli-fuzz"
BOM = b"\xef\xbb\xbf"

# -- option values ----------------------------------------------------------------------------

garbage = st.sampled_from(["", "abc", "1e3", "0x10", "nan", "inf", "-inf", "1_0", "٣", " 5", "--", "-1"])
integers = st.one_of(st.integers(-3, 40), st.sampled_from([0, 1, 64, 65, 8192, 8193, 2**63, -(2**63)]))
numbers = st.one_of(
    st.floats(-2, 3, allow_nan=False).map(lambda x: f"{x:.3g}"), st.sampled_from(["0", "1", "0.5", "1.5"])
)
int_values = st.one_of(integers.map(str), garbage)
float_values = st.one_of(numbers, integers.map(str), garbage)
# Large enough for any generated input to be one batch (see the module docstring).
batch_sizes = st.one_of(st.sampled_from(["1000", "50000"]), st.sampled_from(["0", "-1", "x", "1.5"]))
anything = st.text(max_size=12)  # NUL, lone surrogates, option-like "-x" included


def _value(strategy: st.SearchStrategy[str] | None) -> st.SearchStrategy[str]:
    return st.just("") if strategy is None else strategy


def _options(spec: Mapping[str, st.SearchStrategy[str] | None]) -> st.SearchStrategy[list[str]]:
    """Some of the options in ``spec`` (a flag where the strategy is None), in a random order."""
    names = list(spec)

    def build(chosen: list[str], draw_values: list[str]) -> list[str]:
        argv: list[str] = []
        for name, value in zip(chosen, draw_values, strict=True):
            argv += [name] if spec[name] is None else [name, value]
        return argv

    return st.lists(st.sampled_from(names), unique=True, max_size=4).flatmap(
        lambda chosen: st.tuples(*(_value(spec[n]) for n in chosen)).map(
            lambda values: build(chosen, list(values))
        )
    )


params_spec: dict[str, st.SearchStrategy[str] | None] = {
    "--threshold": float_values,
    "--bands": int_values,
    "--rows": int_values,
    "--num-perm": int_values,
    "--scheme": st.sampled_from(["oph", "classic", "minhash"]),
    "--seed": int_values,
    "--shingle": st.sampled_from(["char", "word", "byte"]),
    "--k": int_values,
    "--unicode-form": st.sampled_from(["NFKC", "NFC", "none", "NFD"]),
    "--case": st.sampled_from(["fold", "lower", "keep", "upper"]),
    "--collapse-whitespace": None,
    "--no-collapse-whitespace": None,
}
formats = st.sampled_from(["tsv", "csv", "jsonl", "json", "xml"])
input_formats = st.sampled_from(["jsonl", "csv", "tsv", "txt", "xml"])

# -- input files ------------------------------------------------------------------------------

json_records = st.lists(
    st.fixed_dictionaries(
        {"id": st.one_of(st.text(max_size=4), st.integers(0, 9)), "text": st.text(max_size=40)}
    ),
    max_size=5,
).map(lambda rs: "".join(json.dumps(r) + "\n" for r in rs).encode())
csv_rows = st.lists(st.tuples(st.text(max_size=4), st.text(max_size=30)), max_size=4).map(
    lambda rows: ("id,text\n" + "".join(f'"{i}","{t}"\n' for i, t in rows)).encode("utf-8", "replace")
)
payloads = st.one_of(
    st.binary(max_size=200),
    json_records,
    csv_rows,
    json_records.map(lambda b: BOM + b),
    csv_rows.map(lambda b: BOM + b),
    json_records.map(lambda b: b.decode().encode("utf-16")),
    json_records.map(lambda b: b.replace(b'"text"', b'"te\x00xt"', 1)),
    json_records.map(lambda b: b + b"\xff\xfe{\n"),
    st.integers(500, 100_000).map(
        lambda n: b'{"id": "deep", "text": "t", "x": ' + b"[" * n + b"]" * n + b"}\n"
    ),
    st.just(b'{"id": "long", "text": "' + b"ab " * 350_000 + b'"}\n'),
    st.just(b'{"id": "n", "text": "t", "x": ' + b"7" * 5000 + b"}\n"),
)


@st.composite
def inputs(draw: st.DrawFn, folder: Path) -> tuple[list[str], bytes]:
    """(paths for the command line, bytes for standard input): files of any bytes, compressed or
    cut short, a directory holding one, a path that does not exist, or ``-``."""
    data = draw(payloads)
    if draw(st.booleans()):
        whole = gzip.compress(data)
        data = whole if draw(st.booleans()) else whole[: len(whole) // 2]
    kind = draw(st.sampled_from(["file", "file", "directory", "missing", "stdin"]))
    suffix = draw(st.sampled_from([".jsonl", ".csv", ".tsv", ".txt", ".jsonl.gz", ""]))
    if kind == "stdin":
        return ["-"], data
    if kind == "missing":
        return [str(folder / "missing" / f"in{suffix}")], b""
    name = f"in-{draw(st.integers(0, 10**9))}"
    if kind == "directory":
        (folder / name).mkdir()
        (folder / name / f"doc{suffix}").write_bytes(data)
        return [str(folder / name)], b""
    (folder / f"{name}{suffix}").write_bytes(data)
    return [str(folder / f"{name}{suffix}")], b""


@st.composite
def output_paths(draw: st.DrawFn, folder: Path) -> str:
    """A path to write: fine, in a missing directory, or a directory."""
    kind = draw(st.sampled_from(["fine", "missing-dir", "a-directory"]))
    if kind == "missing-dir":
        return str(folder / "no-such-dir" / "out")
    if kind == "a-directory":
        return str(folder)
    return str(folder / f"out-{draw(st.integers(0, 10**9))}")


# -- the law ----------------------------------------------------------------------------------


def _run(argv: list[str], stdin: bytes = b"", cwd: Path | None = None) -> tuple[int, str, str]:
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(cwd or "."):
            status = main(argv)
    finally:
        sys.stdin = old
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def law(database_url: str, schema: str, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., None]:
    """Checks the law for one command line (with stdin bytes) on the fuzzed collection, run in a
    folder of its own (``--out -`` and the default ``--rejects`` write there)."""
    cwd = tmp_path_factory.mktemp("fuzz-cwd")
    base = ["--db", database_url, "--schema", schema, "--collection", COLLECTION]
    assert _run([*base, "init", "--threshold", "0.5", "--bands", "64", "--rows", "2"])[0] == 0
    docs = "".join(
        json.dumps({"id": f"d{i}", "text": f"a stored text number {i % 3}"}) + "\n" for i in range(6)
    )
    assert _run([*base, "add", "-"], docs.encode())[0] == 0

    def check(argv: list[str], stdin: bytes = b"", *, global_options: list[str] | None = None) -> None:
        before = collection_state(database_url, schema, COLLECTION).comparable()
        status, out, err = _run([*(base if global_options is None else global_options), *argv], stdin, cwd)
        assert "Traceback" not in err
        assert status in (0, 1, 2), (status, err)
        if status == 1:
            assert err.startswith("neardup: error: "), err
            assert err.count("\n") == 1, err
            assert err.endswith("\n"), err
            assert out == ""
        elif status == 2:
            assert err.startswith("usage: neardup"), err
            assert re.match(r"neardup [a-z]+: error: |neardup: error: ", err.splitlines()[-1]), err
        if status != 0:
            assert collection_state(database_url, schema, COLLECTION).comparable() == before, argv

    return check


# A third of the profile's examples: 33 by default (this file then runs in ~30 s), 666 thorough.
FUZZ = settings(
    max_examples=(settings.default.max_examples if settings.default else 100) // 3,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(data=st.data())
def test_add_and_dedup_with_any_input_and_options(
    law: Callable[..., None], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("fuzz-input")
    paths, stdin = data.draw(inputs(folder))
    command = data.draw(st.sampled_from(["add", "dedup"]))
    options = data.draw(
        _options(
            {
                "--format": input_formats,
                "--id-field": st.sampled_from(["id", "text", "key", ""]),
                "--text-field": st.sampled_from(["text", "id", "body"]),
                **(
                    {
                        "--batch-size": batch_sizes,
                        "--skip-bad": None,
                        "--rejects": output_paths(folder),
                        "--max-text-length": int_values,
                    }
                    if command == "add"
                    else {}
                ),
            }
        )
    )
    if command == "dedup":
        options += ["--out", data.draw(st.one_of(output_paths(folder), st.sampled_from(paths)))]
    law([command, *paths, *options], stdin)


@FUZZ
@given(data=st.data())
def test_query_with_any_text_file_and_options(
    law: Callable[..., None], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("fuzz-query")
    paths, stdin = data.draw(inputs(folder))
    source = data.draw(
        st.sampled_from(
            [["--text", data.draw(anything)], ["--file", paths[0]], ["-"], ["--file", str(folder)], []]
        )
    )
    spec = {"--min-jaccard": float_values, "--limit": int_values, "--format": formats}
    law(["query", *source, *data.draw(_options(spec))], stdin)


@FUZZ
@given(data=st.data())
def test_every_other_command_with_any_options(
    law: Callable[..., None], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("fuzz-options")
    command = data.draw(
        st.sampled_from(["init", "rebuild", "pairs", "clusters", "remove", "stats", "eval", "tune", "db"])
    )
    spec: dict[str, st.SearchStrategy[str] | None] = {"--format": formats}
    head: list[str] = [command]
    if command in ("init", "rebuild"):
        spec.update(params_spec)
        spec.update({"--exist-ok": None, "--no-store-text": None} if command == "init" else {})
        spec.update({"--batch-size": int_values} if command == "rebuild" else {})
    elif command == "pairs":
        spec["--min-jaccard"] = float_values
    elif command == "remove":
        head += data.draw(st.lists(st.one_of(anything, st.sampled_from(["d0", "d1"])), max_size=3))
    elif command == "eval":
        spec.update({"--sample": int_values, "--seed": int_values, "--floor": float_values})
        spec["--plot"] = output_paths(folder).map(lambda p: p + ".png")
    elif command == "tune":
        spec.update({"--threshold": float_values, "--num-perm": int_values})
        spec.update({"--fp-weight": float_values, "--fn-weight": float_values})
        spec["--plot"] = st.sampled_from([str(folder / "missing" / "s.png"), str(folder)])
    elif command == "db":
        head.append(data.draw(st.sampled_from(["current", "upgrade", "sideways"])))
    law([*head, *data.draw(_options(spec))])


@settings(max_examples=8)
@given(
    where=st.lists(
        st.sampled_from(["--db", "--collection", "--schema", "--bogus"]), unique=True, min_size=1, max_size=2
    ),
    value=st.sampled_from(["foo", "mysql://x", "bad/name", "Bad Schema", "nope-1"]),  # not "": no --db
    command=st.sampled_from(["stats", "pairs", "clusters"]),
)
def test_any_global_option_value_ends_in_one_line(
    law: Callable[..., None], database_url: str, schema: str, where: list[str], value: str, command: str
) -> None:
    given_options = {"--db": database_url, "--schema": schema, "--collection": COLLECTION}
    for option in where:
        given_options[option] = value
    law([command], global_options=[x for kv in given_options.items() for x in kv])
