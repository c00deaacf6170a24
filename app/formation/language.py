"""The conversation's language (memories are written in it) and how times read in it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta, tzinfo

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)


def detect_language(texts: Iterable[str]) -> str:
    """'zh' when at least a third of the letters are Chinese characters, else 'en'."""
    cjk = letters = 0
    for text in texts:
        cjk += len(_CJK.findall(text))
        letters += len(_LETTER.findall(text))
    return "zh" if letters and cjk * 3 >= letters else "en"


def local(moment: datetime, zone: tzinfo) -> datetime:
    return moment.astimezone(zone)


def day_text(moment: datetime, language: str) -> str:
    """An absolute day: '15 Jan 2025' or '2025年1月15日'."""
    if language == "zh":
        return f"{moment.year}年{moment.month}月{moment.day}日"
    return f"{moment.day} {moment:%b %Y}"


def gap_text(gap: timedelta, language: str) -> str:
    """A time gap as words, for the boundary judge: '3 hours 20 minutes' / '3小时20分钟'."""
    minutes = max(0, int(gap.total_seconds() // 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if language == "zh":
        parts = [f"{days}天" if days else "", f"{hours}小时" if hours else "", f"{minutes}分钟" if minutes else ""]
        return "".join(parts) or "不到1分钟"
    words = [
        f"{days} day{'s' * (days != 1)}" if days else "",
        f"{hours} hour{'s' * (hours != 1)}" if hours else "",
        f"{minutes} minute{'s' * (minutes != 1)}" if minutes else "",
    ]
    return " ".join(word for word in words if word) or "less than a minute"
