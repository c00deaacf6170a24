"""Prompts of agentic retrieval, in English and Chinese (chosen by the query's language). All ask for JSON."""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u9fff]")


def language_of(text: str) -> str:
    """'zh' when a fair share of the text is Chinese, else 'en'."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return "en"
    return "zh" if sum(1 for ch in letters if _CJK.match(ch)) / len(letters) >= 0.3 else "en"


def _memory_lines(memories: list[dict], limit_chars: int = 600) -> str:
    lines = []
    for number, memory in enumerate(memories, start=1):
        day = str(memory.get("timestamp", ""))[:10]
        text = " ".join(str(memory.get("content", "")).split())
        if len(text) > limit_chars:
            text = text[:limit_chars] + "…"
        lines.append(f"[{number}] ({day}) {text}")
    return "\n".join(lines) or "(none)"


SUFFICIENCY_EN = """You check whether retrieved memories are enough to answer a question,
and if not, what to search for.
Reply with JSON only, no prose:
{"is_sufficient": true or false,
 "reasoning": "one sentence",
 "missing_information": "what is missing (empty string if sufficient)",
 "refined_queries": ["2 or 3 short search queries for the missing information, each different from
  the question and from each other (empty list if sufficient)"]}"""

SUFFICIENCY_ZH = """你负责判断检索到的记忆是否足以回答问题；如果不够，给出需要继续检索的内容。
只回复 JSON，不要其他文字：
{"is_sufficient": true 或 false,
 "reasoning": "一句话理由",
 "missing_information": "缺少的信息（足够时为空字符串）",
 "refined_queries": ["2 到 3 个简短的检索查询，针对缺少的信息，彼此不同且不同于原问题（足够时为空列表）"]}"""


SUFFICIENCY_SCHEMA = {
    "type": "object",
    "properties": {
        "is_sufficient": {"type": "boolean"},
        "reasoning": {"type": "string", "minLength": 1},
        "missing_information": {"type": "string"},
        "refined_queries": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["is_sufficient", "reasoning", "missing_information", "refined_queries"],
}
"""The JSON schema of the sufficiency answer, sent as ``response_format`` where the endpoint takes one."""


def sufficiency_messages(query: str, memories: list[dict], language: str) -> list[dict]:
    if language == "zh":
        user = f"问题：{query}\n\n检索到的记忆（按相关性排序）：\n{_memory_lines(memories)}"
        return [{"role": "system", "content": SUFFICIENCY_ZH}, {"role": "user", "content": user}]
    user = f"Question: {query}\n\nRetrieved memories (most relevant first):\n{_memory_lines(memories)}"
    return [{"role": "system", "content": SUFFICIENCY_EN}, {"role": "user", "content": user}]


RERANK_EN = """Rate how relevant each memory is to the query, from 0.0 (unrelated) to 1.0 (answers it directly).
Reply with JSON only: {"scores": [{"index": 1, "score": 0.9}, ...]} with one entry per memory."""

RERANK_ZH = """为每条记忆与查询的相关程度打分，0.0（无关）到 1.0（直接回答）。
只回复 JSON：{"scores": [{"index": 1, "score": 0.9}, ...]}，每条记忆一项。"""


RERANK_SCHEMA = {
    "type": "object",
    "properties": {
        "scores": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"index": {"type": "integer"}, "score": {"type": "number"}},
                "required": ["index", "score"],
            },
        }
    },
    "required": ["scores"],
}


def rerank_messages(query: str, documents: list[str]) -> list[dict]:
    language = language_of(query)
    listing = _memory_lines([{"content": doc} for doc in documents], limit_chars=400).replace("() ", "")
    if language == "zh":
        return [
            {"role": "system", "content": RERANK_ZH},
            {"role": "user", "content": f"查询：{query}\n\n记忆：\n{listing}"},
        ]
    return [
        {"role": "system", "content": RERANK_EN},
        {"role": "user", "content": f"Query: {query}\n\nMemories:\n{listing}"},
    ]


TIME_EN = """Today is {today}. Does the question refer to a period of time? Resolve it to calendar days.
Reply with JSON only: {{"has_time": true or false, "start": "YYYY-MM-DD", "end": "YYYY-MM-DD",
"filter": true only if the question asks to restrict results to that period}}"""

TIME_ZH = """今天是 {today}。问题是否指向某个时间段？请换算成具体日期。
只回复 JSON：{{"has_time": true 或 false, "start": "YYYY-MM-DD", "end": "YYYY-MM-DD",
"filter": 仅当问题明确要求只看该时间段时为 true}}"""


TIME_SCHEMA = {
    "type": "object",
    "properties": {
        "has_time": {"type": "boolean"},
        "start": {"type": "string"},
        "end": {"type": "string"},
        "filter": {"type": "boolean"},
    },
    "required": ["has_time"],
}


def time_messages(query: str, today: str, language: str) -> list[dict]:
    system = (TIME_ZH if language == "zh" else TIME_EN).format(today=today)
    return [{"role": "system", "content": system}, {"role": "user", "content": query}]
