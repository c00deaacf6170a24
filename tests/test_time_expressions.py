"""Rule-based time expressions: English and Chinese, relative to a reference day."""

from __future__ import annotations

from datetime import date

import pytest

from app.text.time_expressions import find_time_window

TODAY = date(2025, 1, 15)  # a Wednesday


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what happened yesterday?", "2025-01-14", "2025-01-14"),
        ("what did we decide last week", "2025-01-06", "2025-01-12"),
        ("the trip in May 2023", "2023-05-01", "2023-05-31"),
        ("two years ago we moved", "2023-01-01", "2023-12-31"),
        ("3 days ago", "2025-01-12", "2025-01-12"),
        ("on 8 May, 2023", "2023-05-08", "2023-05-08"),
        ("May 8, 2023", "2023-05-08", "2023-05-08"),
        ("in 2022", "2022-01-01", "2022-12-31"),
        ("last month", "2024-12-01", "2024-12-31"),
        ("in March", "2024-03-01", "2024-03-31"),
        ("last Friday", "2025-01-10", "2025-01-10"),
        ("the past 2 weeks", "2025-01-01", "2025-01-15"),
        ("去年五月我们去了哪里", "2024-05-01", "2024-05-31"),
        ("上周讨论了什么", "2025-01-06", "2025-01-12"),
        ("上周五的会议", "2025-01-10", "2025-01-10"),
        ("三天前", "2025-01-12", "2025-01-12"),
        ("两年前", "2023-01-01", "2023-12-31"),
        ("2023年5月", "2023-05-01", "2023-05-31"),
        ("昨天", "2025-01-14", "2025-01-14"),
        ("上个月", "2024-12-01", "2024-12-31"),
    ],
)
def test_windows(query: str, start: str, end: str) -> None:
    window = find_time_window(query, TODAY)
    assert window is not None, query
    assert (window.start.isoformat(), window.end.isoformat()) == (start, end)


def test_no_time_expression() -> None:
    assert find_time_window("What does the user like to eat?", TODAY) is None
    assert find_time_window("用户喜欢吃什么", TODAY) is None


def test_plain_filter_words() -> None:
    assert find_time_window("only last week's meetings", TODAY).plain_filter
    assert find_time_window("只看上周的会议", TODAY).plain_filter
    assert not find_time_window("what did we decide last week", TODAY).plain_filter
