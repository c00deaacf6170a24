"""Rerank providers behind one interface: an HTTP ``/rerank`` endpoint, the LLM as ranker, or none.

Every provider returns one relevance score in [0, 1] per document, in the documents' order.

| provider | cost per query |
|---|---|
| ``none`` | nothing: the fusion order is kept |
| ``http`` | one HTTP call to a cross-encoder (vLLM, TEI, Jina, Cohere `/rerank` shape); ~20-200 ms |
| ``llm`` | one LLM call per batch of documents, batches in parallel (seed 004's SemanticRankOp) |
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from app.errors import ServiceUnavailable

if TYPE_CHECKING:
    from app.providers.llm import LLMClient, LLMConfig


class RerankError(ServiceUnavailable):
    """The reranker failed; the caller keeps the order it had."""


class Reranker(Protocol):
    name: str

    async def scores(self, query: str, documents: list[str]) -> list[float] | None:
        """Relevance of each document to the query in [0, 1], or None to keep the given order."""
        ...


class NoReranker:
    name = "none"

    async def scores(self, query: str, documents: list[str]) -> list[float] | None:
        return None


class HttpReranker:
    """POST ``{base_url}/rerank`` with ``{model, query, documents, top_n}``.

    Reads ``results[{index, relevance_score}]``.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 30.0) -> None:
        self.name = f"http:{model}"
        self._url = base_url.rstrip("/") + "/rerank"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s

    async def scores(self, query: str, documents: list[str]) -> list[float] | None:
        if not documents:
            return []
        payload = {"model": self._model, "query": query, "documents": documents, "top_n": len(documents)}
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.post(self._url, json=payload, headers=self._headers)
                response.raise_for_status()
                results = response.json()["results"]
        except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
            raise RerankError(f"The rerank service failed: {type(exc).__name__}") from exc
        raw = [0.0] * len(documents)
        for item in results:
            raw[int(item["index"])] = float(item["relevance_score"])
        # Some servers return logits rather than probabilities.
        if any(score < 0 or score > 1 for score in raw):
            raw = [1 / (1 + math.exp(-score)) for score in raw]
        return raw


class LLMReranker:
    """The LLM scores batches of documents 0-1 as JSON; batches run concurrently."""

    def __init__(self, llm: LLMClient, config: LLMConfig | None = None, batch_size: int = 10) -> None:
        self.name = "llm"
        self._llm = llm
        self._config = config
        self._batch_size = batch_size

    async def scores(self, query: str, documents: list[str]) -> list[float] | None:
        from app.agentic import prompts

        batches = [documents[i : i + self._batch_size] for i in range(0, len(documents), self._batch_size)]
        answers = await asyncio.gather(
            *(
                self._llm.complete_json(
                    prompts.rerank_messages(query, batch), config=self._config, json_schema=prompts.RERANK_SCHEMA
                )
                for batch in batches
            )
        )
        out: list[float] = []
        for batch, answer in zip(batches, answers, strict=True):
            out.extend(_batch_scores(answer, len(batch)))
        return out


def _batch_scores(answer: Any, size: int) -> list[float]:
    """``{"scores": [{"index": 1, "score": 0.8}, …]}`` (1-based), or a bare list of numbers."""
    scores = [0.0] * size
    items = answer.get("scores", []) if isinstance(answer, dict) else answer
    if not isinstance(items, list):
        return scores
    for position, item in enumerate(items):
        try:  # the answer is untrusted: an index or score that is no number is skipped, never a 500
            if isinstance(item, dict):
                index, value = int(item.get("index", position + 1)) - 1, item.get("score", 0)
            else:
                index, value = position, item
            if 0 <= index < size:
                scores[index] = min(1.0, max(0.0, float(value)))
        except (TypeError, ValueError, OverflowError):
            continue
    return scores
