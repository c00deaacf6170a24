"""What the inspector shows, read through the existing services and repositories, in the caller's tenant.

Plain async functions taking a (tenant-scoped) ``Runtime``: the overview, one group, a search with its
explanation, and the check of a key typed into the login form.
"""

from __future__ import annotations

from typing import Any

from app import queue
from app.conversation_meta import repository as conversation_meta
from app.db.tables import MEMORY_TYPES
from app.errors import NotFound
from app.inspect import repository
from app.memories import repository as memories
from app.retrieval import service as retrieval
from app.retrieval.schemas import RetrieveLightweightRequest, RetrieveLightweightResult
from app.runtime import Runtime
from app.tenancy import service as keys
from app.validation import check_identifier

MESSAGES_SHOWN = 200
MEMORIES_SHOWN = 100
"""Of each memory type, on a group's page."""
SEARCH_TOP_K = 20


async def overview(runtime: Runtime) -> dict[str, Any]:
    """The tenant at a glance: the formation backlog (the whole server's), memories per type, its groups and
    users with their counts, most recently active first."""
    async with runtime.engine.begin() as conn:
        backlog = await queue.backlog(conn)
        counts = await memories.count_by_type(conn)
        groups = await repository.groups(conn)
        users = await repository.users(conn)
    return {
        "backlog": backlog,
        "memory_counts": {memory_type: counts.get(memory_type, 0) for memory_type in MEMORY_TYPES},
        "groups": groups,
        "users": users,
    }


async def group(runtime: Runtime, group_id: str) -> dict[str, Any]:
    """One group: its conversation metadata, newest messages, memories by type and each member's latest
    profile. ``NotFound`` when the tenant has none of these for it."""
    check_identifier("group_id", group_id)
    async with runtime.engine.begin() as conn:
        meta = await conversation_meta.get(conn, group_id)
        messages = await repository.group_messages(conn, group_id, MESSAGES_SHOWN)
        formed = await repository.group_memories(conn, group_id, MEMORIES_SHOWN)
        profiles = await repository.group_profiles(conn, group_id)
    if not (meta or messages or formed or profiles):
        raise NotFound(f"No group {group_id!r} in tenant {runtime.tenant}")
    return {
        "group_id": group_id,
        "meta": meta,
        "messages": messages,
        "memories": {t: [memory for memory in formed if memory["memory_type"] == t] for t in MEMORY_TYPES},
        "profiles": profiles,
        "messages_shown": MESSAGES_SHOWN,
        "memories_shown": MEMORIES_SHOWN,
    }


async def search(
    runtime: Runtime, *, query: str, group_id: str, user_id: str, data_source: str, mode: str
) -> RetrieveLightweightResult | None:
    """Lightweight retrieval (over all time, its default) with ``explain`` on; empty form fields are no filter.
    None when there is nothing to search for yet (no query, and no user for a profile)."""
    if not query.strip() and not (data_source == "profile" and user_id):
        return None
    request = RetrieveLightweightRequest(
        query=query or None,
        group_id=group_id or None,
        user_id=user_id or None,
        data_source=data_source,
        retrieval_mode=mode,
        top_k=SEARCH_TOP_K,
        explain=True,
    )
    _, result = await retrieval.retrieve(runtime, request)
    return result


async def key_tenant(runtime: Runtime, key: str) -> str | None:
    """The tenant of a valid key, as the auth guard finds it; None when no key exists and anonymous access
    is allowed (the inspector opens without one); ``Unauthorized`` otherwise. ``runtime`` is the shared one."""
    settings = runtime.settings
    async with runtime.engine.connect() as conn:
        tenant, valid_key = await keys.authenticate(
            conn, key.strip() or None, anonymous_ok=keys.anonymous_allowed(settings.host, settings.allow_anonymous)
        )
    return tenant if valid_key else None
