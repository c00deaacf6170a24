"""The legs of the hybrid search statement, in one table: each leg's name (its CTE ``<name>_leg`` in
sql/retrieval.sql), the statement's columns of its rank, its own figure and its count of candidates, and when it
runs. The repository reads it to leave out a leg that cannot find anything and to count those that run; the service
and ``explain`` read each memory's figures and the legs' counts by it. Adding a leg: CONTRIBUTING.md, "Adding a
retrieval leg"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Leg:
    name: str
    rank: str
    """The statement's column of the leg's rank (null where the leg did not find the memory)."""
    figure: str
    """The statement's column of the leg's own figure (a cosine, a BM25 score)."""
    count: str
    """The statement's column of how many candidates the leg brought (the same on every row)."""
    runs: Callable[[dict[str, Any]], bool]
    """Whether the leg can find anything for ``search_parameters``."""


LEGS = (
    Leg(
        "vector",
        rank="vector_rank",
        figure="cosine",
        count="emb_count",
        runs=lambda parameters: parameters["embedding"] is not None,
    ),
    Leg(
        "bm25",
        rank="bm25_rank",
        figure="bm25",
        count="bm25_count",
        runs=lambda parameters: bool(parameters["query_tokens"]),
    ),
)
