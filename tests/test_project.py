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


def test_the_readme_stays_a_ten_minute_read() -> None:
    # Details live in docs/, each with a line and a link in the README.
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 450, f"README.md has {lines} lines; move a section's details to docs/"


def test_docs_benchmarks_keeps_one_current_page_per_topic() -> None:
    files = [p.name for p in (ROOT / "docs" / "benchmarks").iterdir() if p.is_file()]
    assert len(files) <= 25, sorted(files)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", path.read_text())
    return {_anchor(h) for h in re.findall(r"(?m)^#+ (.+)$", text)}


def test_every_local_link_of_the_readme_and_docs_leads_somewhere() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"(?ms)^```.*?^```", "", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken
