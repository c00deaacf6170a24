"""EverOS's v2 memory API (``/api/v2/memory/*``), as the ``everos-cloud`` 1.0.0 client calls it: answers are
``{"request_id", "data"}``, a validation error is a 422.

How v2's scopes map onto memsys's (docs/everos-v2.md): a v2 session is a memsys group (``group_id`` =
``session_id``), its messages' ``sender_id`` the sender (a memory's ``user_id``); ``app_id`` and ``project_id``
are columns of their own ('default' when not named, as v3 stores them), and ``agent_id`` is the sender of the
batch's first assistant message. One memory is one row whichever API wrote it: v3 finds v2's memories in the group
named by the session, v2 finds v3's under app 'default', project 'default'.
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.compat import service
from app.compat.v2_schemas import AddInput, DeleteInput, EditInput, FlushInput, GetInput, Message, SearchInput
from app.db.tables import memories
from app.errors import InvalidParameter, NotSupported
from app.formation import profiles
from app.formation import repository as formation_rows
from app.http.auth import actor_of
from app.http.dependencies import provide_runtime
from app.memories import repository as memory_rows
from app.memories import service as memory_service
from app.memorize import service as memorize
from app.memorize.schemas import MemorizeRequest
from app.observability import request_ids
from app.retrieval import filters as caller_filters
from app.retrieval import service as retrieval
from app.retrieval.repository import SearchFilters
from app.runtime import Runtime
from app.text.timeparse import EARLIEST, LATEST

Data = dict[str, Any]
DEFAULT_TOP_K = 10
METHODS = {"keyword": "bm25", "vector": "embedding", "hybrid": "rrf", "agentic": "rrf"}
"""v2's methods as memsys's modes. ``agentic`` (an LLM-guided search) is a hybrid search here: /api/v3's
retrieve_agentic is the LLM-guided one, with the client's or the server's LLM."""


EDIT_ATTEMPTS = 3


class V2MemoryController(Controller):
    path = "/api/v2"
    tags = ["EverOS v2"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @post("/memory/add", operation_id="v2AddMemory")
    async def add(self, request: Request, data: JSONBody[AddInput], runtime: NamedDependency[Runtime]) -> Response:
        agent = next((m.sender_id for m in data.messages if m.role == "assistant"), None)
        requests = [_memorize_request(data, message, i, agent) for i, message in enumerate(data.messages)]
        for memorize_request, message in zip(requests, data.messages, strict=True):
            await memorize.memorize(runtime, memorize_request, role=message.role)
        status, code = ("queued", 202) if data.async_mode else ("accumulated", 200)
        return _answer(request, {"message_count": len(requests), "status": status}, code)

    @post("/memory/flush", operation_id="v2FlushMemory")
    async def flush(self, request: Request, data: JSONBody[FlushInput], runtime: NamedDependency[Runtime]) -> Response:
        _, result = await service.flush(runtime, data.session_id, None)
        return _answer(request, {"status": "extracted" if result.count else "no_extraction"})

    @post("/memory/search", operation_id="v2SearchMemory")
    async def search(
        self, request: Request, data: JSONBody[SearchInput], runtime: NamedDependency[Runtime]
    ) -> Response:
        retrieval.check_query_length(data.query, runtime.settings)
        top_k = DEFAULT_TOP_K if data.top_k == -1 else data.top_k
        if top_k < 1:
            raise InvalidParameter("Invalid field top_k: -1 or 1 to 100")
        mode = METHODS[data.method]
        caller = _scoped_filter(data.app_id, data.project_id, data.agent_id, data.filters)
        query_vector = (await runtime.embedder.embed([data.query], query=True))[0] if mode != "bm25" else None

        async def search(memory_type: str) -> list[Data]:
            found = await retrieval.search(
                runtime,
                query=data.query,
                filters=SearchFilters(
                    memory_type=memory_type,
                    time_from=EARLIEST,
                    time_to=LATEST,
                    user_id=data.user_id if memory_type == "episode" else None,
                    one_copy=memory_type == "episode" and data.user_id is None,
                    include_pending=memory_type == "episode",
                    caller=caller,
                ),
                top_k=top_k,
                mode=mode,
                radius=data.radius,
                query_vector=query_vector,
            )
            return [m for m in found.memories if data.min_score is None or m["score"] >= data.min_score]

        hits = await search("episode")
        # An agent's memory: its cases and skills (a search by user leaves them out: they are the agent's).
        cases = await search("agent_case") if data.agent_id is not None else []
        skills = await search("agent_skill") if data.agent_id is not None else []
        formed = [m for m in hits if m["memory_type"] != "message"]
        scopes = await _scopes(runtime, [m["id"] for m in formed])
        episodes = [{**_episode(m, scopes.get(m["id"], {})), "score": round(m["score"], 6)} for m in formed]
        pending = [_unprocessed(m, data) for m in hits if m["memory_type"] == "message"]
        profiles = []
        if data.include_profile and data.user_id:
            profiles = [
                {**_profile(p, data), "score": 1.0} for p in await retrieval.profile(runtime, data.user_id, None)
            ]
        agent_scopes = await _scopes(runtime, [m["id"] for m in cases + skills])
        body = {
            "episodes": episodes,
            "profiles": profiles,
            "agent_cases": [{**_case(m, agent_scopes[m["id"]]), "score": round(m["score"], 6)} for m in cases],
            "agent_skills": [{**_skill(m, agent_scopes[m["id"]]), "score": round(m["score"], 6)} for m in skills],
            "unprocessed_messages": pending,
        }
        return _answer(request, body)

    @post("/memory/get", operation_id="v2GetMemory")
    async def get(self, request: Request, data: JSONBody[GetInput], runtime: NamedDependency[Runtime]) -> Response:
        lists: Data = {"episodes": [], "profiles": [], "agent_cases": [], "agent_skills": []}
        total = 0
        if data.memory_type != "profile":
            caller = _scoped_filter(data.app_id, data.project_id, data.agent_id, data.filters)
            async with runtime.engine.connect() as conn:
                rows, total = await memory_rows.numbered_page(
                    conn,
                    user_id=data.user_id if data.memory_type == "episode" else None,
                    group_ids=None,
                    memory_type=data.memory_type,
                    start_time=None,
                    end_time=None,
                    offset=(data.page - 1) * data.page_size,
                    limit=data.page_size,
                    caller=caller,
                    ascending=data.sort_order == "asc",
                )
            shown = {"episode": ("episodes", _episode), "agent_case": ("agent_cases", _case)}
            key, shape = shown.get(data.memory_type, ("agent_skills", _skill))
            lists[key] = [shape(row, row) for row in rows]
        elif data.memory_type == "profile":
            if data.user_id is None:
                raise InvalidParameter("Missing required field: user_id (profiles are a user's)")
            found = await retrieval.profile(runtime, data.user_id, None)
            total = len(found)
            start = (data.page - 1) * data.page_size
            lists["profiles"] = [_profile(p, data) for p in found[start : start + data.page_size]]
        count = sum(len(items) for items in lists.values())
        return _answer(request, {**lists, "total_count": total, "count": count})

    @post("/memory/delete", operation_id="v2DeleteMemory")
    async def delete(
        self, request: Request, data: JSONBody[DeleteInput], runtime: NamedDependency[Runtime]
    ) -> Response:
        named = [name for name in ("user_id", "agent_id", "session_id") if getattr(data, name)]
        if not named:
            raise InvalidParameter("Missing required field: user_id, agent_id or session_id (what to delete)")
        conditions = [{"app_id": data.app_id}, {"project_id": data.project_id}]
        conditions += [{name: getattr(data, name)} for name in named if name != "user_id"]
        count = await memory_service.delete_matching(
            runtime,
            memory_id=None,
            user_id=data.user_id,
            group_id=None,
            actor=actor_of(request),
            caller=caller_filters.parse({"AND": conditions}),
        )
        return _answer(request, {"filters": named, "count": count})

    @post("/memory/edit", operation_id="v2EditProfile")
    async def edit(self, request: Request, data: JSONBody[EditInput], runtime: NamedDependency[Runtime]) -> Response:
        """A new version of the user's own profile (the personal one, group_id null: memsys keeps a profile per user
        and group) with the operations applied; the versions before it stay."""
        operations = [op.model_dump(exclude_none=True) for op in data.operations]
        for attempt in range(EDIT_ATTEMPTS):
            try:
                async with runtime.engine.begin() as conn:
                    latest = (await formation_rows.latest_profiles(conn, [data.user_id], None)).get(data.user_id)
                    base = latest["profile"] if latest else {"user_id": data.user_id}
                    profile, results = profiles.edited(base, operations, lambda: uuid.uuid4().hex[:12])
                    applied = sum(result["status"] == "applied" for result in results)
                    version = (latest or {}).get("version", 0) + (1 if applied else 0)
                    if applied:
                        row = {"user_id": data.user_id, "group_id": None, "version": version, "profile": profile}
                        await formation_rows.insert_profiles(conn, [{**row, "source": "edited", "memcell_id": None}])
                break
            except IntegrityError:  # a version written meanwhile (formation, another edit): read it and apply again
                if attempt == EDIT_ATTEMPTS - 1:
                    raise
        body = {"user_id": data.user_id, "version": version, "applied": applied, "results": results, "profile": profile}
        return _answer(request, body)

    # Not in memsys's OpenAPI document: it lists what memsys serves, and this route serves only its refusal.
    @post("/object/sign", operation_id="v2SignObjects", include_in_schema=False)
    async def sign(self) -> Response:
        raise NotSupported(
            "memsys stores no objects: send text, and other content as references (type, name, uri) in "
            "a message's content items"
        )


def _answer(request: Request, data: Data, status_code: int = 200) -> Response:
    return Response({"request_id": request_ids.of_scope(request.scope), "data": data}, status_code=status_code)


def _scoped_filter(
    app_id: str, project_id: str, agent_id: str | None, given: dict[str, Any] | None
) -> caller_filters.Filter:
    scopes = {"app_id": app_id, "project_id": project_id, **({"agent_id": agent_id} if agent_id is not None else {})}
    scoped = caller_filters.parse(scopes)
    checked = caller_filters.parse(given)  # its own errors name "filters.…"
    return scoped if checked is None else caller_filters.Filter({"AND": [scoped.tree, checked.tree]})


def _memorize_request(data: AddInput, message: Message, number: int, agent: str | None) -> MemorizeRequest:
    where = f"messages[{number}]"
    text, references = _text(message, where)
    when = service.moment(message.timestamp, f"{where}.timestamp")
    metadata: Data = {}
    if references:
        metadata["attachments"] = references
    if message.tool_calls:
        metadata["tool_calls"] = [{"id": call.id, "name": call.function.name} for call in message.tool_calls]
    if message.tool_call_id:
        metadata["tool_call_id"] = message.tool_call_id
    return service.memorize_request(
        where,
        group_id=data.session_id,
        message_id=service.message_id_for(data.session_id, message.sender_id, when, text),
        create_time=when,
        sender=message.sender_id,
        sender_name=message.sender_name,
        content=text,
        metadata=metadata,
        app_id=data.app_id,
        project_id=data.project_id,
        session_id=data.session_id,
        agent_id=agent,
    )


MAX_ARGUMENTS_SHOWN = 300


def _text(message: Message, where: str) -> tuple[str, list[Data]]:
    """The message's searchable text (its text parts, a tool call's name and arguments, a reference's name) and the
    references it holds."""
    parts: list[str] = []
    references: list[Data] = []
    if isinstance(message.content, str):
        parts.append(message.content)
    else:
        for item in message.content:
            if item.type == "text":
                parts.append(item.text or "")
            else:
                reference = {key: getattr(item, key) for key in ("type", "name", "uri", "ext") if getattr(item, key)}
                references.append(reference)
                parts.append(f"[{item.type}: {item.name or item.uri or 'attachment'}]")
    for call in message.tool_calls or []:
        arguments = call.function.arguments[:MAX_ARGUMENTS_SHOWN]
        parts.append(f"[calls {call.function.name}({arguments})]")
    text = "\n".join(part for part in parts if part.strip())
    if not text:
        raise InvalidParameter(f"Invalid field {where}.content: no text (and no tool call) to remember")
    return text, references


async def _scopes(runtime: Runtime, ids: list[str]) -> dict[str, Data]:
    """The v2 scopes of these memories, by id (a search's answer names the user and group only)."""
    if not ids:
        return {}
    columns = (memories.c.id, memories.c.app_id, memories.c.project_id, memories.c.session_id, memories.c.agent_id)
    async with runtime.engine.connect() as conn:
        rows = (await conn.execute(select(*columns).where(memories.c.id.in_(ids)))).mappings()
        return {str(row["id"]): dict(row) for row in rows}


def _episode(memory: Data, scope: Data) -> Data:
    return {
        "id": memory["id"],
        "app_id": scope.get("app_id", "default"),
        "project_id": scope.get("project_id", "default"),
        "user_id": memory.get("user_id"),
        "session_id": scope.get("session_id") or memory.get("group_id"),
        "timestamp": memory["timestamp"],
        "sender_ids": [memory["user_id"]] if memory.get("user_id") else [],
        "summary": memory.get("summary") or memory["content"][:200],
        "subject": memory.get("title") or "",
        "episode": memory["content"],
        "type": "conversation",
        "atomic_facts": [],
    }


def _agents(memory: Data, scope: Data) -> Data:
    """What an agent case and an agent skill both name: the memory and its agent's scopes."""
    return {key: scope[key] for key in ("app_id", "project_id", "agent_id")} | {"id": memory["id"]}


def _case(memory: Data, scope: Data) -> Data:
    meta = memory["metadata"]
    return {
        **_agents(memory, scope),
        "session_id": scope["session_id"] or memory.get("group_id") or "",
        "task_intent": meta["task_intent"],
        "approach": meta["approach"],
        "quality_score": meta["quality_score"],
        "key_insight": meta.get("key_insight"),
        "timestamp": memory["timestamp"],
    }


def _skill(memory: Data, scope: Data) -> Data:
    meta = memory["metadata"]
    return {
        **_agents(memory, scope),
        "name": meta["name"],
        "description": meta["description"],
        "content": memory["content"],
        "confidence": meta["confidence"],
        "maturity_score": meta["maturity_score"],
        "source_case_ids": meta["source_case_ids"],
    }


def _unprocessed(memory: Data, data: SearchInput) -> Data:
    sender = memory.get("user_id") or "unknown"
    content = memory["content"]
    name = (memory.get("metadata") or {}).get("sender_name")
    if name and content.startswith(f"{name}: "):
        content = content[len(name) + 2 :]
    return {
        "id": memory["id"],
        "app_id": data.app_id,
        "project_id": data.project_id,
        "session_id": memory.get("group_id") or "",
        "sender_id": sender,
        "sender_name": name,
        "role": "user",
        "content": content,
        "timestamp": memory["timestamp"],
    }


def _profile(profile: Data, data: SearchInput | GetInput) -> Data:
    return {
        "id": profile["id"],
        "app_id": data.app_id,
        "project_id": data.project_id,
        "user_id": profile["user_id"],
        "profile_data": service.upstream_profile({**profile, "score": 1.0})["profile_data"],
    }
