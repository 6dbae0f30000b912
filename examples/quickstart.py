"""A first look at neardup's core: sign a few texts, estimate their similarity, choose a banding.

python examples/quickstart.py
"""

from itertools import combinations

import numpy as np

from neardup.core import Params, Sketcher, estimate_jaccard, optimal_params

TEXTS = {
    "wire-0412": "Storm closes the harbour; ferries to the islands are cancelled until Friday morning.",
    "wire-0413": "Storm closes the harbour: ferries to the islands cancelled until Friday morning.",
    "wire-0419": "Ferries to the islands resume on Friday morning after the storm closed the harbour.",
    "wire-0420": "The city council approved the new budget for public libraries on Tuesday.",
    "wire-0421": "On Tuesday the city council approved the new budget for public libraries.",
}

choice = optimal_params(threshold=0.7, num_perm=128)
print(f"tuned for Jaccard >= 0.7: {choice}\n")

sketcher = Sketcher(Params(bands=choice.bands, rows=choice.rows))
ids = list(TEXTS)
shingle_sets = sketcher.shingles(list(TEXTS.values()))
signatures = sketcher.signatures(list(TEXTS.values()))
keys = sketcher.band_keys(signatures)

print(f"{'pair':<24} {'exact J':>8} {'estimate':>9} {'95% interval':>15}  candidate")
for i, j in combinations(range(len(ids)), 2):
    a, b = shingle_sets[i], shingle_sets[j]
    exact = np.intersect1d(a, b).size / np.union1d(a, b).size
    est = estimate_jaccard(signatures[i], signatures[j])
    candidate = "yes" if (keys[i] == keys[j]).any() else "no"
    pair = f"{ids[i]} ~ {ids[j]}"
    print(f"{pair:<24} {exact:8.3f} {est.value:9.3f}   [{est.low:.2f}, {est.high:.2f}]  {candidate}")
