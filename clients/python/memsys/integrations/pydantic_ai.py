"""memsys as a pydantic-ai agent's long-term memory: a toolset of two tools, ``search_memories`` and
``remember``, for one user that the application names (the model never chooses whose memory it reads).

    from pydantic_ai import Agent
    from memsys.client import AsyncMemsys
    from memsys.integrations.pydantic_ai import MemsysToolset

    agent = Agent("openai:gpt-4o-mini")
    memory = MemsysToolset(AsyncMemsys(api_key="msk_…"), user_id="alice", group_id="chat-42")
    result = await agent.run("What can I not eat?", toolsets=[memory])

A refusal of memsys (a 400 naming the field, a 413, a 429 or 503 after the client's retries, no answer) reaches
the model as a failed tool result, so it can answer without memory; a 401 or 403 is the application's key, not
the model's doing, and fails the run. Importing this module imports pydantic-ai (``pip install
'memsys-client[pydantic-ai]'``); ``memsys`` and ``memsys.client`` never do.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

try:
    from pydantic_ai import FunctionToolset, ToolFailed
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "memsys.integrations.pydantic_ai needs pydantic-ai: pip install 'memsys-client[pydantic-ai]'"
    ) from exc

import anyio.to_thread

from memsys.client import AsyncMemsys, Memsys
from memsys.errors import Forbidden, MemsysError, Unauthorized
from memsys.models import MemorizeRequest, RetrievalMode, RetrievedMemory, RetrieveLightweightRequest

INSTRUCTIONS = (
    "You have a long-term memory of this user (memsys). Before answering anything that may depend on what the "
    "user said in earlier conversations (their preferences, facts about them, plans), call search_memories. "
    "When the user tells you something worth keeping, call remember with their words."
)
"""What the toolset adds to the agent's instructions, unless given others (``instructions=None``: none)."""

MemoryType = Literal["episode", "event_log", "semantic_memory"]


def compact_memory(memory: RetrievedMemory) -> dict[str, Any]:
    """What the model reads of a memory: no provenance ids; ``formed: false`` marks a stored message that is not
    yet formed into memories (memsys forms them in the background)."""
    keys = {"memory_type", "title", "content", "timestamp", "score"}
    compact = memory.model_dump(include=keys, exclude_none=True)
    return compact if memory.formed else {**compact, "formed": False}


class MemsysToolset(FunctionToolset[Any]):
    """The tools ``search_memories`` (memsys's hybrid retrieval over ``user_id``'s memories, from every
    conversation) and ``remember`` (memorize a message of ``user_id`` into ``group_id``, or into their personal
    notes without one), with instructions telling the model when to call them.

    ``client``: an ``AsyncMemsys``, or a ``Memsys`` (called in a worker thread); neither: ``AsyncMemsys()`` from
    ``MEMSYS_BASE_URL`` and ``MEMSYS_API_KEY``. The key decides the tenant; ``user_id`` the person. Build one per
    user and pass it per run (``agent.run(prompt, toolsets=[MemsysToolset(...)])``), or to ``Agent(toolsets=…)``
    for an agent that serves one user.
    """

    def __init__(
        self,
        client: AsyncMemsys | Memsys | None = None,
        *,
        user_id: str,
        group_id: str | None = None,
        user_name: str | None = None,
        top_k: int = 5,
        retrieval_mode: RetrievalMode = "rrf",
        instructions: str | None = INSTRUCTIONS,
        id: str = "memsys",
    ) -> None:
        super().__init__([self.search_memories, self.remember], id=id, instructions=instructions)
        self.client = client if client is not None else AsyncMemsys()
        self.user_id = user_id
        self.group_id = group_id
        self.user_name = user_name
        self.top_k = top_k
        self.retrieval_mode = retrieval_mode

    async def search_memories(self, query: str, memory_type: MemoryType = "episode") -> dict[str, Any]:
        """Search the user's long-term memory (from all earlier conversations) with a question or keywords.
        Returns how many were found and the memories, best first, each with its content, timestamp and score
        in [0, 1].

        Args:
            query: what to look for, e.g. "What food does the user avoid?"
            memory_type: episode (what happened, the default), event_log (single facts), semantic_memory
                (lasting facts and plans)
        """
        request = RetrieveLightweightRequest(
            query=query,
            user_id=self.user_id,
            data_source=memory_type,
            retrieval_mode=self.retrieval_mode,
            top_k=self.top_k,
        )
        result = await self._send("retrieve_lightweight", request)
        # An object, not a bare list: an empty list would reach the model as an empty tool result.
        return {"count": len(result.memories), "memories": [compact_memory(memory) for memory in result.memories]}

    async def remember(self, content: str) -> dict[str, Any]:
        """Store something the user said in long-term memory, in the user's own words: a fact about them, a
        preference, a plan. Memories are formed from it in the background and found by search_memories.

        Args:
            content: the user's message, as they said it
        """
        request = MemorizeRequest(
            group_id=self.group_id,
            message_id=uuid.uuid4().hex,
            create_time=datetime.now(UTC),
            sender=self.user_id,
            sender_name=self.user_name,
            content=content,
        )
        result = await self._send("memorize", request)
        return {"stored": True, "message_id": request.message_id, "status": result.status_info}

    async def _send(self, operation: str, request: Any) -> Any:
        try:
            if isinstance(self.client, AsyncMemsys):
                return await getattr(self.client, operation)(request)
            return await anyio.to_thread.run_sync(getattr(self.client, operation), request)
        except (Unauthorized, Forbidden):
            raise
        except MemsysError as exc:
            raise ToolFailed(f"memsys refused: {exc}") from exc
