"""How deep each leg of the hybrid statement searches."""

from __future__ import annotations

from app.retrieval.service import tuning_for
from app.settings import Settings


def test_rrf_legs_bring_at_least_twice_top_k() -> None:
    settings = Settings(rrf_candidates=100, hnsw_ef_search=100)
    assert tuning_for(settings, "rrf", 20).leg_limit == 100
    deep = tuning_for(settings, "rrf", 100)
    assert deep.leg_limit == 200 and deep.ef_search == 200  # the HNSW candidate list follows the LIMIT
    assert tuning_for(settings, "embedding", 100).leg_limit == 100  # one leg: no fusion to feed
    assert tuning_for(settings, "bm25", 7).leg_limit == 7
    assert tuning_for(Settings(rrf_candidates=1500), "rrf", 100).ef_search == 1000  # pgvector's upper bound
