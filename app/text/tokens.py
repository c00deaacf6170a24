"""LLM tokens: the project's one token counter (context budgets, the agent's compaction, MemCell limits).

PROVISIONAL: an estimate until a BPE tokenizer that works offline is wired in.
"""

from __future__ import annotations

import json
import re
from typing import Any

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

MESSAGE_OVERHEAD = 4
"""Tokens a chat message costs beyond its text (role and separators, as OpenAI's chat format counts)."""


def count_tokens(text: str) -> int:
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


def truncate_tokens(text: str, max_tokens: int) -> str:
    """The longest beginning of ``text`` with at most ``max_tokens`` tokens."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(text[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def count_message_tokens(message: dict[str, Any]) -> int:
    """A chat message's tokens: its text, name, tool calls (as JSON) and the format's overhead."""
    tokens = MESSAGE_OVERHEAD + count_tokens(message.get("content") or "")
    if message.get("name"):
        tokens += count_tokens(message["name"])
    if message.get("tool_calls"):
        tokens += count_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    return tokens
