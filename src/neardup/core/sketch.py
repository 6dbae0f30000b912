"""From raw texts to signatures and bucket keys under one ``Params``, in batches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from neardup.core.content import CONTENT_HASH_VERSIONS, content_hashes
from neardup.core.lsh import band_keys
from neardup.core.minhash import MinHasher
from neardup.core.normalize import encode_batch
from neardup.core.params import HASH_VERSION, Params
from neardup.core.ragged import Ragged
from neardup.core.shingle import distinct_rows, distinct_rows_across, shingle_batch, shingle_code_points
from neardup.errors import InternalError, ParamsMismatchError

# Threads that sketch a batch (an ingest's, a check's): the shingle and MinHash kernels and the
# content hashing release the GIL, so a second thread uses the core the database leaves idle
# between statements.
SKETCH_THREADS = 2
# Texts a thread takes at a time: enough that a chunk's kernels run long without the GIL, small
# enough that two threads finish close together.
_CHUNK_TEXTS = 2_000


@dataclass(frozen=True, eq=False)
class Sketch:
    """Everything the index stores or checks about a batch of texts, row i for text i."""

    shingles: tuple[Ragged, ...]
    """Shingle hashes of each text in text order, repeats kept (``distinct_shingles`` sorts and
    dedupes), in the chunks the threads made them in: copying a large batch's hashes into one
    array would cost a sizeable share of sketching it."""
    signatures: npt.NDArray[np.uint32]
    """MinHash signatures, docs x num_perm."""
    hashes: list[bytes] | None
    """Content hashes, or None for a sketch made without them (``Sketcher.sketch(hashed=False)``)."""

    @property
    def content_hashes(self) -> list[bytes]:
        """Hash of each normalised text: equal exactly when the normalised texts are equal."""
        if self.hashes is None:
            raise InternalError("this sketch was made without content hashes")
        return self.hashes

    @property
    def shingle_counts(self) -> npt.NDArray[np.int64]:
        """Number of shingles of each text, repeats included (0 exactly for a text with none)."""
        return np.concatenate([part.lengths() for part in self.shingles])

    def distinct_shingles(self, rows: npt.NDArray[np.int64]) -> Ragged:
        """Sorted distinct shingle sets of the given texts, in the order of ``rows``."""
        if len(self.shingles) == 1:
            return distinct_rows(self.shingles[0], rows)
        return distinct_rows_across(self.shingles, rows)


class Sketcher:
    """Turns batches of texts into shingles, signatures and band keys, all under one Params."""

    def __init__(self, params: Params) -> None:
        if params.hash_version != HASH_VERSION:
            newer = params.hash_version > HASH_VERSION
            raise ParamsMismatchError(
                f"hash_version: the parameters say {params.hash_version}, this neardup computes "
                f"{HASH_VERSION}; signatures would not match: "
                + (
                    "they come from a newer neardup, upgrade it"
                    if newer
                    else "rebuild the index with this version"
                )
            )
        if params.content_hash not in CONTENT_HASH_VERSIONS:
            raise ParamsMismatchError(
                f"content_hash: the parameters say {params.content_hash}, this neardup computes "
                f"{' and '.join(map(str, CONTENT_HASH_VERSIONS))}; they come from a newer neardup, "
                "upgrade it"
            )
        self.params = params
        self.minhasher = MinHasher(params.num_perm, params.seed, params.scheme)

    def shingles(self, texts: Sequence[str], *, unique: bool = True) -> Ragged:
        """Shingle hashes of each text (sorted and distinct when ``unique``)."""
        p = self.params
        return shingle_batch(texts, p.shingle, p.k, p.normalization, unique=unique)

    def signatures(self, texts: Sequence[str], threads: int = 1) -> npt.NDArray[np.uint32]:
        """MinHash signatures of the texts, one row each; empty texts get all-EMPTY rows. On
        ``threads`` threads as ``sketch``, with the same result."""
        if threads > 1 and len(texts) > _CHUNK_TEXTS:
            return np.concatenate(_chunked(self.signatures, texts, threads))
        # Repeated shingles cannot change a minimum, so the sort-and-dedupe step is skipped.
        return self.minhasher.signatures(self.shingles(texts, unique=False))

    def sketch(self, texts: Sequence[str], threads: int = 1, *, hashed: bool = True) -> Sketch:
        """Shingles, signatures and (if ``hashed``) content hashes of the texts, normalising each
        text once; on ``threads`` threads (the same result: the kernels and hashing release the
        GIL, the normalisation does not, so two threads give less than twice the rate). A lookup
        that stores nothing skips the hashes: BLAKE2b of each text as UTF-32, four bytes a
        character, is a noticeable share of a batch's sketching."""

        def one(chunk: Sequence[str]) -> Sketch:
            return self._sketch(chunk, hashed)

        if threads <= 1 or len(texts) <= _CHUNK_TEXTS:
            return one(texts)
        parts = _chunked(one, texts, threads)
        return Sketch(
            tuple(chunk for part in parts for chunk in part.shingles),
            np.concatenate([part.signatures for part in parts]),
            [h for part in parts for h in part.content_hashes] if hashed else None,
        )

    def _sketch(self, texts: Sequence[str], hashed: bool) -> Sketch:
        p = self.params
        cps = encode_batch(texts, p.normalization)
        # Repeated shingles cannot change a minimum: sorting and deduping waits for verification,
        # which needs it only for the few texts that have candidates.
        sets = shingle_code_points(cps, p.shingle, p.k, unique=False)
        return Sketch(
            (sets,),
            self.minhasher.signatures(sets),
            content_hashes(cps, self.params.content_hash) if hashed else None,
        )

    def band_keys(self, signatures: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
        """Bucket keys of signatures, shape docs x bands."""
        return band_keys(signatures, self.params.bands, self.params.rows)


_T = TypeVar("_T")


def _chunked(work: Callable[[Sequence[str]], _T], texts: Sequence[str], threads: int) -> list[_T]:
    """``work`` of each ``_CHUNK_TEXTS`` texts in turn, on ``threads`` threads, results in order."""
    chunks = [texts[i : i + _CHUNK_TEXTS] for i in range(0, len(texts), _CHUNK_TEXTS)]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="neardup-sketch") as pool:
        return list(pool.map(work, chunks))
