"""memsys in LlamaIndex (``llama-index-core``): a retriever over memsys's hybrid retrieval, for query and chat
engines, and a memory block that gives ``llama_index.core.memory.Memory`` a long-term memory in memsys.

    from memsys.client import Memsys
    from memsys.integrations.llamaindex import MemsysMemoryBlock, MemsysRetriever

    memsys = Memsys(api_key="msk_…")
    retriever = MemsysRetriever(client=memsys, user_id="alice", data_source="event_log")
    block = MemsysMemoryBlock(client=memsys, user_id="alice")
    memory = Memory.from_defaults(session_id="chat-42", memory_blocks=[block])  # llama_index.core.memory

Importing this module imports llama-index-core (``pip install 'memsys-client[llamaindex]'``); ``memsys`` and
``memsys.client`` never do.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.memory import BaseMemoryBlock
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "memsys.integrations.llamaindex needs llama-index-core: pip install 'memsys-client[llamaindex]'"
    ) from exc

from memsys.client import AsyncMemsys, Memsys
from memsys.models import (
    DataSource,
    MemorizeRequest,
    MemoryScope,
    RetrievalMode,
    RetrievedMemory,
    RetrieveLightweightRequest,
    RetrieveLightweightResult,
)

ASSISTANT, SYSTEM, TOOL = "assistant", "system", "tool"
"""The senders memsys's forget and export count as an assistant's (as in memsys.integrations.langchain)."""

LLM_METADATA = ("timestamp",)
"""The metadata an LLM sees beside a node's text (``MetadataMode.LLM``): when it was said; ids and scores are
for the program."""


def memory_node(memory: RetrievedMemory) -> NodeWithScore:
    """A memory as a LlamaIndex node: its text, its id, memsys's score, every other field in ``metadata``."""
    metadata = memory.model_dump(exclude={"content", "explain"}, exclude_none=True)
    hidden = [key for key in metadata if key not in LLM_METADATA]
    node = TextNode(
        id_=memory.id,
        text=memory.content,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=list(metadata),
    )
    return NodeWithScore(node=node, score=memory.score)


def _request(query: str, fields: dict[str, Any]) -> RetrieveLightweightRequest:
    # Unset filters stay out of the body: the server's defaults apply.
    return RetrieveLightweightRequest(query=query, **{k: v for k, v in fields.items() if v is not None})


class MemsysRetriever(BaseRetriever):
    """Nodes from ``POST /api/v3/agentic/retrieve_lightweight`` (RRF of the vector and BM25 legs by default),
    for ``retriever.retrieve(query)``, ``RetrieverQueryEngine`` and ``ContextChatEngine``.

    The arguments are the request's; ``search_kwargs`` holds any other field (``time_range_days``, …). Give
    ``client`` (sync), ``async_client`` (``aretrieve`` without a thread) or both; neither: ``Memsys()`` from
    ``MEMSYS_BASE_URL`` and ``MEMSYS_API_KEY``."""

    def __init__(
        self,
        *,
        client: Memsys | None = None,
        async_client: AsyncMemsys | None = None,
        user_id: str | None = None,
        group_id: str | None = None,
        top_k: int = 10,
        retrieval_mode: RetrievalMode = "rrf",
        data_source: DataSource = "episode",
        memory_scope: MemoryScope = "all",
        radius: float | None = None,
        time_aware: bool = True,
        search_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.client = client if client is not None or async_client is not None else Memsys()
        self.async_client = async_client
        self.fields: dict[str, Any] = {
            "user_id": user_id,
            "group_id": group_id,
            "top_k": top_k,
            "retrieval_mode": retrieval_mode,
            "data_source": data_source,
            "memory_scope": memory_scope,
            "radius": radius,
            "time_aware": time_aware,
            **(search_kwargs or {}),
        }

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.client is None:
            raise ValueError("MemsysRetriever has only an async_client: use aretrieve, or give client too")
        result = self.client.retrieve_lightweight(_request(query_bundle.query_str, self.fields))
        return [memory_node(memory) for memory in result.memories]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.async_client is None:
            return await asyncio.to_thread(self._retrieve, query_bundle)
        result = await self.async_client.retrieve_lightweight(_request(query_bundle.query_str, self.fields))
        return [memory_node(memory) for memory in result.memories]


class MemsysMemoryBlock(BaseMemoryBlock[str]):
    """A long-term memory block of ``llama_index.core.memory.Memory`` kept in memsys.

    - **Recall** (``aget``, each time the memory is read): memsys's retrieval for ``user_id`` (across all their
      sessions), queried with the latest user message; the hits as lines ``- [date] text``, which ``Memory``
      puts in the system message under this block's ``name``.
    - **Storing** (``aput``): the messages ``Memory`` flushes out of its short-term queue (as it does for its own
      vector and fact blocks) are memorized into the session's memsys group: ``group_id``, else the
      ``Memory``'s ``session_id``. A user message is sent by ``user_id``, an assistant's by ``assistant``, a
      system's (or developer's) by ``system``, a tool's by ``tool``; messages without text are not stored.
    """

    name: str = Field(default="memsys", description="The name of the memory block.")
    client: Memsys | None = Field(default=None, exclude=True)
    async_client: AsyncMemsys | None = Field(default=None, exclude=True)
    user_id: str = Field(description="The memsys user whose memories are recalled, and who sends user messages.")
    group_id: str | None = Field(default=None, description="The memsys group to store in; None: the session's.")
    top_k: int = Field(default=5, description="How many memories to recall.")
    retrieval_mode: RetrievalMode = "rrf"
    data_source: DataSource = "episode"
    memory_scope: MemoryScope = "all"
    search_kwargs: dict[str, Any] = Field(default_factory=dict, description="Other retrieve_lightweight fields.")
    _last_time: datetime | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        if self.client is None and self.async_client is None:
            self.client = Memsys()

    def _query(self, messages: list[ChatMessage] | None) -> str | None:
        for message in reversed(messages or []):
            text = _text(message)
            if message.role.value == "user" and text.strip():
                return text
        return None

    async def _retrieve(self, request: RetrieveLightweightRequest) -> RetrieveLightweightResult:
        if self.async_client is not None:
            return await self.async_client.retrieve_lightweight(request)
        return await asyncio.to_thread(self.client.retrieve_lightweight, request)  # type: ignore[union-attr]

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = self._query(messages)
        if query is None:
            return ""
        fields = {
            "user_id": self.user_id,
            "top_k": self.top_k,
            "retrieval_mode": self.retrieval_mode,
            "data_source": self.data_source,
            "memory_scope": self.memory_scope,
            **self.search_kwargs,
        }
        result = await self._retrieve(_request(query, fields))
        return "\n".join(f"- [{memory.timestamp[:10]}] {memory.content}" for memory in result.memories)

    def _create_time(self) -> datetime:
        """Now, and later than the previous message's: the server orders a conversation by ``create_time``."""
        now = datetime.now(UTC)
        if self._last_time is not None and now <= self._last_time:
            now = self._last_time + timedelta(microseconds=1)
        self._last_time = now
        return now

    def _requests(self, messages: list[ChatMessage]) -> list[MemorizeRequest]:
        senders = {
            "user": self.user_id,
            **dict.fromkeys(("assistant", "chatbot", "model"), ASSISTANT),
            **dict.fromkeys(("system", "developer"), SYSTEM),
            **dict.fromkeys(("tool", "function"), TOOL),
        }
        requests = []
        for message in messages:
            text, role = _text(message), message.role.value
            if not text.strip():
                continue
            group_id = self.group_id or message.additional_kwargs.get("session_id")
            if group_id is None:
                raise ValueError("MemsysMemoryBlock stores into group_id, or the Memory's session: give group_id")
            requests.append(
                MemorizeRequest(
                    group_id=group_id,
                    message_id=uuid.uuid4().hex,
                    create_time=self._create_time(),
                    sender=senders[role],
                    content=text,
                )
            )
        return requests

    async def _aput(self, messages: list[ChatMessage]) -> None:
        for request in self._requests(messages):  # one at a time: in order, as the chat had them
            if self.async_client is not None:
                await self.async_client.memorize(request)
            else:
                await asyncio.to_thread(self.client.memorize, request)  # type: ignore[union-attr]


def _text(message: ChatMessage) -> str:
    """A message's words: its text blocks (images, audio and documents are not memorized)."""
    return "".join(getattr(block, "text", "") for block in message.blocks)
