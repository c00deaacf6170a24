"""memsys as LangGraph's long-term memory: ``MemsysStore``, a ``BaseStore`` whose items live in memsys and whose
``search(query=…)`` is memsys's hybrid retrieval.

    from memsys.client import Memsys
    from memsys.integrations.langgraph import MemsysStore

    graph = builder.compile(store=MemsysStore(client=Memsys(api_key="msk_…")))

The mapping (docs/integrations/langgraph.md):

- **tenant**: the API key's. A store sees its key's tenant only; no namespace reaches another.
- **user**: the namespace label at ``user_position`` (0: ``("alice", "memories")`` is alice's). Her items are
  memorized as sent by her, so memsys's forget and export of the user take and return them.
- **group**: each item is one memsys group (a conversation), ``langgraph/<label>/…/<key>`` with each part
  percent-encoded. It holds one message, the item's text (what memsys embeds and indexes), and conversation
  metadata whose ``user_details[user].extra`` keeps the value exactly, with its times. One group per item is
  what lets one item be replaced or deleted: memsys forgets whole groups, not single messages.

Importing this module imports langgraph (``pip install 'memsys-client[langgraph]'``); ``memsys`` and
``memsys.client`` never do.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Generator, Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        validate_op_namespace,
    )
    from langgraph.store.base.embed import get_text_at_path

    # InMemoryStore's own matching, so that a filter or a namespace condition means here what it means there.
    from langgraph.store.memory import _compare_values, _does_match
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError("memsys.integrations.langgraph needs langgraph: pip install 'memsys-client[langgraph]'") from exc

from memsys import operations
from memsys.client import AsyncMemsys, Memsys
from memsys.errors import NotFound
from memsys.models import ConversationMetaRequest, MemorizeRequest, RetrievalMode, RetrieveLightweightRequest
from memsys.operations import Call

GROUP_PREFIX = "langgraph/"
SCENE = "assistant"
"""An item's group is the user's alone with the assistant: forgetting the user forgets it whole."""

Steps = Generator[Call, Any, Any]
"""An operation's memsys calls: each ``Call`` is sent by the driver (sync or async), whose answer comes back
into the generator (a ``NotFound`` is thrown into it); its return value is the op's result."""


def item_group(namespace: tuple[str, ...], key: str) -> str:
    """The memsys group of an item: ``langgraph/`` and the namespace's labels and the key, percent-encoded."""
    return GROUP_PREFIX + "/".join(quote(part, safe="") for part in (*namespace, key))


def item_of_group(group_id: str | None) -> tuple[tuple[str, ...], str] | None:
    """The (namespace, key) a group holds, or None for a group that is not a store item."""
    if not group_id or not group_id.startswith(GROUP_PREFIX):
        return None
    *namespace, key = (unquote(part) for part in group_id.removeprefix(GROUP_PREFIX).split("/"))
    return (tuple(namespace), key) if namespace else None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        return [text for inner in value.values() for text in _strings(inner)]
    if isinstance(value, list | tuple):
        return [text for inner in value for text in _strings(inner)]
    return []


class MemsysStore(BaseStore):
    """A LangGraph ``BaseStore`` on memsys (see the module's docstring for the mapping).

    ``put`` replaces the item's group (forget, memorize its text, save its value), ``get`` reads the value back
    (one call), ``delete`` forgets the group, ``search(prefix, query=…)`` ranks the user's items by memsys's
    retrieval (``retrieval_mode``: ``rrf`` of vector and BM25, or one leg) and ``search(prefix)`` without a
    query lists them, newest first, from the user's export. A prefix must reach the user's label.

    ``index_fields``: the paths (LangGraph's syntax, e.g. ``["text", "tags[*]"]``) whose text is memorized for
    search; None: every string in the value. ``put(…, index=False)`` stores an item that only ``get`` and the
    query-less ``search`` find. Give ``client`` (sync), ``async_client`` (``aput``, ``asearch``, … without a
    thread) or both; neither: ``Memsys()`` from ``MEMSYS_BASE_URL`` and ``MEMSYS_API_KEY``. TTLs are not
    supported."""

    supports_ttl = False
    __slots__ = ("client", "async_client", "user_position", "index_fields", "retrieval_mode")

    def __init__(
        self,
        *,
        client: Memsys | None = None,
        async_client: AsyncMemsys | None = None,
        user_position: int = 0,
        index_fields: list[str] | None = None,
        retrieval_mode: RetrievalMode = "rrf",
    ) -> None:
        self.client = client if client is not None or async_client is not None else Memsys()
        self.async_client = async_client
        self.user_position = user_position
        self.index_fields = index_fields
        self.retrieval_mode = retrieval_mode

    # ---- drivers: the same steps, sent by the sync or the async client ----

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.client is None:
            raise ValueError("this MemsysStore has only an async_client: use the a-methods, or give client too")
        return [self._run(self._steps(op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.async_client is None:
            return await asyncio.to_thread(self.batch, list(ops))
        return [await self._arun(self._steps(op)) for op in ops]

    def _run(self, steps: Steps) -> Any:
        answer: Any = None
        while True:
            try:
                call = steps.throw(answer) if isinstance(answer, NotFound) else steps.send(answer)
            except StopIteration as done:
                return done.value
            try:
                answer = self.client.send(call)  # type: ignore[union-attr]
            except NotFound as missing:
                answer = missing

    async def _arun(self, steps: Steps) -> Any:
        answer: Any = None
        while True:
            try:
                call = steps.throw(answer) if isinstance(answer, NotFound) else steps.send(answer)
            except StopIteration as done:
                return done.value
            try:
                answer = await self.async_client.send(call)  # type: ignore[union-attr]
            except NotFound as missing:
                answer = missing

    # ---- the operations ----

    def _steps(self, op: Op) -> Steps:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            if op.value is None:
                return self._delete(op.namespace, op.key)
            return self._put(op)
        if isinstance(op, SearchOp):
            if op.query:
                return self._search(op)
            return self._listed(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"MemsysStore does not know the operation {type(op).__name__}")

    def _user(self, namespace: tuple[str, ...]) -> str:
        if len(namespace) <= self.user_position:
            raise ValueError(
                f"namespace {namespace!r} has no label at user_position {self.user_position}: memsys keeps memories "
                "per user, so an item's namespace and a search's prefix must name the user"
            )
        return namespace[self.user_position]

    def _text(self, value: dict[str, Any], index: list[str] | bool | None) -> str:
        """The text memorized for search; empty when ``index`` is False."""
        if index is False:
            return ""
        fields = self.index_fields if index is None or index is True else index
        texts = _strings(value) if fields is None else [t for path in fields for t in get_text_at_path(value, path)]
        return "\n".join(text for text in texts if text.strip())

    def _get(self, namespace: tuple[str, ...], key: str) -> Steps:
        user, group_id = self._user(namespace), item_group(namespace, key)
        try:
            meta = yield operations.get_conversation_meta(group_id)
        except NotFound:
            return None
        detail = meta.user_details.get(user)
        if detail is None or not detail.extra or "value" not in detail.extra:
            return None  # a group of that name that is not this user's item
        return _item(namespace, key, detail.extra)

    def _put(self, op: PutOp) -> Steps:
        user, group_id = self._user(op.namespace), item_group(op.namespace, op.key)
        previous = yield from self._get(op.namespace, op.key)
        now = datetime.now(UTC)
        created = previous.created_at if previous is not None else now
        # Forgotten even when no value was read: a put that failed half-way may have left a message.
        yield operations.forget_group(group_id)
        text = self._text(op.value, op.index)
        if text:
            message = MemorizeRequest(
                group_id=group_id, message_id=uuid.uuid4().hex, create_time=now, sender=user, content=text
            )
            yield operations.memorize(message)
        stored = {"value": op.value, "created_at": created.isoformat(), "updated_at": now.isoformat()}
        meta = ConversationMetaRequest(
            version="1",
            scene=SCENE,
            scene_desc="a LangGraph store item",
            name=op.key,
            description="",
            group_id=group_id,
            created_at=created,
            default_timezone="UTC",
            user_details={user: {"full_name": user, "role": "user", "extra": stored}},
        )
        yield operations.save_conversation_meta(meta)
        return None

    def _delete(self, namespace: tuple[str, ...], key: str) -> Steps:
        self._user(namespace)
        yield operations.forget_group(item_group(namespace, key))
        return None

    def _search(self, op: SearchOp) -> Steps:
        """memsys's best hits for the user, kept when they are items under the prefix, each item once (at its
        best hit's score), then filtered on the stored values."""
        prefix, wanted = op.namespace_prefix, op.offset + op.limit
        request = RetrieveLightweightRequest(
            query=op.query,
            user_id=self._user(prefix),
            top_k=min(100, max(20, 4 * wanted)),
            retrieval_mode=self.retrieval_mode,
        )
        found = yield operations.retrieve_lightweight(request)
        items: list[SearchItem] = []
        seen: set[str] = set()
        for memory in found.memories:
            item = item_of_group(memory.group_id)
            if item is None or memory.group_id in seen or item[0][: len(prefix)] != prefix:
                continue
            seen.add(memory.group_id)
            stored = yield from self._get(*item)
            if stored is not None and _matches(stored.value, op.filter):
                items.append(_search_item(stored, memory.score))
                if len(items) >= wanted:
                    break
        return items[op.offset :]

    def _stored_items(self, user: str) -> Steps:
        """Every item of the user, from their export: the conversations naming them, with the values."""
        export = yield operations.export_user(user)
        items = []
        for detail in export.get("participant_details", []):
            item = item_of_group(detail["group_id"])
            extra = (detail.get("details") or {}).get("extra") or {}
            if item is not None and "value" in extra:
                items.append(_item(*item, extra))
        return items

    def _listed(self, op: SearchOp) -> Steps:
        prefix = op.namespace_prefix
        items = yield from self._stored_items(self._user(prefix))
        kept = [i for i in items if i.namespace[: len(prefix)] == prefix and _matches(i.value, op.filter)]
        kept.sort(key=lambda item: item.updated_at, reverse=True)
        return [_search_item(item, None) for item in kept[op.offset : op.offset + op.limit]]

    def _list_namespaces(self, op: ListNamespacesOp) -> Steps:
        """The user's namespaces: one prefix condition must name the user (no wildcard at ``user_position``)."""
        user = next(
            (
                c.path[self.user_position]
                for c in op.match_conditions or ()
                if c.match_type == "prefix" and len(c.path) > self.user_position and c.path[self.user_position] != "*"
            ),
            None,
        )
        if user is None:
            raise ValueError(
                "list_namespaces on memsys needs a prefix that names the user at user_position "
                f"{self.user_position}: memsys lists what it holds per user"
            )
        items = yield from self._stored_items(user)
        namespaces = {item.namespace for item in items}
        namespaces = {ns for ns in namespaces if all(_does_match(c, ns) for c in op.match_conditions or ())}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]


def _item(namespace: tuple[str, ...], key: str, stored: dict[str, Any]) -> Item:
    return Item(
        value=stored["value"],
        key=key,
        namespace=namespace,
        created_at=stored["created_at"],
        updated_at=stored["updated_at"],
    )


def _search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)


def _matches(value: dict[str, Any], conditions: dict[str, Any] | None) -> bool:
    return all(_compare_values(value.get(key), wanted) for key, wanted in (conditions or {}).items())
