"""memsys in LangChain (``langchain-core``): a retriever over memsys's hybrid retrieval, and a chat message
history that memorizes each message.

    from memsys.client import Memsys
    from memsys.integrations.langchain import MemsysChatMessageHistory, MemsysRetriever

    memsys = Memsys(api_key="msk_…")
    retriever = MemsysRetriever(client=memsys, user_id="alice", data_source="event_log")
    history = MemsysChatMessageHistory(client=memsys, session_id="chat-42", user_id="alice")

Importing this module imports langchain-core (``pip install 'memsys-client[langchain]'``); ``memsys`` and
``memsys.client`` never do.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "memsys.integrations.langchain needs langchain-core: pip install 'memsys-client[langchain]'"
    ) from exc

from pydantic import Field, model_validator

from memsys.client import AsyncMemsys, Memsys
from memsys.models import (
    DataSource,
    MemorizeRequest,
    MemoryScope,
    RetrievalMode,
    RetrievedMemory,
    RetrieveLightweightRequest,
)

ASSISTANT, SYSTEM, TOOL = "assistant", "system", "tool"
"""The senders of an assistant's, system's and tool's messages: the names memsys's forget and export know as an
assistant's, so that a user's conversation with the assistant goes whole with the user (and comes in their export)."""


def memory_document(memory: RetrievedMemory) -> Document:
    """A memory as a LangChain document: its text as ``page_content``, every other field (``score``,
    ``memory_type``, ``timestamp``, ``user_id``, ``group_id``, ``source_message_ids``, …) in ``metadata``."""
    metadata = memory.model_dump(exclude={"content"}, exclude_none=True)
    return Document(id=memory.id, page_content=memory.content, metadata=metadata)


class MemsysRetriever(BaseRetriever):
    """Documents from ``POST /api/v3/agentic/retrieve_lightweight``: by default RRF of the vector and BM25 legs.

    The fields are the request's; ``invoke(query, **overrides)`` changes any of them for one query (e.g.
    ``group_id``). ``search_kwargs`` holds any other request field (``time_range_days``, ``explain``, …). Give
    ``client`` (sync), ``async_client`` (for ``ainvoke`` without a thread) or both; neither: ``Memsys()`` from
    ``MEMSYS_BASE_URL`` and ``MEMSYS_API_KEY``."""

    client: Memsys | None = None
    async_client: AsyncMemsys | None = None
    user_id: str | None = None
    group_id: str | None = None
    top_k: int = 10
    retrieval_mode: RetrievalMode = "rrf"
    data_source: DataSource = "episode"
    memory_scope: MemoryScope = "all"
    radius: float | None = None
    time_aware: bool = True
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _a_client(self) -> MemsysRetriever:
        if self.client is None and self.async_client is None:
            self.client = Memsys()
        return self

    def request(self, query: str, **overrides: Any) -> RetrieveLightweightRequest:
        fields = {
            "query": query,
            "user_id": self.user_id,
            "group_id": self.group_id,
            "top_k": self.top_k,
            "retrieval_mode": self.retrieval_mode,
            "data_source": self.data_source,
            "memory_scope": self.memory_scope,
            "radius": self.radius,
            "time_aware": self.time_aware,
            **self.search_kwargs,
            **overrides,
        }
        # Unset filters stay out of the body: the server's defaults apply.
        return RetrieveLightweightRequest(**{k: v for k, v in fields.items() if v is not None})

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        if self.client is None:
            raise ValueError("MemsysRetriever has only an async_client: use ainvoke, or give client too")
        result = self.client.retrieve_lightweight(self.request(query, **overrides))
        return [memory_document(memory) for memory in result.memories]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        if self.async_client is None:
            return await super()._aget_relevant_documents(query, run_manager=run_manager, **overrides)
        result = await self.async_client.retrieve_lightweight(self.request(query, **overrides))
        return [memory_document(memory) for memory in result.memories]


class MemsysChatMessageHistory(BaseChatMessageHistory):
    """A chat session stored in memsys: each message is memorized into the conversation ``session_id`` (a group
    of memsys), so it becomes the user's memories; ``messages`` reads the session back.

    Senders: a human message is ``user_id``'s, an AI message ``assistant``'s, a system message ``system``'s and
    a tool message ``tool``'s (the names memsys treats as an assistant's). ``message_id`` is the message's
    ``id`` when it has one (so adding it again stores it once), else a new UUID.

    ``messages`` reads the user's export (``GET /api/v3/agentic/export``, the route that returns stored messages
    as sent) and keeps this session's: it holds the assistant's messages because the session is the user's
    alone with the assistant; it costs one export of the user per read. ``clear()`` forgets the session
    (``DELETE /api/v3/agentic/groups``): its messages and the memories formed from them.
    """

    def __init__(
        self,
        session_id: str,
        user_id: str,
        *,
        client: Memsys | None = None,
        async_client: AsyncMemsys | None = None,
        user_name: str | None = None,
        session_name: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.user_id = user_id
        self.user_name = user_name
        self.session_name = session_name
        self.client = client if client is not None or async_client is not None else Memsys()
        self.async_client = async_client
        self._last_time: datetime | None = None

    def _create_time(self) -> datetime:
        """Now, and later than the previous message's: the server orders a conversation by ``create_time``."""
        now = datetime.now(UTC)
        if self._last_time is not None and now <= self._last_time:
            now = self._last_time + timedelta(microseconds=1)
        self._last_time = now
        return now

    def _sender(self, message: BaseMessage) -> str:
        senders = {"human": self.user_id, "ai": ASSISTANT, "system": SYSTEM, "tool": TOOL}
        if message.type not in senders:
            raise ValueError(f"memsys stores human, ai, system and tool messages, not {message.type!r}")
        return senders[message.type]

    def _requests(self, messages: Sequence[BaseMessage]) -> list[MemorizeRequest]:
        """A message with no text (an AI message with tool calls only) is not stored: memsys keeps words."""
        return [
            MemorizeRequest(
                group_id=self.session_id,
                group_name=self.session_name,
                message_id=message.id or uuid.uuid4().hex,
                create_time=self._create_time(),
                sender=self._sender(message),
                sender_name=self.user_name if message.type == "human" else None,
                content=message.text,
            )
            for message in messages
            if message.text.strip()
        ]

    def _session_messages(self, export: dict[str, Any]) -> list[BaseMessage]:
        kinds = {self.user_id: HumanMessage, ASSISTANT: AIMessage, SYSTEM: SystemMessage}
        found: list[BaseMessage] = []
        for stored in export["messages"]:
            if stored["group_id"] != self.session_id:
                continue
            kind = kinds.get(stored["sender"])
            if kind is None:
                found.append(ChatMessage(role=stored["sender"], content=stored["content"], id=stored["message_id"]))
            else:
                found.append(kind(content=stored["content"], id=stored["message_id"]))
        return found

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        if self.client is None:
            raise ValueError("this history has only an async_client: use aget_messages, or give client too")
        return self._session_messages(self.client.export_user(self.user_id))

    async def aget_messages(self) -> list[BaseMessage]:
        if self.async_client is None:
            return await super().aget_messages()
        return self._session_messages(await self.async_client.export_user(self.user_id))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        if self.client is None:
            raise ValueError("this history has only an async_client: use aadd_messages, or give client too")
        for request in self._requests(messages):  # one at a time: in order, as a chat sends them
            self.client.memorize(request)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if self.async_client is None:
            return await super().aadd_messages(messages)
        for request in self._requests(messages):
            await self.async_client.memorize(request)

    def clear(self) -> None:
        if self.client is None:
            raise ValueError("this history has only an async_client: use aclear, or give client too")
        self.client.forget_group(self.session_id)

    async def aclear(self) -> None:
        if self.async_client is None:
            return await super().aclear()
        await self.async_client.forget_group(self.session_id)
