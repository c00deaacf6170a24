"""A BERT encoder written as an ONNX graph from its config.json and model.safetensors, without torch.

The bundled all-MiniLM-L6-v2 and most small sentence-transformers models (bge-small, e5-small, gte-small, the
MiniLM family) are BERT encoders; ``build`` gives the same last hidden state as transformers' ``BertModel`` (to about
1e-6: ``tests/test_onnx_embedder.py`` compares the vectors with torch's), so the default embedder needs neither torch
nor transformers. Other architectures are exported by torch (``onnx_model``), which the ``memsys[torch]`` extra
installs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def supported(folder: Path) -> bool:
    """Whether ``folder`` holds a BERT encoder this module can write: absolute positions, GELU, safetensors."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and (folder / "model.safetensors").is_file()
    )


def build(folder: Path, target: Path) -> None:
    """Write the encoder of ``folder`` to ``target``: inputs ``INPUTS`` ([batch, tokens], int64), output
    ``last_hidden_state`` ([batch, tokens, hidden], float32)."""
    import onnx
    from onnx import TensorProto, helper
    from safetensors.numpy import load_file

    config = json.loads((folder / "config.json").read_text())
    weights = {
        name.removeprefix("bert."): value for name, value in load_file(str(folder / "model.safetensors")).items()
    }
    graph = _Graph(weights)
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    eps = float(config.get("layer_norm_eps", 1e-12))

    tokens = graph.node("Gather", graph.node("Shape", "input_ids"), graph.constant(np.array(1, np.int64)))
    positions = graph.node(
        "Range", graph.constant(np.array(0, np.int64)), tokens, graph.constant(np.array(1, np.int64))
    )
    x = graph.node(
        "Add",
        graph.node(
            "Add",
            graph.node("Gather", graph.weight("embeddings.word_embeddings.weight"), "input_ids"),
            graph.node("Gather", graph.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"),
        ),
        graph.node("Gather", graph.weight("embeddings.position_embeddings.weight"), positions),
    )
    x = graph.layer_norm(x, "embeddings.LayerNorm", eps)
    # 0 where a token is to be attended to, the lowest float where it is padding; [batch, 1, 1, tokens]
    keep = graph.node("Cast", "attention_mask", to=TensorProto.FLOAT)
    mask = graph.node(
        "Mul",
        graph.node("Sub", graph.constant(np.array(1.0, np.float32)), keep),
        graph.constant(np.array(np.finfo(np.float32).min, np.float32)),
    )
    mask = graph.node("Unsqueeze", mask, graph.constant(np.array([1, 2], np.int64)))
    for n in range(int(config["num_hidden_layers"])):
        x = graph.encoder_layer(x, mask, f"encoder.layer.{n}", hidden, heads, eps)
    graph.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))

    model = helper.make_model(
        helper.make_graph(
            graph.nodes,
            "bert",
            [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"]) for name in INPUTS],
            [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", hidden])],
            graph.initializers,
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(target))


class _Graph:
    """Nodes and initializers, each output named in order of making."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def _name(self, kind: str) -> str:
        self._count += 1
        return f"{kind}_{self._count}"

    def node(self, op: str, *inputs: str, **attributes: object) -> str:
        from onnx import helper

        output = self._name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [output], **attributes))
        return output

    def constant(self, value: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self._name("const")
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, name: str, transposed: bool = False) -> str:
        """An initializer of the model's weights; a linear layer's transposed to [in, out] for MatMul."""
        from onnx import numpy_helper

        value = self.weights[name]
        value = np.ascontiguousarray(value.T) if transposed else value
        self.initializers.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def linear(self, x: str, prefix: str) -> str:
        return self.node(
            "Add", self.node("MatMul", x, self.weight(f"{prefix}.weight", True)), self.weight(f"{prefix}.bias")
        )

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.node(
            "LayerNormalization",
            x,
            self.weight(f"{prefix}.weight"),
            self.weight(f"{prefix}.bias"),
            axis=-1,
            epsilon=eps,
        )

    def encoder_layer(self, x: str, mask: str, prefix: str, hidden: int, heads: int, eps: float) -> str:
        size = hidden // heads
        split = self.constant(np.array([0, 0, heads, size], np.int64))  # [batch, tokens, heads, size]
        query, key, value = (
            self.node("Reshape", self.linear(x, f"{prefix}.attention.self.{part}"), split)
            for part in ("query", "key", "value")
        )
        scores = self.node(
            "Mul",
            self.node(
                "MatMul",
                self.node("Transpose", query, perm=[0, 2, 1, 3]),
                self.node("Transpose", key, perm=[0, 2, 3, 1]),
            ),
            self.constant(np.array(1 / math.sqrt(size), np.float32)),
        )
        weights = self.node("Softmax", self.node("Add", scores, mask), axis=-1)
        attended = self.node("MatMul", weights, self.node("Transpose", value, perm=[0, 2, 1, 3]))
        joined = self.node(
            "Reshape",
            self.node("Transpose", attended, perm=[0, 2, 1, 3]),
            self.constant(np.array([0, 0, hidden], np.int64)),
        )
        x = self.layer_norm(
            self.node("Add", self.linear(joined, f"{prefix}.attention.output.dense"), x),
            f"{prefix}.attention.output.LayerNorm",
            eps,
        )
        inner = self.linear(x, f"{prefix}.intermediate.dense")
        inner = self.gelu(inner)
        return self.layer_norm(
            self.node("Add", self.linear(inner, f"{prefix}.output.dense"), x), f"{prefix}.output.LayerNorm", eps
        )

    def gelu(self, x: str) -> str:
        """BERT's exact GELU: x/2 (1 + erf(x/sqrt 2))."""
        erf = self.node("Erf", self.node("Div", x, self.constant(np.array(math.sqrt(2), np.float32))))
        return self.node(
            "Mul",
            self.node("Mul", x, self.node("Add", erf, self.constant(np.array(1.0, np.float32)))),
            self.constant(np.array(0.5, np.float32)),
        )
