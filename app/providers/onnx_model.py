"""A sentence-transformers model run by ONNX Runtime instead of torch: the same vectors (to about 1e-6), and one
query embedded about twice as fast (7.0 against 15.4 ms for the bundled MiniLM on one thread,
``benchmarks/embedding_runtime.py``), because a short input is mostly per-operation overhead in torch.

Only models whose pipeline is a transformer, mean pooling and optionally normalisation (the bundled MiniLM and
most sentence-transformers models) run here; ``load`` returns None for others, which stay on torch. The
transformer is written once as an ONNX file into the user's cache directory, and the file is used as long as the
model's files are unchanged: a BERT encoder with a ``tokenizer.json`` (the bundled model) by ``onnx_bert`` and the
``tokenizers`` package, without torch; any other by torch's exporter and transformers' tokenizer, which the
``memsys[torch]`` extra installs (``torch_needed``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np

from app.providers import onnx_bert

log = logging.getLogger(__name__)

TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"


class OnnxSentenceModel:
    """``encode`` and ``get_embedding_dimension`` as sentence-transformers has them, for what memsys asks."""

    def __init__(self, folder: Path, onnx_file: Path, max_length: int, threads: int) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads  # 0: one per core
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._tokenize = _tokenizer(folder, max_length)
        self._dimensions = int(self._session.get_outputs()[0].shape[-1])

    def get_embedding_dimension(self) -> int:
        return self._dimensions

    def encode(self, texts: list[str], batch_size: int = 32, **_: object) -> np.ndarray:
        """L2-normalised mean-pooled vectors, in the order of ``texts``, one text per run whatever
        ``batch_size`` says. On the CPU a batch costs its padding and gains almost nothing from sharing a run
        (``benchmarks/embedding_batches.py``: LoCoMo entries with the turn before in calls of 20, 18.6 ms a text
        alone, 17.6 in padded batches of 4, 27.4 of 16, 32.9 of 64); and int8 weights quantize the activations per
        run, so in a batch a text's vector would depend on its batch-mates (cosine down to 0.98)."""
        encoded = self._tokenize(texts)
        vectors = np.zeros((len(texts), self._dimensions), dtype=np.float32)
        for i in range(len(texts)):
            feed = {name: np.array([encoded[name][i]], dtype=np.int64) for name in self._inputs}
            hidden = self._session.run(None, feed)[0][0]
            pooled = hidden.mean(axis=0)
            vectors[i] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return vectors


def _tokenizer(folder: Path, max_length: int):
    """A function from texts to their ``input_ids``, ``token_type_ids`` and ``attention_mask`` lists, unpadded and
    truncated to ``max_length`` tokens as sentence-transformers does: the ``tokenizers`` package on the model's
    ``tokenizer.json`` (the same ids as transformers' fast tokenizer, which reads that file), else transformers'."""
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(max_length)
        tokenizer.no_padding()

        def tokenize(texts: list[str]) -> dict[str, list[list[int]]]:
            encodings = tokenizer.encode_batch(texts)
            return {
                "input_ids": [e.ids for e in encodings],
                "token_type_ids": [e.type_ids for e in encodings],
                "attention_mask": [e.attention_mask for e in encodings],
            }

        return tokenize
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(str(folder))
    return lambda texts: auto(texts, truncation=True, max_length=max_length)


def torch_needed(folder: Path, runtime: str) -> str | None:
    """Why the model in ``folder`` needs torch (and sentence-transformers or transformers) on ``runtime``, or None
    when it runs without: read from its files, before anything loads."""
    if runtime == "torch":
        return "runs on torch"
    if _mean_pooled(folder) is None:
        return "is not a transformer with mean pooling, so it runs on torch"
    if not (folder / "tokenizer.json").is_file():
        return "has no tokenizer.json, so transformers tokenizes for it"
    if not onnx_bert.supported(folder) and not _cached_export(folder).exists():
        return "is not a BERT encoder in safetensors, so torch exports it to ONNX"
    return None


def load(folder: Path, threads: int, int8: bool = False) -> OnnxSentenceModel | None:
    """The model in ``folder`` on ONNX Runtime, exported first if need be; None if its pipeline is not a
    transformer with mean pooling or the export fails (it then stays on torch)."""
    max_length = _mean_pooled(folder)
    if max_length is None:
        log.info("The embedding model at %s is not a transformer with mean pooling: it runs on torch", folder)
        return None
    try:
        exported = _exported(folder)
        if int8:
            exported = _int8(exported)
    except Exception as exc:  # a read-only cache, a model the exporter cannot trace: torch may still work
        log.warning("Could not export the embedding model at %s to ONNX (%s): it runs on torch", folder, exc)
        return None
    return OnnxSentenceModel(folder, exported, max_length, threads)


def _mean_pooled(folder: Path) -> int | None:
    """The model's max_seq_length if its modules are Transformer, mean Pooling and optionally Normalize."""
    try:
        modules = json.loads((folder / "modules.json").read_text())
        kinds = [m["type"] for m in modules]
        if kinds not in ([TRANSFORMER, POOLING], [TRANSFORMER, POOLING, NORMALIZE]):
            return None
        pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text())
        modes = {key for key, on in pooling.items() if key.startswith("pooling_mode") and on is True}
        if modes != {"pooling_mode_mean_tokens"}:
            return None
        return int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def _int8(exported: Path) -> Path:
    """The exported model with its weights in int8, one scale per output channel (ONNX Runtime's dynamic
    quantization), made once into the cache beside it."""
    target = exported.with_name(f"{exported.stem}-int8.onnx")
    if target.exists():
        return target
    from onnxruntime.quantization import QuantType, quantize_dynamic

    log.info("Quantizing the embedding model %s to int8 (once): %s", exported, target)
    # In a directory of its own: the quantizer writes its intermediate files beside its input, and a server and
    # its worker process may quantize at the same time.
    with tempfile.TemporaryDirectory(dir=exported.parent) as work:
        source = Path(work) / exported.name
        source.symlink_to(exported)
        partial = Path(work) / target.name
        root = logging.getLogger()
        root.addFilter(_quantizer_advice)
        try:
            quantize_dynamic(str(source), str(partial), weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.removeFilter(_quantizer_advice)
        partial.replace(target)
    return target


def _quantizer_advice(record: logging.LogRecord) -> bool:
    """Drop the quantizer's advice to pre-process the model (logged on the root logger each time)."""
    return "pre-processing before quantization" not in record.getMessage()


def _cached_export(folder: Path) -> Path:
    return _cache_dir() / f"{folder.name}-{_fingerprint(folder)}.onnx"


def _exported(folder: Path) -> Path:
    """The transformer of ``folder`` as an ONNX file in the cache, written now unless a file made from the same
    model files is there. Written to a temporary name and renamed, so that a server and a worker starting together
    never read half a file."""
    target = _cached_export(folder)
    if target.exists():
        return target
    log.info("Exporting the embedding model at %s to ONNX (once): %s", folder, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    try:
        if onnx_bert.supported(folder):
            onnx_bert.build(folder, partial)
        else:
            _export_by_torch(folder, partial)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)  # a failed export leaves nothing behind
    return target


def _export_by_torch(folder: Path, partial: Path) -> None:
    """Any transformer, traced by torch's exporter (the ``memsys[torch]`` extra)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    transformer = AutoModel.from_pretrained(str(folder)).eval()
    sample = tokenizer(["an example sentence", "another"], padding=True, return_tensors="pt")
    names = list(sample.keys())

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.transformer(**dict(zip(names, inputs, strict=True))).last_hidden_state

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on tracing; tests/test_onnx_embedder.py compares
        torch.onnx.export(
            LastHiddenState(),
            tuple(sample[name] for name in names),
            str(partial),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memsys" / "onnx"


def _fingerprint(folder: Path) -> str:
    """Names, sizes and modification times of the model's files."""
    digest = hashlib.sha256(str(folder.resolve()).encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]
