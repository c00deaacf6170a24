"""The baselines every memory system is measured against: retrieval over the raw turns of one conversation.

- ``bm25``: bm25s (Lucene variant, k1 = 1.5, b = 0.75) over the turns, English stopwords, no stemming;
- ``dense``: exact cosine between the question and every turn, with the model memsys embeds with
  (all-MiniLM-L6-v2, bundled);
- ``rrf``: reciprocal rank fusion of the two (k = 60, top 100 of each, ties kept in BM25-first order).

Each ranks a turn by its id; the caller turns ids back into ``Retrieved`` items.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np

RRF_K = 60
LEG_DEPTH = 100
BASELINES = ("bm25", "dense", "rrf")


class RawTurnIndex:
    """BM25 and dense indexes over one conversation's turns."""

    def __init__(self, texts: Sequence[str], embedder) -> None:
        self._size = len(texts)
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False)
        self._embedder = embedder
        self._vectors = np.asarray(embedder.embed_sync(list(texts)), dtype=np.float32)

    def rank_all(self, questions: Sequence[str]) -> list[dict[str, list[int]]]:
        """For each question, the turn indexes each baseline ranks, best first."""
        query_vectors = np.asarray(self._embedder.embed_sync(list(questions)), dtype=np.float32)
        out = []
        for question, vector in zip(questions, query_vectors, strict=True):
            bm25 = self._bm25_rank(question)
            dense = [int(i) for i in np.argsort(-(self._vectors @ vector), kind="stable")[:LEG_DEPTH]]
            out.append({"bm25": bm25, "dense": dense, "rrf": rrf([bm25, dense])})
        return out

    def _bm25_rank(self, question: str) -> list[int]:
        tokens = bm25s.tokenize([question], stopwords="en", show_progress=False)
        if not tokens.vocab:  # a question made only of stopwords
            return []
        docs, scores = self._bm25.retrieve(tokens, k=min(LEG_DEPTH, self._size), show_progress=False)
        # bm25s pads with zero-score turns when fewer match; a turn with no query term is not a hit.
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion: sum of 1 / (k + rank) over the rankings an item is in (rank from 1)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda item: -fused[item])
