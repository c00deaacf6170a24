"""What the EverMemOS-compatible routes (app.compat.v0, app.compat.v1) do, on memsys's own services.

Thin translation both ways: upstream's names in (memory types, retrieve methods, the v1 filter language,
millisecond timestamps, ``space::`` group ids are just ids), memsys's services in the middle, and upstream's
item shapes out (``episode_id``, ``subject``, ``episode``, ``atomic_fact``, ``profile_data`` ...).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from app.errors import InvalidParameter, NotFound
from app.formation.streams import Stream
from app.memories import repository as memories
from app.memories import service as memory_life
from app.memorize import repository as messages
from app.memorize import service as memorize
from app.memorize.schemas import FlushRequest, MemorizeRequest, MemorizeResult
from app.retrieval import filters as caller_filters
from app.retrieval import service as retrieval
from app.retrieval.filters import Filter
from app.retrieval.repository import SearchFilters
from app.runtime import Runtime
from app.text.timeparse import EARLIEST, parse_iso_datetime
from app.validation import unstorable

MEMORY_TYPES = {"episodic_memory": "episode", "event_log": "event_log", "foresight": "semantic_memory"}
"""Upstream's memory types → memsys's (``profile`` is answered from the profiles)."""
UPSTREAM_TYPES = {memsys: upstream for upstream, memsys in MEMORY_TYPES.items()}
METHODS = {"keyword": "bm25", "vector": "embedding", "hybrid": "rrf", "rrf": "rrf", "agentic": "rrf"}
"""Upstream's retrieve methods → memsys's modes. ``agentic`` runs the hybrid search: the agentic path needs an
LLM configuration these clients do not send (memsys's own /retrieve_agentic takes one)."""
MAX_TOP_K = 100
MAX_PAGE = 100_000
"""Deepest page a listing reaches (an offset of at most ten million rows, never a bigint overflow)."""
MAX_MEMORY_TYPES = 8
"""Memory types one search may name (upstream has seven); each is one search per group."""
MAX_GROUP_IDS = 50
"""Groups one request may name: a search runs once per memory type and group, so the two caps bound its work."""


@dataclass
class Scope:
    """What an upstream request filters on."""

    user_id: str | None = None
    group_ids: list[str] | None = None
    start: datetime | None = None
    end: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    caller: Filter | None = None
    """What the filter says beyond one user, groups and a time range (OR, NOT, other fields: app.retrieval.filters)."""


# ---- in: times, messages, filters ------------------------------------------------------------------------


def moment(value: Any, name: str) -> datetime:
    """Unix milliseconds (v1) or ISO 8601 (v0) → an aware datetime."""
    if isinstance(value, bool):
        raise InvalidParameter(f"Invalid field {name}: a time in unix milliseconds or ISO 8601")
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value / 1000, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidParameter(f"Invalid field {name}: {value} is not a time in unix milliseconds") from exc
    try:
        return parse_iso_datetime(value)
    except (TypeError, ValueError) as exc:
        raise InvalidParameter(f"Invalid field {name}: a time in unix milliseconds or ISO 8601") from exc


def text_of(content: Any, name: str) -> str:
    """A message's content: a string, or a list of parts whose ``text`` parts are joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text") for part in content if isinstance(part, dict) and part.get("type", "text") == "text"]
        if all(isinstance(part, str) for part in parts) and parts:
            return "\n".join(parts)
    raise InvalidParameter(f"Invalid field {name}: a string, or a list of {{type: text, text}} parts")


def memorize_request(where: str, **fields: Any) -> MemorizeRequest:
    """A message of an upstream add as memorize's request; a field memorize refuses is named under ``where``
    (``messages[3].sender``)."""
    try:
        return MemorizeRequest(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        raise InvalidParameter(f"Invalid field {where}.{field}: {error['msg']}") from exc


def message_id_for(group_id: str | None, sender: str, when: datetime, content: str) -> str:
    """A message id for a message sent without one: the same message sent again gets the same id, so a
    client's retry stores it once."""
    digest = hashlib.sha256(json.dumps([group_id, sender, when.isoformat(), content]).encode()).hexdigest()
    return f"msg_{digest[:24]}"


def scope_of(filters: Any) -> Scope:
    """The v1 filter language: ``{"user_id": u}``, ``{"group_id": g}`` or ``{"group_id": {"in": [...]}}``,
    ``{"timestamp": {"gte"|"gt"|"lte"|"lt": ms}}``, and ``{"AND": [...]}`` of those; anything else (``OR``, ``NOT``,
    other operators, metadata fields) is memsys's filter language (app.retrieval.filters), with v1's names
    (``sender_id`` the user, ``session_id`` the group)."""
    scope = Scope()
    rest: list[dict[str, Any]] = []
    _merge(scope, filters if filters is not None else {}, "filters", rest)
    if rest:
        scope.caller = caller_filters.parse({"AND": [_v1_names(node) for node in rest]})
    return scope


def _v1_names(node: Any) -> Any:
    """A v1 filter node with memsys's names for v1's: ``sender_id`` is ``user_id``, ``session_id`` ``group_id``."""
    if isinstance(node, list):
        return [_v1_names(item) for item in node]
    if not isinstance(node, dict):
        return node
    renamed = {"sender_id": "user_id", "session_id": "group_id"}
    return {
        renamed.get(key, key): _v1_names(value) if key in ("AND", "OR", "NOT") else value for key, value in node.items()
    }


def _merge(scope: Scope, filters: Any, path: str, rest: list[dict[str, Any]]) -> None:
    if not isinstance(filters, dict):
        raise InvalidParameter(f"Invalid field {path}: an object")
    for key, value in filters.items():
        where = f"{path}.{key}"
        if key == "AND":
            if not isinstance(value, list):
                raise InvalidParameter(f"Invalid field {where}: a list of filters")
            for number, part in enumerate(value):
                _merge(scope, part, f"{where}[{number}]", rest)
        elif key in ("user_id", "sender_id") and len(values := _plain_values(value)) == 1:
            scope.user_id = values[0]
        elif key in ("group_id", "session_id") and (values := _plain_values(value)):
            scope.group_ids = values
        elif key == "timestamp" and isinstance(value, dict) and value and not set(value) - {"gt", "gte", "lt", "lte"}:
            for operator, bound in value.items():
                when = moment(bound, f"{where}.{operator}")
                if operator in ("gt", "gte"):
                    scope.start = when
                if operator in ("lt", "lte"):
                    scope.end = when
        else:
            rest.append({key: value})


def _plain_values(value: Any) -> list[str]:
    """An id, ``{"eq": id}`` or ``{"in": [ids]}`` as its ids; anything else: none (then the filter language)."""
    if isinstance(value, str) and value.strip():
        return [value]
    if isinstance(value, dict) and len(value) == 1:
        (operator, operand), *_ = value.items()
        if operator == "eq":
            return _plain_values(operand)
        if operator == "in" and isinstance(operand, list) and operand and all(isinstance(v, str) for v in operand):
            return list(operand)
    return []


def bounded(values: list[str], field: str, limit: int) -> list[str]:
    """``values`` without repeats, in order; more than ``limit`` different ones is an ``InvalidParameter``."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) > limit:
        raise InvalidParameter(f"Invalid field {field}: at most {limit} different values ({len(distinct)} given)")
    return distinct


def needs_scope(scope: Scope) -> None:
    if not scope.user_id and not scope.group_ids and scope.caller is None:
        raise InvalidParameter("Missing required field: user_id or group_id (in filters, or user_id / group_ids)")


# ---- the services ------------------------------------------------------------------------------------------


async def add(runtime: Runtime, request: MemorizeRequest) -> MemorizeResult:
    _, result = await memorize.memorize(runtime, request)
    return result


async def flush(runtime: Runtime, group_id: str | None, sender: str | None) -> tuple[str, MemorizeResult]:
    return await memorize.flush(runtime, FlushRequest(group_id=group_id, sender=sender))


def task_id(group_id: str | None, sender: str, message_id: str) -> str:
    """An opaque id of an add: the stream and its last message, whose state ``task_status`` reads."""
    stream = Stream.of(group_id, sender)
    raw = json.dumps([stream.kind, stream.id, message_id], ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def task_status(runtime: Runtime, task: str) -> str:
    """``success`` once the add's last message is formed, ``processing`` before; NotFound for another id."""
    try:
        parts = json.loads(base64.urlsafe_b64decode(task + "=" * (-len(task) % 4)))
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise NotFound(f"No task {task!r}") from exc
    # Only what task_id makes: three strings the database can hold (a NUL or a lone surrogate cannot be sent to it).
    storable = isinstance(parts, list) and all(isinstance(part, str) and not unstorable(part) for part in parts)
    if not storable or len(parts) != 3:
        raise NotFound(f"No task {task!r}")
    kind, stream_id, message_id = parts
    async with runtime.engine.connect() as conn:
        status = await messages.message_status(conn, kind, stream_id, message_id)
    if status is None:
        raise NotFound(f"No task {task!r}")
    return "success" if status == "processed" else "processing"


async def search(
    runtime: Runtime, *, query: str, scope: Scope, method: str, memory_types: list[str], top_k: int,
    radius: float | None = None,
) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    """Memories and profiles for an upstream search: one hybrid search per memory type and group (the
    groups' results merged by score), profiles of the user (or of the groups' members, without a user)."""
    needs_scope(scope)
    retrieval.check_query_length(query, runtime.settings)
    mode = _method(method)
    top_k = MAX_TOP_K if top_k == -1 else top_k
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidParameter(f"Invalid field top_k: -1 or 1 to {MAX_TOP_K}")
    memory_types = bounded(memory_types, "memory_types", MAX_MEMORY_TYPES)
    group_ids = bounded(scope.group_ids or [], "group_id", MAX_GROUP_IDS) or [None]
    query_vector = (await runtime.embedder.embed([query], query=True))[0] if mode != "bm25" else None
    found: dict[str, list[dict[str, Any]]] = {"memories": [], "profiles": []}
    for memory_type in memory_types:
        if memory_type == "profile":
            found["profiles"] = await profiles(runtime, scope)
            continue
        if memory_type not in MEMORY_TYPES:
            continue  # raw_message, agent_memory: memsys keeps none
        hits: list[dict[str, Any]] = []
        for group_id in group_ids:
            filters = SearchFilters(
                memory_type=MEMORY_TYPES[memory_type],
                time_from=scope.start or EARLIEST,
                time_to=scope.end or datetime.now(UTC),
                user_id=scope.user_id,
                group_id=group_id,
                caller=scope.caller,
            )
            result = await retrieval.search(
                runtime, query=query, filters=filters, top_k=top_k, mode=mode, radius=radius, query_vector=query_vector
            )
            hits.extend(result.memories)
        hits.sort(key=lambda memory: -memory["score"])
        found["memories"].extend(upstream_memory(memory) for memory in hits[:top_k])
    return found


async def fetch(
    runtime: Runtime, *, scope: Scope, memory_type: str, page: int, page_size: int
) -> tuple[list[dict[str, Any]], int]:
    """One page of a memory type, newest first, and the total."""
    needs_scope(scope)
    if not 1 <= page <= MAX_PAGE or not 1 <= page_size <= MAX_TOP_K:
        raise InvalidParameter(f"Invalid field page / page_size: page 1 to {MAX_PAGE}, page_size 1 to {MAX_TOP_K}")
    if memory_type == "profile":
        found = await profiles(runtime, scope)
        return found[(page - 1) * page_size : page * page_size], len(found)
    if memory_type not in MEMORY_TYPES:
        if memory_type in ("agent_case", "agent_skill"):
            return [], 0
        raise InvalidParameter(f"Invalid field memory_type: one of {', '.join([*MEMORY_TYPES, 'profile'])}")
    async with runtime.engine.connect() as conn:
        rows, total = await memories.numbered_page(
            conn,
            user_id=scope.user_id,
            group_ids=scope.group_ids,
            memory_type=MEMORY_TYPES[memory_type],
            start_time=scope.start,
            end_time=scope.end,
            offset=(page - 1) * page_size,
            limit=page_size,
            caller=scope.caller,
        )
    return [upstream_memory(row) for row in rows], total


async def profiles(runtime: Runtime, scope: Scope) -> list[dict[str, Any]]:
    """The latest profiles of the scope's user (in its groups, or all), upstream-shaped."""
    if not scope.user_id:
        return []
    found = []
    for group_id in bounded(scope.group_ids or [], "group_id", MAX_GROUP_IDS) or [None]:
        found.extend(await retrieval.profile(runtime, scope.user_id, group_id))
    return [upstream_profile(profile) for profile in found]


async def delete(
    runtime: Runtime,
    *,
    memory_id: str | None,
    user_id: str | None,
    group_id: str | None,
    actor: str,
    caller: Filter | None = None,
) -> int:
    """Upstream's delete, as memsys deletes one memory (app.memories.service: a soft delete, restorable)."""
    if not (memory_id or user_id or group_id or caller):
        raise InvalidParameter("Missing required field: memory_id, user_id or group_id")
    try:
        uuid = UUID(memory_id) if memory_id else None
    except ValueError:
        return 0  # not an id memsys gave: nothing matches
    return await memory_life.delete_matching(
        runtime, memory_id=uuid, user_id=user_id, group_id=group_id, actor=actor, caller=caller
    )


def _method(method: str) -> str:
    if method not in METHODS:
        raise InvalidParameter(f"Invalid field method: one of {', '.join(METHODS)}")
    return METHODS[method]


# ---- out: upstream's item shapes -----------------------------------------------------------------------------


def upstream_memory(memory: dict[str, Any]) -> dict[str, Any]:
    """A memsys memory (as the v3 API shows it) in upstream's shape for its type."""
    kind = memory["memory_type"]
    item: dict[str, Any] = {
        "id": memory["id"],
        "memory_type": UPSTREAM_TYPES[kind],
        "user_id": memory["user_id"],
        "group_id": memory["group_id"],
        "timestamp": memory["timestamp"],
        "parent_type": "memcell",
        "parent_id": memory["memcell_id"],
        "ori_event_id_list": memory["source_message_ids"],
        "content": memory["content"],
    }
    if memory.get("score") is not None:
        item["score"] = memory["score"]
    if kind == "episode":
        item.update(
            episode_id=memory["id"],
            subject=memory.get("title"),
            summary=memory.get("summary") or memory["content"],
            episode=memory["content"],
            type="Conversation",
        )
    elif kind == "event_log":
        item.update(atomic_fact=memory["content"], summary=memory["content"])
    else:
        item.update(
            foresight=memory["content"],
            summary=memory["content"],
            start_time=memory.get("valid_from"),
            end_time=memory.get("valid_to"),
        )
    return item


def upstream_profile(profile: dict[str, Any]) -> dict[str, Any]:
    """A memsys profile (``retrieval.service.profile``'s item) as upstream's profile row; ``summary`` and
    ``description`` say it in one line, since the clients show a profile by those."""
    data = profile["profile"]
    line = "; ".join(
        f"{key}: {', '.join(map(str, value)) if isinstance(value, list) else value}"
        for key, value in data.items()
        if key not in ("keyword_counts", "derived", "user_id") and value not in (None, "", []) and _plain(value)
    )
    return {
        "id": profile["id"],
        "memory_type": "profile",
        "item_type": "profile",
        "user_id": profile["user_id"],
        "group_id": profile["group_id"],
        "timestamp": profile["timestamp"],
        "profile_data": {**data, "summary": line},
        "summary": line,
        "description": line,
        "score": profile["score"],
        "parent_type": "memcell",
        "parent_id": profile["memcell_id"],
    }


def _plain(value: Any) -> bool:
    """A value one line can show: a string, a number, or a list of them."""
    if isinstance(value, list):
        return all(isinstance(item, str | int | float) for item in value)
    return isinstance(value, str | int | float)
