"""np.unique(x) against neardup.core.distinct.distinct(x) on int64 keys shaped like candidate
pairs ((a << 32) | b) and like random 62-bit ids, in one run, alternating: medians and the ratio.

    python bench/bench_distinct.py [--sizes 10000 100000 1000000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from neardup.core.distinct import distinct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    print(f"numpy {np.__version__}")
    print("| keys | n | np.unique median ms | distinct median ms | ratio |")
    print("|---|---:|---:|---:|---:|")
    for n in args.sizes:
        pairs = (rng.integers(0, n // 4 + 1, n) << 32) | rng.integers(0, n // 4 + 1, n)
        for name, keys in (("pairs", pairs), ("random", rng.integers(0, 2**62, n))):
            timings: dict[str, list[float]] = {"unique": [], "distinct": []}
            for _ in range(args.repeats):
                for label, fn in (("unique", np.unique), ("distinct", distinct)):
                    start = time.perf_counter()
                    fn(keys)
                    timings[label].append(time.perf_counter() - start)
            u, d = (statistics.median(timings[k]) * 1e3 for k in ("unique", "distinct"))
            print(f"| {name} | {n:,} | {u:.2f} | {d:.2f} | {u / d:.1f}x |")


if __name__ == "__main__":
    main()
