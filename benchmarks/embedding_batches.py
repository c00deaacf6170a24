"""One text per ONNX Runtime run against padded batches, side by side in one run, on formation-sized texts: LoCoMo
turns with the turn before (an event-log entry's text), in calls of 20 as formation makes them.

    python -m benchmarks.embedding_batches [--texts 400] [--call 20]

Why ``app.providers.onnx_model`` runs one text at a time: on the CPU a padded batch pays for its padding and gains
little from sharing a run. Saves ``benchmarks/results/embedding_batches.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

from app.providers import onnx_model
from app.providers.embeddings import _bundled_model_path
from benchmarks.common import print_table, save

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo-dev.json"


def entries(count: int) -> list[str]:
    texts = []
    for sample in json.loads(DATA.read_text()):
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                said = [f"{t['speaker']}: {t['text']}" for t in turns]
                texts += [(said[i - 1] + "\n" if i else "") + said[i] for i in range(len(said))]
    random.Random(1).shuffle(texts)
    return texts[:count]


def padded(model: onnx_model.OnnxSentenceModel, texts: list[str], batch_size: int) -> np.ndarray:
    """What the model did before: batches sorted by length, padded to their longest, masked mean pooling."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    vectors = np.zeros((len(texts), model.get_embedding_dimension()), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        encoded = model._tokenizer(
            [texts[i] for i in chosen], padding=True, truncation=True, max_length=model._max_length, return_tensors="np"
        )
        hidden = model._session.run(None, {name: encoded[name].astype(np.int64) for name in model._inputs})[0]
        mask = encoded["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        vectors[chosen] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--call", type=int, default=20, help="texts per embed call (formation's calls)")
    args = parser.parse_args()
    texts = entries(args.texts)
    calls = [texts[i : i + args.call] for i in range(0, len(texts), args.call)]
    rows, vectors = [], {}
    for runtime, int8 in (("onnx", False), ("onnx-int8", True)):
        model = onnx_model.load(_bundled_model_path(), 1, int8=int8)
        ways = {"one text per run": model.encode, **{f"padded batches of {b}": (b,) for b in (4, 16, 64)}}
        for way, how in ways.items():
            encode = how if callable(how) else (lambda t, b=how[0], m=model: padded(m, t, b))
            encode(calls[0])  # warm
            started = time.perf_counter()
            out = np.concatenate([encode(call) for call in calls])
            ms = (time.perf_counter() - started) / len(texts) * 1000
            vectors[runtime, way] = out
            rows.append({"runtime": runtime, "way": way, "ms_per_text": round(ms, 2)})
        alone = vectors[runtime, "one text per run"]
        for row in rows[-len(ways) :]:
            row["cos_to_one_per_run_min"] = round(float((vectors[runtime, row["way"]] * alone).sum(axis=1).min()), 5)
    print_table(rows, list(rows[0]))
    print(f"{len(texts)} texts of {np.mean([len(t) for t in texts]):.0f} characters on average, calls of {args.call}")
    print(f"saved {save('embedding_batches', vars(args), rows)}")


if __name__ == "__main__":
    main()
