"""Comments and docstrings give reasons: no benchmark or profiler names, no issue numbers and no
timed or measured figures, which go stale in the source and belong in docs/benchmarks/."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"

NARRATIVE = re.compile(
    r"\bbench_\w+|\bbench/\w+|py-spy|\bperf of\b|\bprofil(e|ed|er|ing)\b(?!\.md)"  # benchmarks, profilers
    r"|\bissues? #?\d+|(?<![\w&])#\d+\b"  # issue numbers
    # times and sizes ("0 seconds" is a bound, not a figure)
    r"|\b([1-9][\d,]*|0)(\.\d+)?\s?(ms|µs|us|s|sec|secs|seconds|minutes|[KMGT]i?B)\b(?<!\b0 seconds)"
    r"|\b\d[\d,.]*x\b",  # ratios ("1.7x")
    re.IGNORECASE,
)


def narratives(source: str) -> list[tuple[int, str]]:
    """(line, match) of each narrative in the comments and docstrings of a source text."""
    found = [
        (tok.start[0], m.group(0))
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
        for m in NARRATIVE.finditer(tok.string)
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
        else:
            continue
        # A docstring, and the attribute docstrings after each assignment of a class or module.
        strings = [
            b
            for i, b in enumerate(body)
            if isinstance(b, ast.Expr)
            and isinstance(b.value, ast.Constant)
            and isinstance(b.value.value, str)
            and (i == 0 or isinstance(body[i - 1], ast.Assign | ast.AnnAssign))
        ]
        found += [(s.lineno, m.group(0)) for s in strings for m in NARRATIVE.finditer(s.value.value)]  # type: ignore[attr-defined]
    return sorted(found)


def test_the_scanner_catches_each_kind() -> None:
    source = '''"""Fast (bench_ingest.py): 0.47 s of imports, 1.7x the baseline."""
# py-spy of a 1M check; issue 39's records; see #129; 600 MB for 100,000 texts.
x = 1  # 16 x 8 bands and rows, a 4-byte copy, step 2 of 3, https://host/a#b
'''
    assert sorted(m for _, m in narratives(source)) == sorted(
        ["bench_ingest", "0.47 s", "1.7x", "py-spy", "issue 39", "#129", "600 MB"]
    )


def test_no_comment_or_docstring_tells_a_narrative() -> None:
    offenders = [
        f"{path.relative_to(SOURCE)}:{line}: {match}"
        for path in sorted(SOURCE.rglob("*.py"))
        for line, match in narratives(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
