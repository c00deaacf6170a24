"""The agent's context management (seed 003): compact, compress, or auto (compact, then compress).

* **compact**: a tool reply over ``max_tool_message_tokens`` (outside the ``keep_recent_count`` latest
  messages) is stored whole in ``agent_offloads`` (PostgreSQL, the tenant's, under the chat) and replaced
  by a preview and its reference, which the ``read_offloaded`` tool accepts.
* **compress**: when the messages other than system messages and the ``keep_recent_count`` latest exceed
  ``max_total_tokens``, they are cut into groups of about ``group_token_threshold`` tokens (one group when
  unset) and the LLM summarises each into a state snapshot that replaces it; the originals are stored
  (``read_offloaded``). System messages always stay, and the kept tail never starts with a tool reply
  whose call was compressed away.
* **auto**: compact first; then compress if the whole is still over ``max_total_tokens``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from app.agent import repository
from app.agent.schemas import AgentRequest
from app.providers.llm import LLMClient, LLMConfig
from app.runtime import Runtime
from app.text.tokens import count_message_tokens, count_tokens, truncate_tokens

PREVIEW_TOKENS = 200
SUMMARY_PROMPT = """You compress part of a conversation between a user, an assistant and its memory tools into a
state snapshot that replaces it. Keep every fact found, every name, date and number, what the user asked
for and what is still open; drop repetition. Write plain prose or short bullet points, in the language of
the conversation, at most {limit} tokens."""


@dataclass
class Managed:
    """What context management did over a run."""

    offloaded: list[str] = field(default_factory=list)
    compacted: int = 0
    compressed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


async def manage(
    runtime: Runtime,
    request: AgentRequest,
    chat_id: str,
    messages: list[dict[str, Any]],
    llm: LLMClient,
    config: LLMConfig,
    managed: Managed,
) -> list[dict[str, Any]]:
    mode = request.context_manage_mode
    if mode in ("compact", "auto"):
        messages = await _compact(runtime, request, chat_id, messages, managed)
    if mode == "compress" or (mode == "auto" and total_tokens(messages) > request.max_total_tokens):
        messages = await _compress(runtime, request, chat_id, messages, llm, config, managed)
    return messages


def total_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(count_message_tokens(m) for m in messages)


def _keep(request: AgentRequest, default: int) -> int:
    return request.keep_recent_count if request.keep_recent_count is not None else default


async def _compact(
    runtime: Runtime, request: AgentRequest, chat_id: str, messages: list[dict[str, Any]], managed: Managed
) -> list[dict[str, Any]]:
    keep = _keep(request, 1)
    out = list(messages)
    for i, message in enumerate(out[: max(len(out) - keep, 0)]):
        content = message.get("content") or ""
        if message["role"] != "tool" or content.startswith("[Offloaded"):
            continue
        tokens = count_tokens(content)
        if tokens <= request.max_tool_message_tokens:
            continue
        ref = await _store(runtime, request, chat_id, "tool_message", content, tokens)
        preview = truncate_tokens(content, min(PREVIEW_TOKENS, request.max_tool_message_tokens // 2))
        out[i] = {
            **message,
            "content": f"[Offloaded: {tokens} tokens, ref {ref}; read it whole with read_offloaded]\n{preview}…",
        }
        managed.offloaded.append(ref)
        managed.compacted += 1
    return out


async def _compress(
    runtime: Runtime,
    request: AgentRequest,
    chat_id: str,
    messages: list[dict[str, Any]],
    llm: LLMClient,
    config: LLMConfig,
    managed: Managed,
) -> list[dict[str, Any]]:
    keep = _keep(request, 2)
    start = max(len(messages) - keep, 0)
    while 0 < start < len(messages) and messages[start]["role"] == "tool":
        start -= 1  # a tool reply stays with the call it answers
    older = [(i, m) for i, m in enumerate(messages[:start]) if m["role"] != "system"]
    if sum(count_message_tokens(m) for _, m in older) <= request.max_total_tokens or not older:
        return messages
    groups = _groups([m for _, m in older], request.group_token_threshold)
    snapshots = []
    for group in groups:
        snapshots.append(await _snapshot(runtime, request, chat_id, group, llm, config, managed))
    compressed = {i for i, _ in older}
    head = [m for i, m in enumerate(messages[:start]) if i not in compressed]  # the system messages
    managed.compressed += len(compressed)
    return head + snapshots + messages[start:]


def _groups(messages: list[dict[str, Any]], threshold: int | None) -> list[list[dict[str, Any]]]:
    """Consecutive groups of about ``threshold`` tokens; a message over it alone; one group when unset."""
    if not threshold:
        return [messages]
    groups: list[list[dict[str, Any]]] = [[]]
    used = 0
    for message in messages:
        tokens = count_message_tokens(message)
        if groups[-1] and (used + tokens > threshold or tokens > threshold):
            groups.append([])
            used = 0
        groups[-1].append(message)
        used += tokens
    return groups


async def _snapshot(
    runtime: Runtime,
    request: AgentRequest,
    chat_id: str,
    group: list[dict[str, Any]],
    llm: LLMClient,
    config: LLMConfig,
    managed: Managed,
) -> dict[str, Any]:
    transcript = "\n".join(_line(m) for m in group)
    limit = max(min(request.max_total_tokens // 4, 1000), 50)
    reply = await llm.chat(
        [
            {"role": "system", "content": SUMMARY_PROMPT.format(limit=limit)},
            {"role": "user", "content": transcript},
        ],
        config=config,
        max_tokens=limit,
    )
    managed.prompt_tokens += reply.prompt_tokens
    managed.completion_tokens += reply.completion_tokens
    original = json.dumps(group, ensure_ascii=False)
    ref = await _store(runtime, request, chat_id, "compressed", original, count_tokens(original))
    managed.offloaded.append(ref)
    summary = truncate_tokens(reply.content, limit)
    return {"role": "user", "content": f"[State snapshot of {len(group)} earlier messages, ref {ref}]\n{summary}"}


def _line(message: dict[str, Any]) -> str:
    text = message.get("content") or ""
    if message.get("tool_calls"):
        calls = ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in message["tool_calls"])
        text = f"{text} [calls {calls}]".strip()
    return f"{message['role']}: {text}"


async def _store(runtime: Runtime, request: AgentRequest, chat_id: str, kind: str, content: str, tokens: int) -> str:
    ref = f"{chat_id}/{kind}/{uuid.uuid4().hex[:12]}"
    async with runtime.engine.begin() as conn:
        await repository.store(
            conn, ref=ref, chat_id=chat_id, user_id=request.user_id, kind=kind, content=content, tokens=tokens
        )
    return ref
