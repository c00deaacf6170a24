"""Whose words a query is about: what the user said about their life, or what the assistant said to them.

An assistant's turn weighs ``assistant_weight`` (0.5) in the ranking, because a question about the past is most
often about the user ("How many museums did I visit in February?") and a long reply that shares its words would
outrank the line that holds the answer. A question about the assistant's own words ("the restaurant you
recommended", "our previous conversation about …") is the other case: there the assistant's turn is the answer,
and it weighs as much as anyone's. Only the past tense counts: "Can you recommend a restaurant?" asks for
something new, and what the user said about their tastes is what to find.
"""

from __future__ import annotations

import re

_ASKED = "say|tell|recommend|suggest|mention|give|provide|list|share|explain|describe|write|show|propose|advise|name"
_RECALLED = (
    "told|recommended|suggested|mentioned|said|gave|provided|listed|shared|explained|described|wrote|showed|"
    "proposed|advised|named|offered|pointed out|came up with"
)
ABOUT_THE_ASSISTANT = re.compile(
    rf"\byou\s+(?:\w+\s+)?(?:{_RECALLED})\b"  # "you recommended", "you had suggested"
    rf"|\bdid\s+you\s+(?:{_ASKED})\b"  # "what did you recommend"
    r"|\byour\s+(?:earlier|previous|last|past)\s+(?:recommendations?|suggestions?|advice|list|answer|response|reply)\b"
    r"|\bour\s+(?:previous|last|earlier|past)\s+(?:conversation|chat|discussion|talk|session)\b"
    r"|\bwe\s+(?:\w+\s+)?(?:discussed|talked about|went over|covered)\b"
    r"|\bdid\s+we\s+(?:discuss|talk about|go over|cover)\b"
    r"|你(?:之前|上次|刚才|以前|曾经|那次)?(?:说过|讲过|推荐过|提到过|建议过|告诉过我|推荐的|提到的|建议的|说的|讲的)"
    r"|我们(?:之前|上次|以前|那次)(?:聊|讨论|谈|说)",
    re.IGNORECASE,
)


def assistant_weight(query: str, weight: float) -> float:
    """What an assistant's turn weighs for this query: ``weight``, or 1 when the query asks about what the
    assistant said."""
    return 1.0 if ABOUT_THE_ASSISTANT.search(query or "") else weight
