"""The JSON value in an LLM's answer, found and repaired in time linear in the answer's length.

An answer is untrusted: a client's endpoint (``llm_config.base_url``) says whatever it wants. So each step is a
single linear pass: ``<think>`` blocks are dropped by scanning their tags (a lazy ``<think>.*?</think>`` regex
is quadratic on unclosed tags); a well-formed answer is read by ``json.loads`` once a scan of its brackets
found it no deeper than ``MAX_DEPTH``; any other is read by a tolerant parser that walks its tokens once and
builds the value as it goes. That parser accepts what models write around and instead of JSON: code fences
and prose (it starts at the first ``{`` or ``[`` and stops where that value closes), trailing or missing
commas, single quotes, unquoted keys and words, Python's ``True``/``None``, comments, and an answer cut off by
the token limit (open strings and containers are closed). Deeper nesting is refused: no caller wants it, and
it makes recursive code (``json``, pydantic, logging) fail. (json_repair, used before, took 9.8 s on
``"{" * 50000`` and 49 s on 256 KB of ``{[`` × 32 then a word.)
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of objects and lists accepted in an answer."""


class UnusableJSON(ValueError):
    """The answer holds no JSON object or list this module can use."""


_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)

# One token per match, with the whitespace before it; the last alternative takes any other run of characters.
# Possessive quantifiers: a string without its closing quote is read to the end once, never backtracked.
_TOKEN = re.compile(
    r"""
    \s*+
    (?:
      (?P<comment>//[^\n]*+|/\*(?:[^*]++|\*(?!/))*+(?:\*/)?)
      | (?P<string>"(?:[^"\\]++|\\.)*+(?P<closed>")?|'(?:[^'\\]++|\\.)*+(?P<closed_single>')?)
      | (?P<mark>[{}\[\]:,])
      | (?P<word>[^\s{}\[\]:,"']++)
    )
    """,
    re.VERBOSE | re.DOTALL,
)
# What nests in well-formed JSON: brackets outside its (double-quoted) strings.
_NESTING = re.compile(r'"(?:[^"\\]++|\\.)*+"?|([{\[])|([}\]])')
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORDS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def drop_think_blocks(text: str) -> str:
    """``text`` without its closed ``<think>…</think>`` blocks (an unclosed one stays, as the old regex left it)."""
    kept: list[str] = []
    opened: int | None = None
    end = 0
    for tag in _THINK_TAG.finditer(text):
        if not tag.group(1):
            if opened is None:
                opened = tag.start()
        elif opened is not None:
            kept.append(text[end:opened])
            end, opened = tag.end(), None
    kept.append(text[end:])
    return "".join(kept)


def tagged_blocks(text: str, tag: str) -> list[str]:
    """The contents of the closed ``<tag>…</tag>`` blocks of ``text``, in order, found in one linear pass (a lazy
    ``<tag>(.*?)</tag>`` regex rescans the rest of the text from every unclosed opening tag)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    blocks: list[str] = []
    start = text.find(opening)
    while start >= 0:
        end = text.find(closing, start + len(opening))
        if end < 0:
            break  # no closing tag after this one: none after any later opening either
        blocks.append(text[start + len(opening) : end])
        start = text.find(opening, end + len(closing))
    return blocks


def parse_answer(text: str) -> dict | list:
    """The JSON object or list a model answered: the whole answer when it is one (as ``json.loads`` reads
    it), else the first one in it, repaired (and not empty). ``UnusableJSON`` when there is none, or when it
    nests deeper than ``MAX_DEPTH``."""
    text = drop_think_blocks(text).strip()
    try:
        value = loads_within_depth(text)
    except UnusableJSON:
        raise  # too deep: not repaired either
    except ValueError:
        value = None  # not JSON as a whole: found and repaired below
    if isinstance(value, dict | list):
        return value
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise UnusableJSON("is not valid JSON")
    value = _tolerant_value(text, min(starts))
    if not value:
        raise UnusableJSON("is not valid JSON")
    return value


def loads_within_depth(text: str) -> Any:
    """``json.loads(text)``, refused (``UnusableJSON``) when it nests deeper than ``MAX_DEPTH``."""
    depth = 0
    for found in _NESTING.finditer(text):
        if found.group(1):
            depth += 1
            if depth > MAX_DEPTH:
                raise UnusableJSON(f"nests deeper than {MAX_DEPTH} levels")
        elif found.group(2):
            depth -= 1
    try:
        return json.loads(text)
    except RecursionError as exc:  # brackets the scan took for a string's; json would fail on that quote first
        raise UnusableJSON(f"nests deeper than {MAX_DEPTH} levels") from exc


def _tolerant_value(text: str, start: int) -> dict | list:
    """The object or list opening at ``text[start]``, read token by token; see the module's docstring."""
    root: dict | list = {} if text[start] == "{" else []
    stack: list[list[Any]] = [[root, None]]  # [container, the key waiting for its value (objects)]
    for token in _TOKEN.finditer(text, start + 1):
        kind = token.lastgroup
        if kind == "comment":
            continue
        frame = stack[-1]
        raw = token.group(kind)
        if kind == "mark":
            if raw in "}]":
                stack.pop()
                if not stack:
                    break
            elif raw == ",":
                frame[1] = None  # a key with no value is dropped
            elif raw in "{[":
                if len(stack) >= MAX_DEPTH:
                    raise UnusableJSON(f"nests deeper than {MAX_DEPTH} levels")
                child: dict | list = {} if raw == "{" else []
                _attach(frame, child)
                stack.append([child, None])
            continue
        closed = token.group("closed") or token.group("closed_single")
        value = _string(raw, bool(closed)) if kind == "string" else _word(raw)
        if isinstance(frame[0], dict) and frame[1] is None:
            frame[1] = value if isinstance(value, str) else json.dumps(value)
        else:
            _attach(frame, value)
    return root


def _attach(frame: list[Any], value: Any) -> None:
    container, key = frame
    if isinstance(container, list):
        container.append(value)
    else:
        container["" if key is None else key] = value
        frame[1] = None


def _string(raw: str, closed: bool) -> str:
    inner = raw[1:-1] if closed else raw[1:]  # a string cut off by the token limit ends where the answer ends
    if raw[0] == "'":
        inner = inner.replace("\\'", "'").replace('"', '\\"')
    try:
        return json.loads(f'"{inner}"', strict=False)
    except ValueError:
        return inner  # escapes JSON does not know (\x41, a lone \u12): the characters as written


def _word(raw: str) -> Any:
    if raw in _WORDS:
        return _WORDS[raw]
    if _NUMBER.fullmatch(raw):
        try:
            return json.loads(raw)
        except ValueError:  # e.g. more digits than int() converts
            return raw
    return raw
