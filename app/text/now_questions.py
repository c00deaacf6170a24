"""Questions about the present: "How many followers do I have now?", "How long have I been …?", "她现在住在哪？".

A state that changes (a count, a duration, where someone lives) is said again and again, each time with its value
then; a question about now wants the latest. ``asks_about_now`` knows such a question by its words alone: a word of
the present ("now", "currently", "still", "so far", "recently", 现在, 目前, 最近…), or a question of amount
("how many", "how much", "how long", "how often"; 多少, 几, 多久) in the present or present perfect ("How many
… have I tried", "How long has she been …"), and no word of the past ("previous", "used to", "originally", 以前,
之前…). Present tense alone does not make one: "What does Melanie paint?" asks about what was said, whenever (on
LoCoMo, ordering such questions' answers newest first lost 4 points of evidence recall). Retrieval then ranks the
newer of two memories it finds about equally well first (``app.retrieval.time_aware.newest_first``).
"""

from __future__ import annotations

import re

_NOW_WORDS = re.compile(
    r"\b(now|nowadays|currently|current|these days|at the moment|at present|still|so far|latest|most recent|"
    r"recent|recently|any ?more|as of today)\b",
    re.IGNORECASE,
)
_PAST_WORDS = re.compile(
    r"\b(previous|previously|used to|formerly|originally|at first|first time|in the beginning|back then|before|"
    r"earlier|ago|once|in the past)\b",
    re.IGNORECASE,
)
_AMOUNT = re.compile(r"\bhow (many|much|long|often)\b", re.IGNORECASE)
_AUXILIARY = re.compile(r"\b(do|does|is|are|am|have|has|did|was|were|had)\b", re.IGNORECASE)
_PAST_AUXILIARIES = {"did", "was", "were", "had"}
_CN_NOW = re.compile(r"现在|目前|如今|最近|当前|仍然|依然|还在|至今|到现在|这些天|近来")
_CN_AMOUNT = re.compile(r"多少|几[个次年月天只位家本部]|多久|多长时间")
_CN_PAST = re.compile(r"以前|之前|原来|曾经|当初|过去|那时|那次|上次|当年|起初|最初|第一次|去年|前年|上个月|上周")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def asks_about_now(query: str) -> bool:
    """Whether the question asks what is true now (the newest of several values) rather than about the past."""
    if _HAN.search(query):
        return not _CN_PAST.search(query) and bool(_CN_NOW.search(query) or _CN_AMOUNT.search(query))
    if _PAST_WORDS.search(query):
        return False
    if _NOW_WORDS.search(query):
        return True
    if not _AMOUNT.search(query):
        return False
    auxiliary = _AUXILIARY.search(query)
    return auxiliary is not None and auxiliary.group(1).lower() not in _PAST_AUXILIARIES
