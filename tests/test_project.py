"""The project's own promises: the README's commands are the ones CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_command(marker: str) -> str:
    """The shell command in the fenced block that follows ``<!-- marker -->`` in the README."""
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- {marker} -->\s*```sh\n(.+?)\n```", text, re.DOTALL)
    assert match, f"README.md has no ```sh block after <!-- {marker} -->"
    return match.group(1).strip()


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_command("test-command") in ci_lines


def test_readme_run_command_uses_files_that_exist() -> None:
    command = readme_command("run-command")
    for path in re.findall(r"[\w./-]+\.(?:py|jsonl)", command):
        assert (ROOT / path).is_file(), path
