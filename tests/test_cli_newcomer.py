"""A newcomer's first hour with the command line: options where they type them, mistakes named
with their fix, destructive commands that say what they delete, reports a program can read."""

from __future__ import annotations

import json

import pytest

from neardup.cli import main
from neardup.credentials import digest
from neardup.database import Database


def test_global_options_work_after_the_command_too(
    database_url: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--db", database_url, "--schema", schema]
    # As the README's changes feed example writes them: after the command.
    assert main(["init", "--collection", "after-the-command", "--changes-feed", *where]) == 0
    capsys.readouterr()
    assert main(["changes", "--collection", "after-the-command", "--since", "0", *where]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["seq\tat\tkind\tid\tid_a\tid_b\tjaccard\tcluster\tclusters"]
    with Database(database_url, schema) as db:
        assert "after-the-command" in {c.name for c in db.collections(counts=False)}
    # Given on both sides, the one after the command counts; left out after it, the one before.
    assert (
        main(
            [
                *where,
                "--collection",
                "nowhere",
                "stats",
                "--format",
                "json",
                "--collection",
                "after-the-command",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["collection"] == "after-the-command"
    assert main(["--collection", "after-the-command", "stats", "--format", "json", *where]) == 0
    assert json.loads(capsys.readouterr().out)["changes_feed"] is True
    # token create --collection keeps its own meaning: the collection the token is limited to.
    assert main(["token", "create", "--scope", "read", "--collection", "after-the-command", *where]) == 0
    secret = capsys.readouterr().out.splitlines()[-1]
    with Database(database_url, schema) as db:
        found = db.tokens.lookup(digest(secret))
    assert found is not None
    assert found.collection == "after-the-command"


@pytest.mark.parametrize(
    ("argv", "usage", "meant"),
    [
        (["add", "x.jsonl", "--batchsize", "10"], "usage: neardup add", "--batch-size"),
        (["query", "--txt", "storms"], "usage: neardup query", "--text"),
        (["pairs", "--min-jacard", "0.9"], "usage: neardup pairs", "--min-jaccard"),
        (["add", "x.jsonl", "--max-length", "5"], "usage: neardup add", "--max-text-length"),
        (["changes", "--colection", "news"], "usage: neardup changes", "--collection"),
        (["init", "--treshold=0.9"], "usage: neardup init", "--threshold"),
    ],
)
def test_a_mistyped_option_gives_the_commands_usage_and_its_closest_option(
    argv: list[str], usage: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(usage)
    assert err.rstrip().endswith(f"(did you mean {meant}?)")


def test_an_option_close_to_none_is_named_without_a_guess(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--zzzzzz"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: neardup stats")
    assert err.rstrip().endswith("unrecognized option --zzzzzz")
    assert main(["stats", "extra", "words"]) == 2
    assert capsys.readouterr().err.startswith("usage: neardup stats")  # the command's usage, not the top one
