"""retrieve_lightweight with time_aware (on by default): the window a query names boosts, or filters when asked
plainly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.retrieval.time_aware import newest_first
from app.text.now_questions import asks_about_now
from tests.retrieval_support import memory, retrieve, write

TODAY = datetime(2025, 1, 15, 12, tzinfo=UTC)  # a Wednesday; "last week" is 6-12 January


@pytest.fixture
def dated(client, database_url):
    embedder = client.app.state.runtime.embedder
    rows = [
        ("Alice cooked a curry for the team dinner", 30),
        ("Alice cooked pasta for the family", 8),  # last week
        ("Alice cooked dumplings with her grandmother", 700),  # in 2023
    ]
    written = write(
        database_url,
        [memory(t, embedder.embed_sync([t])[0], timestamp=TODAY - timedelta(days=d)) for t, d in rows],
    )
    return {row["content"]: row for row in written}


def ask(client, query, **body):
    return retrieve(client, query=query, group_id="g1", current_time="2025-01-15", **body)


def test_on_by_default_and_off_when_asked(client, dated):
    result = ask(client, "What did Alice cook last week?", time_range_days=365)
    assert result["metadata"]["time_window"]["expression"] == "last week"
    assert result["memories"][0]["content"] == "Alice cooked pasta for the family"
    off = ask(client, "What did Alice cook last week?", time_range_days=365, time_aware=False)
    assert off["metadata"]["time_window"] is None
    assert all(m["weight"] is None for m in off["memories"])
    assert len(off["memories"]) == 2  # the 2023 memory is outside the 365 days


def test_a_query_naming_no_time_is_ranked_as_without_it(client, dated):
    query = "What did Alice cook for the team?"
    aware, off = ask(client, query), ask(client, query, time_aware=False)
    assert aware["metadata"]["time_window"] is None
    assert [(m["id"], m["score"], m["weight"]) for m in aware["memories"]] == [
        (m["id"], m["score"], m["weight"]) for m in off["memories"]
    ]
    assert aware["memories"][0]["content"] == "Alice cooked a curry for the team dinner"


def test_boost_puts_the_window_first(client, dated):
    plain = ask(client, "What did Alice cook last week for the team?", time_aware=False)
    assert plain["memories"][0]["content"] == "Alice cooked a curry for the team dinner"
    aware = ask(client, "What did Alice cook last week for the team?", time_aware=True)
    window = aware["metadata"]["time_window"]
    assert window == {"start": "2025-01-06", "end": "2025-01-12", "expression": "last week", "mode": "boost"}
    first = aware["memories"][0]
    assert first["content"] == "Alice cooked pasta for the family" and first["weight"] == 2.0
    assert [m["weight"] for m in aware["memories"][1:]] == [1.0, 1.0]  # all time by default: the 2023 one too


def test_plain_words_filter_to_the_window(client, dated):
    result = ask(client, "Only last week: what did Alice cook?", time_aware=True)
    assert result["metadata"]["time_window"]["mode"] == "filter"
    assert [m["content"] for m in result["memories"]] == ["Alice cooked pasta for the family"]


def test_a_named_year_reaches_past_the_default_range_unless_the_range_is_given(client, dated):
    result = ask(client, "What did Alice cook in 2023?", time_aware=True)
    assert result["memories"][0]["content"] == "Alice cooked dumplings with her grandmother"
    kept = ask(client, "What did Alice cook in 2023?", time_aware=True, time_range_days=365)
    assert "Alice cooked dumplings with her grandmother" not in [m["content"] for m in kept["memories"]]


def test_chinese_time_expression(client, database_url):
    embedder = client.app.state.runtime.embedder
    text = "爱丽丝上周做了饺子"
    write(database_url, [memory(text, embedder.embed_sync([text])[0], timestamp=TODAY - timedelta(days=8))])
    result = ask(client, "只看上周：爱丽丝做了什么？", time_aware=True)
    assert result["metadata"]["time_window"]["expression"] == "上周"
    assert [m["content"] for m in result["memories"]] == [text]


def test_the_conversations_time_zone_decides_which_day_yesterday_is(client, database_url):
    """Group g1 lives in Asia/Shanghai: 01:30 there on 14 January is 13 January in UTC. "Only yesterday"
    asked on 15 January means Shanghai's 14 January, not UTC's."""
    from tests.formation_helpers import META, META_BODY

    meta = {**META_BODY, "group_id": "g1", "default_timezone": "Asia/Shanghai"}
    assert client.post(META, json=meta).status_code == 200
    embedder = client.app.state.runtime.embedder
    rows = [
        ("Alice cooked noodles after midnight", datetime(2025, 1, 13, 17, 30, tzinfo=UTC)),  # 14 Jan, 01:30 +08
        ("Alice cooked rice on the evening before", datetime(2025, 1, 13, 12, 0, tzinfo=UTC)),  # 13 Jan, 20:00 +08
    ]
    write(database_url, [memory(t, embedder.embed_sync([t])[0], timestamp=at) for t, at in rows])
    result = ask(client, "Only yesterday: what did Alice cook?", time_aware=True)
    assert result["metadata"]["time_window"] == {
        "start": "2025-01-14",
        "end": "2025-01-14",
        "expression": "yesterday",
        "mode": "filter",
        "timezone": "Asia/Shanghai",
    }
    assert [m["content"] for m in result["memories"]] == ["Alice cooked noodles after midnight"]
    # Without a group (no conversation-meta) the days are UTC's: both were cooked on UTC's 13 January.
    utc = retrieve(client, query="Only yesterday: what did Alice cook?", current_time="2025-01-14", time_aware=True)
    assert utc["metadata"]["time_window"]["start"] == "2025-01-13" and "timezone" not in utc["metadata"]["time_window"]
    assert {m["content"] for m in utc["memories"]} == {c for c, _ in rows}


@pytest.mark.parametrize(
    ("query", "about_now"),
    [
        ("How many Korean restaurants have I tried in my city?", True),
        ("How long have my parents been staying with me?", True),
        ("Where does Alice live now?", True),
        ("What book is Jon currently reading?", True),
        ("Where did Rachel move to after her recent relocation?", True),
        ("小李现在住在哪里？", True),
        ("小李养了几只猫？", True),
        ("What did Alice cook for the team?", False),  # the past tense and no word of now
        ("What does Melanie paint?", False),  # present tense alone: what was said, whenever
        ("What was my previous personal best?", False),
        ("How many restaurants had I tried before the move?", False),
        ("How often do I play tennis now, and how often previously?", False),  # a word of the past wins
        ("小李以前住在哪里？", False),
        ("小李去年养了什么？", False),
    ],
)
def test_a_question_about_now_is_told_by_its_words(query, about_now):
    assert asks_about_now(query) is about_now


def _found(score: float, day: int) -> dict:
    return {"id": f"{score}-{day}", "score": score, "timestamp": datetime(2025, 1, day, tzinfo=UTC).isoformat()}


def test_newest_first_lifts_a_newer_memory_within_the_band_only():
    old, newer, far_below = _found(1.0, 1), _found(0.95, 10), _found(0.5, 20)
    assert newest_first([old, newer, far_below], 0.93) == [newer, old, far_below]
    assert newest_first([old, newer, far_below], 0.96) == [old, newer, far_below]
    top, older = _found(1.0, 10), _found(0.99, 1)
    assert newest_first([top, older], 0.5) == [top, older]  # an older memory is never lifted
    # A chain: each newer within the band of the one it follows takes its place.
    a, b, c = _found(1.0, 1), _found(0.96, 5), _found(0.94, 9)
    assert newest_first([a, b, c], 0.93) == [c, b, a]
    # Only over an older memory alike (about the same thing): an unrelated newer one keeps its place.
    assert newest_first(
        [a, b, c], 0.93, alike=lambda newer, older: {newer["id"], older["id"]} == {a["id"], c["id"]}
    ) == [c, a, b]


def _said(client, database_url, *said: tuple[str, int]) -> list[str]:
    """Memories of what was said (text, days before TODAY), embedded as formation embeds them; their ids."""
    embedder = client.app.state.runtime.embedder
    written = write(
        database_url,
        [memory(t, embedder.embed_sync([t])[0], timestamp=TODAY - timedelta(days=d)) for t, d in said],
    )
    return [row["id"] for row in written]


def test_a_question_about_now_finds_the_newer_of_two_counts_first(client, database_url):
    """The user said a count twice; asked how many now, the later count comes first, where the earlier stood (it
    ranks first by words alone, as time_aware=false shows). A question about the past keeps the search's order."""
    earlier, later = _said(
        client,
        database_url,
        ("I have tried three Korean restaurants in my city.", 160),
        ("Update on the food front: four different Korean places tried in town so far.", 20),
    )
    query = "How many Korean restaurants have I tried in my city?"
    plain = ask(client, query, time_aware=False)
    assert [m["id"] for m in plain["memories"]] == [earlier, later]
    assert [m["id"] for m in ask(client, query)["memories"]] == [later, earlier]
    past = ask(client, "How many Korean restaurants had I tried in my city before?")
    assert [m["id"] for m in past["memories"]] == [earlier, later]


def test_a_newer_memory_about_something_else_keeps_its_place(client, database_url):
    """Found about as well but about another thing (its vector unlike the older one's): not lifted."""
    earlier, unrelated = _said(
        client,
        database_url,
        ("I have read three novels by Elena Ferrante so far this year.", 160),
        ("I moved to Berlin and adopted a dog; so far the flat is great.", 20),
    )
    query = "How many novels by Elena Ferrante have I read so far?"
    plain = ask(client, query, time_aware=False)["memories"]
    assert [m["id"] for m in plain] == [earlier, unrelated]
    assert plain[1]["score"] >= 0.93 * plain[0]["score"]  # within the band: only their unlikeness keeps the order
    assert [m["id"] for m in ask(client, query)["memories"]] == [earlier, unrelated]
