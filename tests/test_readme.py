"""The README's shell examples, word for word, on ``examples/``: every ``neardup`` command in them
runs and prints what a reader is told it prints (a listing prints rows, not only its header; an
example that shows its output, without "...", shows exactly what it prints)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Commands of the README that run elsewhere, and why: each is a process that does not end, or
# needs what only a deployment has.
ELSEWHERE = {
    "serve": "a server that runs until stopped (tests/service starts it)",
    "follow": "needs the application's database and table (tests/test_follower.py)",
    "--db": "names a deployment the reader has (a Citus coordinator, another server): these tests set "
    "NEARDUP_DATABASE_URL instead (tests/test_distributed.py runs the distributed commands on Citus)",
}
# Made-up values a reader replaces: a token's prefix that no database has.
MADE_UP = ("nd_Xf3k9aQe",)
# Listings: what they print is rows under a header.
LISTINGS = {"query", "pairs", "clusters", "check", "changes", "collections", "labels", "tune"}


@dataclass
class Example:
    """One command of a README block and the output lines the README shows under it."""

    line: str
    shown: list[str]


def examples() -> list[Example]:
    """Every ``neardup`` command of the README's ``sh`` blocks, in order, with the comment lines
    right under it (its output, as the README shows it)."""
    text = (ROOT / "README.md").read_text()
    # The run command first, as a fresh clone runs it: its neardup steps, after the install.
    run = re.search(r"<!-- run-command -->\s*```sh\n(.+?)\n```", text, re.DOTALL)
    assert run, "README.md has no run command"
    found = [
        Example(step.strip().removeprefix(".venv/bin/"), [])
        for step in run.group(1).split("&&")
        if step.strip().startswith(".venv/bin/neardup ")
    ]
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        for raw in block.replace("\\\n", " ").splitlines():
            if raw.startswith("neardup "):
                found.append(Example(raw, []))
            elif raw.startswith("# ") and found and found[-1].line in block:
                found[-1].shown.append(raw[2:])
    return found


def test_the_readme_has_examples_of_the_commands_a_newcomer_starts_with() -> None:
    from neardup.cli.main import command_named

    named = {command_named(shlex.split(e.line, comments=True)[1:]) for e in examples()}
    assert {
        "init",
        "add",
        "pairs",
        "clusters",
        "query",
        "check",
        "dedup",
        "changes",
        "tune",
        "token",
    } <= named


def test_every_readme_example_runs_on_the_examples_and_prints_what_it_says(
    database_url: str, fresh_schema: str, tmp_path: Path
) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {**os.environ, "NEARDUP_DATABASE_URL": database_url}
    ran = 0
    for example in examples():
        words = shlex.split(example.line, comments=True)
        if any(name in words for name in ELSEWHERE) or any(m in example.line for m in MADE_UP):
            continue
        argv = [sys.executable, "-m", "neardup", "--schema", fresh_schema, *words[1:]]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{example.line}\n{done.stderr}"
        ran += 1
        lines = done.stdout.splitlines()
        if "--out" in words:
            assert (tmp_path / words[words.index("--out") + 1]).stat().st_size > 0, example.line
        elif set(words) & LISTINGS:
            tabular = not ({"jsonl", "json"} & set(words))
            assert len(lines) >= (2 if tabular else 1), f"{example.line} printed only:\n{done.stdout}"
        if example.shown and not any("..." in s for s in example.shown):
            assert lines == example.shown, example.line
    assert ran >= 25


@pytest.mark.parametrize("script", ["quickstart.py", "archive.py"])
def test_the_example_scripts_run_and_say_what_is_true(database_url: str, script: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "NEARDUP_DATABASE_URL": database_url.replace("postgresql+psycopg://", "postgresql://"),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if script == "archive.py":
        # Under keep "first" the earliest inserted document is kept: ap-001, inserted before afp-09.
        assert "cluster 1: afp-09, ap-001, ap-001-repost, rt-017; keeps ap-001" in done.stdout
        assert "first id represents" not in done.stdout


def test_the_test_section_says_what_the_optional_tests_need_and_the_debian_test_looks_only_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests import test_debian

    section = (ROOT / "README.md").read_text().split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    section = " ".join(section.split())
    assert "Debian's Chromium at `/usr/bin/chromium` (`apt-get install -y chromium`)" in section
    assert "from `NEARDUP_DATA_DIR`, else from `../shared/data/` beside the checkout" in section
    monkeypatch.setenv("NEARDUP_DATA_DIR", str(tmp_path))
    assert test_debian.data_dir() == tmp_path  # set: there and nowhere else
    monkeypatch.delenv("NEARDUP_DATA_DIR")
    assert test_debian.data_dir() == ROOT.parent / "shared" / "data"
    assert "/work/" not in (ROOT / "tests" / "test_debian.py").read_text()
