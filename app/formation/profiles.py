"""Participant profiles: what can be derived without a model, and merging an LLM's profile into it.

Every new version starts from the previous one (``profiles`` keeps them all, numbered per user and
group): counts add up, first/last seen widen, keyword counts accumulate.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

import jieba

from app.formation.facts import same_value
from app.formation.memcell import Context, MemCell
from app.text.stopwords import CHINESE_STOPWORDS, ENGLISH_STOPWORDS

KEYWORDS_KEPT = 30
KEYWORDS_SHOWN = 10

_WORD = re.compile(r"[a-z][a-z'\-]{2,}")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

# Fields an LLM is asked to fill, by scene: work-oriented for group chats, personal for assistants.
WORK_FIELDS = ("role", "skills", "responsibilities", "projects", "working_style", "opinions", "goals")
PERSONAL_FIELDS = ("interests", "preferences", "personality", "relationships", "life_events", "habits", "goals")


def profile_fields(scene: str, own: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The fields a profile prompt asks for: the scene's, then the tenant's own (app.formation.instructions)."""
    scene_fields = PERSONAL_FIELDS if scene in ("assistant", "companion") else WORK_FIELDS
    return scene_fields + tuple(name for name in own if name not in scene_fields)


def keyword_counts(texts: Iterable[str]) -> Counter[str]:
    """Content words as written (not stemmed, so they read well in a title): English words of three
    letters or more and Chinese words of two characters or more, stop words left out."""
    counts: Counter[str] = Counter()
    for text in texts:
        lowered = text.lower()
        counts.update(word.strip("'-") for word in _WORD.findall(lowered) if word not in ENGLISH_STOPWORDS)
        for run in _CJK_RUN.findall(text):
            counts.update(w for w in jieba.lcut(run) if len(w) >= 2 and w not in CHINESE_STOPWORDS)
    counts.pop("", None)
    return counts


def top_keywords(counts: Counter[str], n: int) -> list[str]:
    """Most frequent first; ties in alphabetical order, so titles are deterministic."""
    return [word for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]]


def derived_profile(user_id: str, cell: MemCell, context: Context, previous: dict[str, Any] | None) -> dict[str, Any]:
    """The profile a MemCell supports without a model, merged with the previous version."""
    own = [m for m in cell.messages if m["sender"] == user_id]
    prev = previous or {}
    counts = Counter(prev.get("keyword_counts") or {})
    counts.update(keyword_counts(m["content"] for m in own))
    counts = Counter(dict(sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:KEYWORDS_KEPT]))
    first = min([m["create_time"] for m in own] or [cell.start_time]).isoformat()
    last = max([m["create_time"] for m in own] or [cell.end_time]).isoformat()
    sender_name = own[-1]["sender_name"] if own else None
    return {
        **prev,
        "user_id": user_id,
        "name": context.name_of(user_id, sender_name),
        "role": context.role_of(user_id) or prev.get("role"),
        "first_seen": min(filter(None, [prev.get("first_seen"), first])),
        "last_seen": max(filter(None, [prev.get("last_seen"), last])),
        "message_count": int(prev.get("message_count") or 0) + len(own),
        "frequent_keywords": top_keywords(counts, KEYWORDS_SHOWN),
        "keyword_counts": dict(counts),
        "derived": True,
    }


ATTRIBUTE_NAMES = {
    "name": "name",
    "residence": "lives_in",
    "job": "works_as",
    "employer": "works_at",
    "school": "studies_at",
    "partner": "partner",
    "diet": "diet",
    "car": "car",
    "pet": "pets",
    "allergy": "allergies",
    "language": "languages",
}
"""A fact's attribute (app.formation.facts) and its name in a profile's ``attributes``; pets, allergies and languages
are lists."""
LISTED = ("pet", "allergy", "language")


def attributes(current: list[tuple[Any, dict[str, Any]]], language: str) -> dict[str, Any]:
    """What a profile says about its user from their current facts in every group (latest first, as
    ``app.memories.supersession.current_facts`` gives them): each value with the memory it came from and since when.
    A fact a newer one superseded is not here; the profile's earlier versions keep it."""
    found: dict[str, Any] = {}
    for memory, fact in current:
        name = ATTRIBUTE_NAMES[fact["attribute"]]
        item = {"value": fact["shown"], "memory_id": str(memory.id), "since": memory.timestamp.date().isoformat()}
        if fact["attribute"] in LISTED:
            values = found.setdefault(name, [])
            if not any(_same(fact, other) for other in values):
                values.append({**item, "_fact": fact})
        elif name not in found:
            found[name] = item
    for value in found.values():
        if isinstance(value, list):
            for item in value:
                item.pop("_fact", None)
    return found


def _same(fact: dict[str, Any], listed: dict[str, Any]) -> bool:
    other = listed["_fact"]
    return same_value(fact["attribute"], fact["value"], other["value"])


def merged_llm_profile(
    derived: dict[str, Any], from_llm: dict[str, Any], asked: tuple[str, ...], scene: str
) -> dict[str, Any]:
    """The LLM's merged profile fields over the derived facts (which the model cannot miscount); ``asked``: the
    fields the prompt asked for (``profile_fields``)."""
    fields = {key: value for key, value in from_llm.items() if key not in derived or key in asked}
    return {**derived, **fields, "user_id": derived["user_id"], "scene": scene, "derived": False}


PROFILE_ITEMS = {"explicit_info": ("category", "ei"), "implicit_traits": ("trait", "it")}
"""EverOS v2's editable parts of a profile (its ``edit`` operations): the key in the profile, each item's name field
and the prefix of its ids."""


def edited(profile: dict[str, Any], operations: list[dict[str, Any]], new_id) -> tuple[dict[str, Any], list[dict]]:
    """``profile`` with EverOS v2's operations applied in order (add, update, delete of ``explicit_info`` and
    ``implicit_traits`` items), and each operation's result; one that cannot apply is rejected and changes nothing.
    ``new_id()`` names an added item."""
    out = {key: [dict(item) for item in profile.get(key) or []] for key in PROFILE_ITEMS}
    results = []
    for number, op in enumerate(operations):
        items = out[op["type"]]
        name_field, prefix = PROFILE_ITEMS[op["type"]]
        data = {k: v for k, v in (op.get("data") or {}).items() if k in (name_field, "description") and v is not None}
        result = {"op_index": number, "action": op["action"], "type": op["type"], "item_id": op.get("item_id")}
        found = next((item for item in items if item["id"] == op.get("item_id")), None)
        if op["action"] == "add":
            if set(data) != {name_field, "description"}:
                results.append(
                    {**result, "status": "rejected", "error": f"add needs data.{name_field} and data.description"}
                )
                continue
            item = {"id": f"{prefix}_{new_id()}", **data}
            items.append(item)
            results.append({**result, "status": "applied", "new_item_id": item["id"]})
        elif found is None:
            results.append({**result, "status": "rejected", "error": f"no {op['type']} item {op.get('item_id')!r}"})
        elif op["action"] == "update":
            if not data:
                results.append(
                    {**result, "status": "rejected", "error": f"update needs data.{name_field} or data.description"}
                )
                continue
            found.update(data)
            results.append({**result, "status": "applied"})
        else:
            items.remove(found)
            results.append({**result, "status": "applied"})
    return {**profile, **out}, results
