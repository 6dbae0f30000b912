"""Each face words an error's hint in its own terms: the Python API names keywords and methods, the
command line names options and commands, and storage, which every face shares, names neither."""

from __future__ import annotations

import ast
import pickle
import re
import subprocess
from pathlib import Path

import pytest

from neardup import Database, Index
from neardup.cli import hints
from neardup.cli.command import COMMANDS
from neardup.cli.main import build_parser
from neardup.errors import REMEDIES, CollectionExistsError, Hint, ParamsError, SchemaError
from neardup.service import problems
from tests.conftest import neardup_argv

STORAGE = Path(__file__).resolve().parents[1] / "src" / "neardup" / "storage"


def test_the_python_api_says_the_keyword(database_url: str, schema: str, make_index: object) -> None:
    with Index.create(database_url, "hint-python", schema=schema, exist_ok=True):
        pass
    with pytest.raises(CollectionExistsError) as refused:
        Index.create(database_url, "hint-python", schema=schema)
    message = str(refused.value)
    assert message == "collection 'hint-python' exists already; open it, or reuse it with exist_ok=True"
    assert "--exist-ok" not in message


def test_the_command_line_says_the_option(database_url: str, schema: str) -> None:
    argv = neardup_argv(database_url, schema, "hint-cli", "init")
    assert subprocess.run(argv, capture_output=True, text=True, timeout=120).returncode in (0, 1)
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert again.returncode == 1
    assert "neardup: error: collection 'hint-cli' exists already; open it, or reuse it with --exist-ok" in (
        again.stderr
    )
    assert "exist_ok" not in again.stderr


def test_a_remedy_is_a_method_in_python_and_a_command_on_the_command_line() -> None:
    error = SchemaError("schema 'x' is at revision none", hint=Hint("migrate it with", remedy="upgrade"))
    assert str(error) == "schema 'x' is at revision none; migrate it with Database(url).upgrade()"
    assert hints.message(error) == "schema 'x' is at revision none; migrate it with `neardup db upgrade`"
    assert problems.words(error.hint) == "migrate it with the operator's `neardup db upgrade`"  # type: ignore[arg-type]
    valued = Hint("restore it with", "schema", "kept")
    assert hints.words(valued) == "restore it with --schema kept"
    assert "schema='kept'" in str(SchemaError("wrong schema", hint=valued))


def test_every_remedy_has_words_on_every_face() -> None:
    assert set(REMEDIES) == set(hints.REMEDIES) == set(problems.REMEDIES)


def test_an_error_keeps_its_hint_across_processes() -> None:
    error = CollectionExistsError("exists", hint=Hint("reuse it with", "exist_ok"))
    copy = pickle.loads(pickle.dumps(error))
    assert copy.hint == error.hint
    assert hints.message(copy) == "exists; reuse it with --exist-ok"


def test_a_missing_schema_is_worded_by_each_face(database_url: str, fresh_schema: str) -> None:
    with Database(database_url, fresh_schema) as db, pytest.raises(SchemaError) as refused:
        db.require_current()
    assert "Database(url).upgrade()" in str(refused.value)
    assert "`neardup db upgrade`" in hints.message(refused.value)


def _cli_words() -> tuple[set[str], set[str]]:
    """The command line's command names and long options."""
    options: set[str] = set()
    parser = build_parser(None)
    stack = [parser]
    while stack:
        p = stack.pop()
        for action in p._actions:
            options.update(o for o in action.option_strings if o.startswith("--") and o != "--help")
            for sub in getattr(action, "choices", None) or {}:
                if isinstance(action.choices, dict):
                    stack.append(action.choices[sub])
    commands = {name.split()[0] for name in COMMANDS}
    return commands, options


def test_storage_names_no_command_line_command_or_option() -> None:
    commands, options = _cli_words()
    assert {"init", "follow", "backup"} <= commands
    assert "--exist-ok" in options
    # A command as advice is quoted or run ("a neardup backup" is a file, not the command).
    names = "|".join(map(re.escape, sorted(commands)))
    command = re.compile(rf"(`|\brun )neardup ({names})\b")
    # An option in prose (an argv element of a PostgreSQL tool starts with its dashes instead).
    option = re.compile(r"(?<=[\s(`])({})\b(?!=)".format("|".join(map(re.escape, sorted(options)))))
    found = []
    for path in sorted(STORAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for pattern in (command, option):
                    if m := pattern.search(node.value):
                        found.append(f"{path.name}:{node.lineno}: {m.group(0)!r}")
    assert found == []


def test_the_command_line_names_no_python_keyword() -> None:
    cli = STORAGE.parent / "cli"
    keyword = re.compile(r"\b[a-z_]+=(True|False|None)\b|\b(Index|Database)\.\w+\(")
    found = [
        f"{path.name}:{node.lineno}: {m.group(0)!r}"
        for path in sorted(cli.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (m := keyword.search(node.value))
    ]
    assert found == []


def test_shards_without_distributed_names_the_switch_in_each_face(database_url: str, schema: str) -> None:
    with pytest.raises(ParamsError) as refused:
        Index.create(database_url, "hint-shards", schema=schema, shards=4)
    assert str(refused.value).endswith("make one with distributed=True")
    argv = neardup_argv(database_url, schema, "hint-shards", "init", "--shards", "4")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().endswith("make one with --distributed")
    assert "distributed=" not in done.stderr
