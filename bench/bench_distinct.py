"""np.unique(x) against neardup.core.distinct.distinct(x) on int64 keys shaped like candidate
pairs ((a << 32) | b) and like random 62-bit ids, in one run, alternating: medians and the ratio.

    python bench/bench_distinct.py [--sizes 10000 100000 1000000] [--repeats 7]
"""

from __future__ import annotations

import statistics
from functools import partial

import numpy as np

from _common import alternated, seconds_of
from _options import add_rounds, parser
from neardup.core.distinct import distinct


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    add_rounds(ap, 7, flag="--repeats")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    print(f"numpy {np.__version__}")
    print("| keys | n | np.unique median ms | distinct median ms | ratio |")
    print("|---|---:|---:|---:|---:|")
    for n in args.sizes:
        pairs = (rng.integers(0, n // 4 + 1, n) << 32) | rng.integers(0, n // 4 + 1, n)
        for name, keys in (("pairs", pairs), ("random", rng.integers(0, 2**62, n))):
            ways = {
                "unique": seconds_of(partial(np.unique, keys)),
                "distinct": seconds_of(partial(distinct, keys)),
            }
            timings = alternated(ways, args.repeats)
            u, d = (statistics.median(timings[k]) * 1e3 for k in ("unique", "distinct"))
            print(f"| {name} | {n:,} | {u:.2f} | {d:.2f} | {u / d:.1f}x |")


if __name__ == "__main__":
    main()
