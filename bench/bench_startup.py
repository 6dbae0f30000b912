"""Start-up: a warm ``neardup query`` as its user runs it, against importing numpy and psycopg.

Run it from a clone where the README's run command has run (its venv, its embedded server with the
examples added), as the user who ran it. Each round runs, in turn (the order flipped every other
round), ``neardup query --text TEXT`` from the venv beside this checkout (the server is already
running: a warm query) and ``python -c "import numpy, psycopg"`` from the same venv, the floor any
command of a PostgreSQL tool in numpy must pay. Each is one process timed from outside: wall
seconds, and CPU seconds (user + system, from the kernel's accounting of the child). Medians, and
the median of each round's ratio query / floor.

Python is run as an ordinary user runs it: with its bytecode cache (``PYTHONDONTWRITEBYTECODE`` is
removed from the children's environment, and one untimed run of each writes the cache first).
Then, where the time goes: ``-X importtime``'s self time of each module the query imports and the
floor does not, medians over ``--rounds`` runs, grouped by package (import-time figures carry the
tool's own overhead: they rank the parts, the wall and CPU figures above are the measure).

    python bench/bench_startup.py [--rounds 15] [--text TEXT] [--out docs/benchmarks/speed.md]
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from _common import Report, header, ratios
from _options import add_out, add_rounds, parser

TEXT = "Storms cut power to 40,000 homes across the county on Monday, officials say."
FLOOR = ("-c", "import numpy, psycopg")
SECTION = "start-up"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run(argv: Sequence[str]) -> tuple[float, float, str]:
    """(wall s, CPU s, standard error) of one process, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=_env())
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stderr


def _self_times(stderr: str) -> dict[str, int]:
    """Microseconds of each module's own import, from ``-X importtime``'s lines."""
    out: dict[str, int] = {}
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, _, name = line[len("import time:") :].split("|")
            out[name.strip()] = int(own)
    return out


def _group(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "neardup" else parts[0]


def main() -> None:
    ap = parser(__doc__)
    add_rounds(ap, 15)
    ap.add_argument("--text", default=TEXT, help="the query's text")
    add_out(ap, "speed.md")
    args = ap.parse_args()
    python = Path(sys.executable)
    query = [str(python.with_name("neardup")), "query", "--text", args.text]
    floor = [str(python), *FLOOR]
    for argv in (query, floor):  # untimed: the bytecode cache written, the files in the page cache
        _run(argv)
    wall: dict[str, list[float]] = {"query": [], "floor": []}
    cpu: dict[str, list[float]] = {"query": [], "floor": []}
    for r in range(args.rounds):
        for name, argv in (("query", query), ("floor", floor))[:: -1 if r % 2 else 1]:
            seconds, cpu_seconds, _ = _run(argv)
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    extra: Counter[str] = Counter()
    imports = {
        "query": [str(python), "-X", "importtime", "-m", "neardup", *query[1:]],
        "floor": [str(python), "-X", "importtime", *FLOOR],
    }
    timings = {
        name: [_self_times(_run(argv)[2]) for _ in range(args.rounds)] for name, argv in imports.items()
    }
    floor_modules = set().union(*timings["floor"])
    for module in set().union(*timings["query"]) - floor_modules:
        extra[_group(module)] += int(statistics.median(t.get(module, 0) for t in timings["query"]))

    load = os.getloadavg()
    report = Report()
    report.say(
        *header(
            "Start-up: a warm query against importing numpy and psycopg",
            None,
            False,
            [
                f"Load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min)",
                f"User: {os.environ.get('USER') or os.getuid()}, venv {python.parent.parent}",
            ],
            level=2,
        )
    )
    rows = []
    for what, measure in (("wall s", wall), ("CPU s", cpu)):
        q, f = measure["query"], measure["floor"]
        rows.append(
            [
                what,
                f"{statistics.median(q):.3f}",
                f"{statistics.median(f):.3f}",
                f"{statistics.median(ratios(q, f)):.2f}x",
                f"{min(ratios(q, f)):.2f}x-{max(ratios(q, f)):.2f}x",
            ]
        )
    report.table(
        ["measure", "`neardup query` (warm)", "`import numpy, psycopg`", "median of ratios", "ratios' range"],
        "lrrrr",
        rows,
    )
    total = sum(extra.values())
    report.say(
        f"Where the query's extra imports go (`-X importtime` self times, medians of {args.rounds} runs, "
        f"{total / 1000:.1f} ms in all under the tool; the rest of the difference is the connection, "
        "the collection's row and the query):",
        "",
    )
    report.table(
        ["package or module", "ms"],
        "lr",
        [[f"`{name}`", f"{us / 1000:.1f}"] for name, us in extra.most_common(12)],
    )
    report.write(args.out, section=SECTION, title="Speed")


if __name__ == "__main__":
    main()
