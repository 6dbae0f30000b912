"""Connected components labelled by their smallest member."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.core.components import component_labels


@given(
    nodes=st.lists(st.integers(0, 10**12), min_size=1, max_size=30, unique=True),
    data=st.data(),
)
def test_labels_are_the_smallest_member_of_each_component(nodes: list[int], data: st.DataObject) -> None:
    edges = data.draw(st.lists(st.tuples(st.sampled_from(nodes), st.sampled_from(nodes)), max_size=40))
    parent = {n: n for n in nodes}

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        parent[max(ra, rb)] = min(ra, rb)
    labels = component_labels(nodes, [a for a, _ in edges], [b for _, b in edges])
    members: dict[int, list[int]] = {}
    for n in nodes:
        members.setdefault(find(n), []).append(n)
    assert labels.tolist() == [min(members[find(n)]) for n in nodes]


def test_edge_ends_must_be_nodes() -> None:
    with pytest.raises(ValueError, match="every edge end"):
        component_labels(np.array([1, 2]), [1], [3])
