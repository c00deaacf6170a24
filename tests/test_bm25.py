"""BM25 in SQL against an independent computation in Python, CJK through the BM25 leg alone, and the
term statistics after deletes."""

from __future__ import annotations

import math
from collections import Counter

import psycopg
import pytest

from app.text.tokenize import tokenize
from tests.retrieval_support import explain_analyze, memory, retrieve, search, window, write

CORPUS = [
    "The quarterly budget review is scheduled for Friday; the budget must be approved.",
    "Alice travelled to Beijing and loved the roast duck.",
    "Bob reviewed the release plan and moved the release date to March.",
    "Budget, budget, budget: the finance team talked about nothing but the budget all day long.",
    "A short note about hiking.",
    "The team discussed hiking routes, the weather, the food and the budget for the hiking trip in the Alps.",
    "我们下周去北京吃烤鸭，然后讨论项目预算。",
    "项目发布日期推迟到三月，预算需要重新审核。",
    "Mixed text: the 北京 office approved the budget for the release.",
    "Carol prefers tea over coffee and dislikes long meetings.",
]
UNIT = [1.0] + [0.0] * 383


def expected_bm25(query: str, docs: list[str], k1: float = 1.2, b: float = 0.75) -> dict[int, float]:
    """Okapi BM25 with idf = ln(1 + (N - df + 0.5) / (df + 0.5)), computed from the tokens alone."""
    tokenised = [tokenize(doc) for doc in docs]
    n = len(tokenised)
    avgdl = sum(len(tokens) for tokens in tokenised) / n
    terms = set(tokenize(query))
    df = {term: sum(term in tokens for tokens in tokenised) for term in terms}
    scores: dict[int, float] = {}
    for index, tokens in enumerate(tokenised):
        counts = Counter(tokens)
        score = 0.0
        for term in terms:
            tf = counts[term]
            if tf:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(tokens) / avgdl))
        if score > 0:
            scores[index] = score
    return scores


@pytest.fixture
def corpus(database_url):
    rows = write(database_url, [memory(text, UNIT, user_id=f"u{i}") for i, text in enumerate(CORPUS)])
    return [row["id"] for row in rows]


@pytest.mark.parametrize(
    "query",
    ["budget review", "budget hiking trip", "release date March", "北京烤鸭预算", "北京 budget release", "coffee"],
)
def test_sql_bm25_matches_an_independent_computation(settings, database_url, corpus, query):
    expected = expected_bm25(query, CORPUS)
    found = search(settings, database_url, query=query, filters=window(), top_k=100, mode="bm25")
    got = {corpus.index(m["id"]): m["bm25"] for m in found.memories}
    assert set(got) == set(expected)
    for index, score in expected.items():
        assert got[index] == pytest.approx(score, abs=1e-6), CORPUS[index]
    ranking = [corpus.index(m["id"]) for m in found.memories]
    assert ranking == sorted(expected, key=lambda i: (-expected[i], found.memories[ranking.index(i)]["id"]))
    top = max(expected.values())
    max_possible = sum(
        math.log(1 + (len(CORPUS) - df + 0.5) / (df + 0.5)) * 2.2
        for df in (sum(t in tokenize(d) for d in CORPUS) for t in set(tokenize(query)))
        if df
    )
    assert found.memories[0]["score"] == pytest.approx(top / max_possible, abs=1e-9)


def test_tf_saturates_and_long_documents_are_normalised(settings, database_url, corpus):
    found = search(settings, database_url, query="budget", filters=window(), top_k=100, mode="bm25")
    order = [corpus.index(m["id"]) for m in found.memories]
    assert order[0] == 3  # four occurrences beat two, but by less than twice
    scores = {corpus.index(m["id"]): m["bm25"] for m in found.memories}
    assert scores[3] < 2 * scores[0]
    assert scores[8] > scores[5]  # one occurrence each: the shorter memory wins


def test_chinese_query_finds_chinese_memories_through_bm25_alone(client, database_url, corpus):
    result = retrieve(client, query="北京烤鸭", retrieval_mode="bm25")
    contents = [m["content"] for m in result["memories"]]
    assert contents[0] == "我们下周去北京吃烤鸭，然后讨论项目预算。"
    assert "Mixed text: the 北京 office approved the budget for the release." in contents
    assert result["metadata"]["emb_count"] == 0
    fused = retrieve(client, query="项目预算", top_k=3)
    assert fused["memories"][0]["content"] in CORPUS[6:8] and fused["metadata"]["bm25_count"] == 2


def test_rare_terms_come_first_when_the_df_budget_is_small(settings, database_url, corpus):
    """With a budget below 'budget''s document frequency, only memories with the rarer term are
    candidates; 'budget' still adds to their scores."""
    tight = settings.model_copy(update={"bm25_df_budget": 2})
    found = search(tight, database_url, query="budget hiking", filters=window(), top_k=100, mode="bm25")
    assert {corpus.index(m["id"]) for m in found.memories} == {4, 5}
    exact = expected_bm25("budget hiking", CORPUS)
    assert {corpus.index(m["id"]): m["bm25"] for m in found.memories} == pytest.approx({4: exact[4], 5: exact[5]})


def _stats(url: str):
    with psycopg.connect(url) as conn:
        corpus_stats = conn.execute(
            "SELECT memory_type, doc_count, total_len FROM bm25_corpus_stats WHERE doc_count > 0 ORDER BY 1"
        ).fetchall()
        recomputed = conn.execute(
            "SELECT memory_type, count(*), sum(doc_len) FROM memories GROUP BY 1 ORDER BY 1"
        ).fetchall()
        terms = conn.execute("SELECT memory_type, term, df FROM bm25_term_stats ORDER BY 1, 2").fetchall()
        recomputed_terms = conn.execute(
            "SELECT memory_type, term, count(*) FROM memories, unnest(tsvector_to_array(tsv)) AS term "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
    return corpus_stats, recomputed, terms, recomputed_terms


def test_statistics_and_scores_stay_right_after_deletes(settings, database_url, corpus):
    with psycopg.connect(database_url) as conn:
        conn.execute("DELETE FROM memories WHERE id = ANY(%s)", ([corpus[0], corpus[3], corpus[6]],))
    corpus_stats, recomputed, terms, recomputed_terms = _stats(database_url)
    assert [tuple(r) for r in corpus_stats] == [tuple(r) for r in recomputed]
    assert terms == recomputed_terms
    remaining = [text for i, text in enumerate(CORPUS) if i not in (0, 3, 6)]
    expected = expected_bm25("budget 北京", remaining)
    found = search(settings, database_url, query="budget 北京", filters=window(), top_k=100, mode="bm25")
    got = {remaining.index(m["content"]): m["bm25"] for m in found.memories}
    assert got == pytest.approx(expected, abs=1e-6)


def test_candidate_cap_takes_memories_with_every_term_first(settings, database_url, corpus):
    capped = settings.model_copy(update={"bm25_max_candidates": 1})
    found = search(capped, database_url, query="budget hiking", filters=window(), top_k=100, mode="bm25")
    assert [corpus.index(m["id"]) for m in found.memories] == [5]  # the only memory with both terms
    exact = expected_bm25("budget hiking", CORPUS)
    assert found.memories[0]["bm25"] == pytest.approx(exact[5], abs=1e-6)


def test_every_memory_with_the_rarest_terms_is_a_candidate_before_those_of_commoner_ones(settings, database_url):
    """Written first, six memories with 'lantern' come first in the table; the two with 'zebra' (the rarer term)
    are candidates all the same, and one 'lantern' memory fills the third place."""
    lantern = [f"The lantern number {i} hangs in the hall." for i in range(6)]
    zebra = ["A zebra crossed the road.", "The zebra at the zoo is old."]
    rows = write(database_url, [memory(text, UNIT, user_id="u1") for text in lantern + zebra])
    capped = settings.model_copy(update={"bm25_max_candidates": 3})
    found = search(capped, database_url, query="zebra lantern", filters=window(), top_k=100, mode="bm25")
    ids = [m["id"] for m in found.memories]
    assert len(ids) == 3 and {rows[6]["id"], rows[7]["id"]} <= set(ids)


OTHER_GROUP = [f"Budget line {i}: the budget of team {i} for the budget year." for i in range(30)]


@pytest.fixture
def two_groups(database_url, corpus):
    """CORPUS in group g1 (the ``corpus`` fixture) and 30 budget-heavy memories in group g2."""
    write(database_url, [memory(text, UNIT, user_id="u99", group_id="g2") for text in OTHER_GROUP])
    return corpus


def test_a_group_filter_scores_with_the_groups_own_statistics(settings, database_url, two_groups):
    """Within a group of at most bm25_exact_max memories, BM25 is exact with that group's statistics: the
    other group's 30 budget memories change neither 'budget''s idf nor the mean length. Every memory with a
    query term is scored, however small the df budget."""
    tight = settings.model_copy(update={"bm25_df_budget": 1})
    for query in ("budget review", "budget hiking trip", "北京 budget release"):
        found = search(tight, database_url, query=query, filters=window(group_id="g1"), top_k=100, mode="bm25")
        got = {two_groups.index(m["id"]): m["bm25"] for m in found.memories}
        assert got == pytest.approx(expected_bm25(query, CORPUS), abs=1e-6), query


def test_whether_a_scope_is_exact_is_counted_before_any_of_its_rows_is_read(settings, database_url, two_groups):
    """The scope's size comes from a btree index: above the exact bound none of its memories' rows is read for BM25
    (a row with its vectors fills most of a page); within it, they are (their tsvectors are scored)."""

    def scope_rows_read(bound: int) -> bool:
        plan = explain_analyze(
            settings.model_copy(update={"bm25_exact_max": bound}), database_url, query="budget review",
            filters=window(group_id="g1"),
        )  # fmt: skip
        scope = plan[plan.index("CTE bm25_scope\n") : plan.index("CTE bm25_corpus")]
        scan = next(line for line in scope.splitlines() if " on memories " in line)
        return "never executed" not in scan

    assert not scope_rows_read(len(CORPUS) - 1)
    assert scope_rows_read(len(CORPUS))


def test_above_the_exact_bound_a_group_is_scored_with_the_tenants_statistics(settings, database_url, two_groups):
    bounded = settings.model_copy(update={"bm25_exact_max": len(CORPUS) - 1})
    found = search(bounded, database_url, query="budget review", filters=window(group_id="g1"), top_k=100, mode="bm25")
    got = {two_groups.index(m["id"]): m["bm25"] for m in found.memories}
    tenant = expected_bm25("budget review", CORPUS + OTHER_GROUP)
    assert got == pytest.approx({i: score for i, score in tenant.items() if i < len(CORPUS)}, abs=1e-6)
    assert got != pytest.approx(expected_bm25("budget review", CORPUS), abs=1e-6)
