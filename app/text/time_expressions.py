"""Rule-based time expressions in queries, English and Chinese, relative to a reference day.

``find_time_window("what did we decide last week?", today)`` gives the window of days the query points
at. No LLM is needed for what these rules cover ("yesterday", "last week", "in May 2023", "two years
ago", "去年五月", "上周", "3 days ago", "2023-05-08", …); the agentic flow asks an LLM only for what they
cannot parse. ``plain_filter`` says the query asks to *restrict* to the window ("only last week",
"只看上周") rather than merely mentioning it (then retrieval boosts memories in the window instead).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, timedelta, tzinfo


@dataclass(frozen=True)
class TimeWindow:
    start: date
    end: date  # inclusive
    expression: str
    plain_filter: bool = False
    zone: tzinfo = UTC
    """Whose days: the conversation's ``default_timezone`` (``start`` begins at its midnight there)."""

    def as_dict(self) -> dict:
        out = {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "expression": self.expression,
            "mode": "filter" if self.plain_filter else "boost",
        }
        if self.zone is not UTC:
            out["timezone"] = str(self.zone)
        return out


MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
CN_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "few": 3,
}  # fmt: skip
_NUM = r"\d{1,4}|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
CN_DIGITS = {
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
    "十": 10,
}
# At most four digits or numerals, not preceded by another: an unbounded run ("[零…十]+") made every
# rule quadratic in the query (each start position scanned to the end of a long run, then backtracked).
_CN_NUM = r"(?<![0-9零一二两三四五六七八九十])(?:[0-9]{1,4}|[零一二两三四五六七八九十]{1,4})"

_FILTER_WORDS = re.compile(
    r"\b(only|just|exclusively|strictly|limited to|restricted to)\b|仅|只(?:看|要|查|找)?|限于|仅限", re.IGNORECASE
)


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _week_of(day: date) -> tuple[date, date]:
    """Monday to Sunday of ``day``'s week; the calendar's last week ends on 9999-12-31, a Friday."""
    start = day - timedelta(days=day.weekday())  # 0001-01-01 is a Monday: never before the calendar
    return start, start + timedelta(days=min(6, (date.max - start).days))


def _number(text: str) -> int:
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    return NUMBER_WORDS.get(text, 1)


def _cn_number(text: str) -> int:
    if text.isdigit():
        return int(text)
    if text == "十":
        return 10
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (CN_DIGITS.get(tens, 1) if tens else 1) * 10 + (CN_DIGITS.get(ones, 0) if ones else 0)
    return CN_DIGITS.get(text, 0)


def _year_window(year: int) -> tuple[date, date]:
    return date(year, 1, 1), date(year, 12, 31)


def _month_window(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), _month_end(year, month)


def _ago(amount: int, unit: str, today: date) -> tuple[date, date]:
    unit = unit.lower().rstrip("s")
    if unit in ("day", "天", "日"):
        day = today - timedelta(days=amount)
        return day, day
    if unit in ("week", "周", "星期", "个星期", "个礼拜", "礼拜"):
        return _week_of(today - timedelta(weeks=amount))
    if unit in ("month", "月", "个月"):
        anchor = _add_months(today, -amount)
        return _month_window(anchor.year, anchor.month)
    return _year_window(today.year - amount)


def _english(query: str, today: date) -> tuple[tuple[date, date], str] | None:
    q = query.lower()
    rules: list[tuple[str, object]] = [
        (r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", lambda m: ((d := date(*map(int, m.groups()))), d)),
        (
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})\b",
            lambda m: ((d := date(int(m[3]), MONTHS[m[2]], int(m[1]))), d),
        ),
        (
            rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b",
            lambda m: ((d := date(int(m[3]), MONTHS[m[1]], int(m[2]))), d),
        ),
        (rf"\b({_MONTH})\.?,?\s+(?:of\s+)?(\d{{4}})\b", lambda m: _month_window(int(m[2]), MONTHS[m[1]])),
        (r"\bday before yesterday\b", lambda m: ((d := today - timedelta(days=2)), d)),
        (r"\byesterday\b", lambda m: ((d := today - timedelta(days=1)), d)),
        (r"\b(today|tonight|this morning|this afternoon|this evening)\b", lambda m: (today, today)),
        (rf"\b({_NUM})\s+(day|week|month|year)s?\s+ago\b", lambda m: _ago(_number(m[1]), m[2], today)),
        (r"\b(a|one)?\s*(day|week|month|year)\s+ago\b", lambda m: _ago(1, m[2], today)),
        (rf"\b(?:past|last|previous)\s+({_NUM})\s+(day|week|month|year)s\b", lambda m: _last_n(m, today)),
        (
            r"\b(?:last|previous)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
            lambda m: _previous_weekday(WEEKDAYS[m[1]], today),
        ),
        (r"\b(?:last|previous)\s+week(?:end)?\b", lambda m: _week_of(today - timedelta(weeks=1))),
        (r"\bthis\s+week\b", lambda m: _week_of(today)),
        (r"\b(?:last|previous)\s+month\b", lambda m: _month_window(*_ym(_add_months(today, -1)))),
        (r"\bthis\s+month\b", lambda m: _month_window(today.year, today.month)),
        (r"\b(?:last|previous)\s+year\b", lambda m: _year_window(today.year - 1)),
        (r"\bthis\s+year\b", lambda m: _year_window(today.year)),
        (
            rf"\b(?:last|previous)\s+({_MONTH})\b",
            lambda m: _month_window(today.year if MONTHS[m[1]] < today.month else today.year - 1, MONTHS[m[1]]),
        ),
        (rf"\b(?:in|during|since|on|of)\s+({_MONTH})\b", lambda m: _recent_month(MONTHS[m[1]], today)),
        (r"\b(?:in|during|of|since)\s+((?:19|20)\d{2})\b", lambda m: _year_window(int(m[1]))),
    ]
    return _first_match(rules, q)


def _chinese(query: str, today: date) -> tuple[tuple[date, date], str] | None:
    rules: list[tuple[str, object]] = [
        (
            rf"({_CN_NUM})年({_CN_NUM})月({_CN_NUM})[日号]",
            lambda m: ((d := date(_cn_year(m[1]), _cn_number(m[2]), _cn_number(m[3]))), d),
        ),
        (rf"({_CN_NUM})年({_CN_NUM})月", lambda m: _month_window(_cn_year(m[1]), _cn_number(m[2]))),
        (rf"去年({_CN_NUM})月", lambda m: _month_window(today.year - 1, _cn_number(m[1]))),
        (rf"前年({_CN_NUM})月", lambda m: _month_window(today.year - 2, _cn_number(m[1]))),
        (rf"今年({_CN_NUM})月", lambda m: _month_window(today.year, _cn_number(m[1]))),
        (r"大前天", lambda m: ((d := today - timedelta(days=3)), d)),
        (r"前天", lambda m: ((d := today - timedelta(days=2)), d)),
        (r"昨天|昨日|昨晚", lambda m: ((d := today - timedelta(days=1)), d)),
        (r"今天|今日|今晚", lambda m: (today, today)),
        (
            rf"({_CN_NUM})(天|日|周|个星期|星期|个礼拜|礼拜|个月|年)[以之]?前",
            lambda m: _ago(_cn_number(m[1]), m[2], today),
        ),
        (
            r"上周([一二三四五六日天])|上个?星期([一二三四五六日天])",
            lambda m: ((d := _week_of(today - timedelta(weeks=1))[0] + timedelta(days=CN_WEEKDAYS[m[1] or m[2]])), d),
        ),
        (r"上上周|上上个?星期", lambda m: _week_of(today - timedelta(weeks=2))),
        (r"上周|上个?星期|上个?礼拜", lambda m: _week_of(today - timedelta(weeks=1))),
        (r"这周|本周|这个?星期|这个?礼拜", lambda m: _week_of(today)),
        (r"上个?月", lambda m: _month_window(*_ym(_add_months(today, -1)))),
        (r"这个月|本月", lambda m: _month_window(today.year, today.month)),
        (r"前年", lambda m: _year_window(today.year - 2)),
        (r"去年", lambda m: _year_window(today.year - 1)),
        (r"今年", lambda m: _year_window(today.year)),
        (rf"({_CN_NUM})年", lambda m: _year_window(_cn_year(m[1])) if len(m[1]) == 4 else None),
        (rf"({_CN_NUM})月份?", lambda m: _recent_month(_cn_number(m[1]), today)),
    ]
    return _first_match(rules, query)


def _cn_year(text: str) -> int:
    if text.isdigit():
        return int(text)
    return int("".join(str(CN_DIGITS.get(ch, 0)) for ch in text))


def _ym(day: date) -> tuple[int, int]:
    return day.year, day.month


def _previous_weekday(weekday: int, today: date) -> tuple[date, date]:
    """The latest such weekday strictly before today."""
    day = today - timedelta(days=(today.weekday() - weekday) % 7 or 7)
    return day, day


def _recent_month(month: int, today: date) -> tuple[date, date]:
    """A bare month name means its latest occurrence not after today."""
    year = today.year if month <= today.month else today.year - 1
    return _month_window(year, month)


def _last_n(match: re.Match, today: date) -> tuple[date, date]:
    amount, unit = _number(match[1]), match[2]
    if unit == "day":
        return today - timedelta(days=amount), today
    if unit == "week":
        return today - timedelta(weeks=amount), today
    if unit == "month":
        return _add_months(today, -amount), today
    return date(today.year - amount, today.month, min(today.day, 28)), today


def _first_match(rules, text: str) -> tuple[tuple[date, date], str] | None:
    for pattern, build in rules:
        for match in re.finditer(pattern, text, flags=re.IGNORECASE):
            try:
                window = build(match)
            except (ValueError, KeyError, OverflowError):  # OverflowError: before year 1 or after 9999
                continue
            if window:
                return window, match.group(0)
    return None


def find_time_window(query: str, today: date) -> TimeWindow | None:
    """The window of days the query refers to, or None when the rules find no time expression."""
    found = _chinese(query, today) if re.search(r"[\u4e00-\u9fff]", query) else None
    found = found or _english(query, today)
    if not found:
        return None
    (start, end), expression = found
    return TimeWindow(start=start, end=end, expression=expression, plain_filter=bool(_FILTER_WORDS.search(query)))


def has_time_hint(query: str) -> bool:
    """Words suggesting a time reference the rules may have missed (worth asking an LLM)."""
    return bool(
        re.search(
            r"\b(ago|before|after|since|until|during|recently|earlier|later|last|next|week|month|year|"
            r"season|spring|summer|autumn|fall|winter|weekend|holiday|christmas|birthday)\b|以前|之前|之后|最近|期间",
            query,
            re.IGNORECASE,
        )
    )
