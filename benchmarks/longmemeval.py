"""LongMemEval_S: memsys driven through its public HTTP API, against the no-LLM anchors, on the same data.

    python -m benchmarks.longmemeval [--data ../shared/datasets/longmemeval/longmemeval_s_dev.jsonl.gz]
        [--questions N] [--base-url URL --skip-ingest] [--llm URL] [--out DIR]

Each question's history is memorized in its own group (``lme-<n>``): its sessions in order, each at its date,
the user and the assistant as the two senders, message ids positional (``s<session>-t<turn>``: the dataset's
session ids say which sessions hold the answer and never reach memsys), then flushed. Each question is asked
through ``retrieve_lightweight`` (every retrieval mode and data source, ``current_time`` = the question's date,
all time) and, with ``--llm``, ``retrieve_agentic``. In the same run the anchors answer the same questions:
BM25, dense all-MiniLM-L6-v2 and their RRF over the raw turns, and dense MiniLM over one document per session
made of its user turns (MemPalace "raw").

Figures, per question type and overall, abstention questions left out (they have no evidence):
- session level: ``recall_any@k`` / ``recall_all@k`` (k = 1, 3, 5, 10) over the first k distinct sessions;
- turn level: evidence recall (the ``has_answer`` turns) within 512 / 2,048 tokens of retrieved text
  (``benchmarks/evidence_recall.py``: whole items in rank order, the first that does not fit ends the fill),
  and LongMemEval's own turn-level ``recall_all@k`` (k = 5, 10, 50: ``src/retrieval/eval_utils.py`` of
  xiaowu0162/LongMemEval, over the distinct turns in rank order);
- knowledge-update: whether the latest evidence turn ranks above the older ones; temporal-reasoning: whether
  each evidence item found carries its session's date.
``--questions N`` takes N questions spread over the types in proportion (the first of each type, file order).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from benchmarks.common import (
    RESULTS_DIR,
    memsys_server,
    panel_plot,
    percentiles,
    post_json,
    print_table,
    save,
    wait_until_formed,
)
from benchmarks.evidence_recall import Retrieved, recall_at_tokens

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared/datasets/longmemeval/longmemeval_s_dev.jsonl.gz"
DEFAULT_OUT = RESULTS_DIR / "longmemeval"
MODES = ("rrf", "embedding", "bm25")
SOURCES = ("event_log", "episode")
TURN_OFFSET = timedelta(seconds=30)
TOP_K_ASKED = 100
SESSION_K = (1, 3, 5, 10)
OFFICIAL_K = (5, 10, 50)
BUDGETS = (512, 2048)
CACHE = Path.home() / ".cache" / "memsys-benchmarks" / "longmemeval-minilm"
TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)


@dataclass
class Turn:
    turn_id: str  # "s<session>-t<turn>", positional within the question
    session: int
    role: str
    content: str
    create_time: datetime
    has_answer: bool

    @property
    def baseline_text(self) -> str:
        return f"[{self.create_time:%Y-%m-%d}] {self.role}: {self.content}"


@dataclass
class Question:
    index: int
    question_id: str
    question_type: str
    question: str
    asked_at: datetime
    answer: str
    turns: list[Turn]
    evidence_sessions: list[int]
    session_dates: list[datetime] = field(default_factory=list)

    @property
    def group_id(self) -> str:
        return f"lme-{self.index:03d}"

    @property
    def evidence_turns(self) -> list[str]:
        return [t.turn_id for t in self.turns if t.has_answer]

    @property
    def scored(self) -> bool:
        return not self.question_id.endswith("_abs") and bool(self.evidence_sessions)


def parse_date(text: str) -> datetime:
    """``2023/05/30 (Tue) 22:53`` as UTC."""
    day, _, clock = text.partition(" (")
    return datetime.strptime(f"{day} {clock.split(') ')[1]}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def load(
    path: Path, limit: int | None = None, after: int | None = None, types: list[str] | None = None
) -> list[Question]:
    """The questions (``limit``: spread over the types; ``after``: less those a ``--questions after`` run took;
    ``types``: of these types only)."""
    with gzip.open(path, "rt") as source:
        items = json.loads(source.readline())["items"]
        sessions = {s["session_id"]: s["turns"] for s in map(json.loads, source)}
    if types:
        items = [item for item in items if item["question_type"] in types]
    chosen = items if limit is None else _stratified(items, limit)
    if after:
        taken = {item["question_id"] for item in _stratified(items, after)}
        chosen = [item for item in chosen if item["question_id"] not in taken]
    questions = []
    for index, item in enumerate(chosen):
        turns: list[Turn] = []
        dates = [parse_date(d) for d in item["haystack_dates"]]
        for number, (session_id, start) in enumerate(zip(item["haystack_session_ids"], dates, strict=True)):
            for k, raw in enumerate(sessions[session_id]):
                turns.append(
                    Turn(
                        f"s{number}-t{k}",
                        number,
                        raw["role"],
                        raw["content"],
                        start + k * TURN_OFFSET,
                        bool(raw.get("has_answer")),
                    )
                )
        evidence = [n for n, sid in enumerate(item["haystack_session_ids"]) if sid in set(item["answer_session_ids"])]
        questions.append(
            Question(
                index,
                item["question_id"],
                item["question_type"],
                item["question"],
                parse_date(item["question_date"]),
                str(item["answer"]),
                turns,
                evidence,
                dates,
            )
        )
    return questions


def _stratified(items: list[dict], limit: int) -> list[dict]:
    by_type: dict[str, list[dict]] = defaultdict(list)
    for item in items:
        by_type[item["question_type"]].append(item)
    share = {t: max(1, round(limit * len(v) / len(items))) for t, v in by_type.items()}
    chosen = {id(i) for t, v in by_type.items() for i in v[: share[t]]}
    return [i for i in items if id(i) in chosen]


# --- memsys, through the HTTP API ---------------------------------------------------------------------


async def ingest_question(client: httpx.AsyncClient, question: Question) -> None:
    await post_json(
        client,
        "/api/v3/agentic/conversation-meta",
        {
            "version": "1.0",
            "scene": "assistant",
            "scene_desc": "LongMemEval: a user's chat sessions with an AI assistant",
            "name": question.group_id,
            "description": f"LongMemEval history {question.group_id}",
            "group_id": question.group_id,
            "created_at": question.turns[0].create_time.isoformat(),
            "default_timezone": "UTC",
            "user_details": {
                "user": {"full_name": "User", "role": "user"},
                "assistant": {"full_name": "Assistant", "role": "assistant"},
            },
            "tags": ["longmemeval"],
        },
    )
    for turn in question.turns:
        if not turn.content.strip():
            continue  # a few turns of the dataset are empty; memorize refuses an empty message (their ids stay)
        await post_json(
            client,
            "/api/v3/agentic/memorize",
            {
                "group_id": question.group_id,
                "message_id": turn.turn_id,
                "create_time": turn.create_time.isoformat(),
                "sender": turn.role,
                "sender_name": turn.role.capitalize(),
                "content": turn.content,
                "refer_list": [],
            },
        )
    await post_json(client, "/api/v3/agentic/flush", {"group_id": question.group_id})


async def ingest(base_url: str, questions: list[Question], concurrency: int) -> dict:
    """Memorize every history, then wait until every message is formed; the seconds each part took."""
    started = time.perf_counter()
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:

        async def one(question: Question) -> None:
            async with gate:
                await ingest_question(client, question)

        await asyncio.gather(*(one(q) for q in questions))
        acknowledged = time.perf_counter() - started
        await wait_until_formed(client)
    turns = sum(1 for q in questions for t in q.turns if t.content.strip())
    formed = time.perf_counter() - started
    return {
        "turns": turns,
        "characters": sum(len(t.content) for q in questions for t in q.turns),
        "acknowledged_s": round(acknowledged, 1),
        "formed_s": round(formed, 1),
        "acknowledged_turns_per_s": round(turns / acknowledged, 1),
        "formed_turns_per_s": round(turns / formed, 1),
    }


@dataclass(frozen=True)
class Variant:
    system: str
    retrieval_mode: str
    data_source: str

    @property
    def name(self) -> str:
        return f"{self.system}/{self.retrieval_mode}/{self.data_source}"


@dataclass
class Item:
    """One ranked item: the text a reader gets, the turns it came from and the time it carries."""

    content: str
    turns: tuple[str, ...]
    timestamp: str | None = None


async def ask_memsys(
    base_url: str, questions: list[Question], llm: dict | None, concurrency: int
) -> tuple[dict[Variant, list[list[Item]]], list[float]]:
    jobs = []
    for position, question in enumerate(questions):
        base = {
            "query": question.question,
            "group_id": question.group_id,
            "top_k": TOP_K_ASKED,
            "memory_scope": "group",
            "current_time": question.asked_at.date().isoformat(),
        }
        for mode in MODES:
            for source in SOURCES:
                jobs.append(
                    (
                        Variant("memsys", mode, source),
                        position,
                        "retrieve_lightweight",
                        {**base, "retrieval_mode": mode, "data_source": source},
                    )
                )
        jobs.append(
            (
                # time_aware is on by default (since 2026-11-27): runs before then named this "rrf+time_aware" and
                # asked the modes above without it.
                Variant("memsys", "rrf-time_aware", "event_log"),
                position,
                "retrieve_lightweight",
                {**base, "retrieval_mode": "rrf", "data_source": "event_log", "time_aware": False},
            )
        )
        if llm:
            jobs.append(
                (
                    Variant("memsys", "agentic", "event_log"),
                    position,
                    "retrieve_agentic",
                    {**base, "data_source": "event_log", "top_k": 20, "llm_config": llm},
                )
            )
    ranked: dict[Variant, list[list[Item]]] = defaultdict(lambda: [[] for _ in questions])
    latencies: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:

        async def one(variant: Variant, position: int, endpoint: str, body: dict) -> None:
            async with gate:
                started = time.perf_counter()
                payload = await post_json(client, f"/api/v3/agentic/{endpoint}", body)
                if endpoint == "retrieve_lightweight":
                    latencies.append((time.perf_counter() - started) * 1000)
            ranked[variant][position] = [
                Item(m["content"], tuple(m.get("source_message_ids") or ()), m.get("timestamp"))
                for m in payload["result"]["memories"]
            ]

        await asyncio.gather(*(one(*job) for job in jobs))
    return dict(ranked), latencies


# --- the anchors ----------------------------------------------------------------------------------------


def ask_baselines(questions: list[Question]) -> dict[Variant, list[list[Item]]]:
    """BM25, dense and RRF over each question's raw turns; dense over one document per session of its user
    turns (each session document a single item, its turns the user turns)."""
    import numpy as np

    from app.providers.embeddings import BUNDLED_MODEL, LocalEmbedder
    from benchmarks.raw_turn_baselines import BASELINES, RawTurnIndex

    embedder = CachedEmbedder(LocalEmbedder(BUNDLED_MODEL, 384, 64, threads=2))
    ranked: dict[Variant, list[list[Item]]] = {Variant(f"raw-{b}", b, "raw_turns"): [] for b in BASELINES}
    sessions_variant = Variant("raw-dense", "embedding", "user_sessions")
    ranked[sessions_variant] = []
    for question in questions:
        items = [Item(t.baseline_text, (t.turn_id,), t.create_time.isoformat()) for t in question.turns]
        index = RawTurnIndex([item.content for item in items], embedder)
        rankings = index.rank_all([question.question])[0]
        for name in BASELINES:
            ranked[Variant(f"raw-{name}", name, "raw_turns")].append([items[i] for i in rankings[name]])
        documents: dict[int, list[Turn]] = defaultdict(list)
        for turn in question.turns:
            if turn.role == "user":
                documents[turn.session].append(turn)
        sessions = sorted(documents)
        texts = ["\n".join(t.content for t in documents[s]) for s in sessions]
        vectors = np.asarray(embedder.embed_sync(texts), dtype=np.float32)
        query = np.asarray(embedder.embed_sync([question.question])[0], dtype=np.float32)
        order = np.argsort(-(vectors @ query), kind="stable")
        ranked[sessions_variant].append(
            [Item(texts[i], tuple(t.turn_id for t in documents[sessions[i]])) for i in order]
        )
    return ranked


class CachedEmbedder:
    """The anchors' embedder with its vectors kept on disk (``CACHE``), by text: a second run embeds nothing."""

    def __init__(self, embedder) -> None:
        self._embedder = embedder

    def embed_sync(self, texts: list[str]) -> list[list[float]]:
        import hashlib

        import numpy as np

        key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:32]
        path = CACHE / f"{key}.npy"
        if path.exists():
            return np.load(path)
        vectors = np.asarray(self._embedder.embed_sync(texts), dtype=np.float32)
        CACHE.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
        return vectors


# --- scoring --------------------------------------------------------------------------------------------


def session_of(turn_id: str) -> int:
    return int(turn_id.split("-")[0][1:])


def distinct_sessions(ranked: list[Item]) -> list[int]:
    seen: list[int] = []
    for item in ranked:
        for turn in item.turns:
            session = session_of(turn)
            if session not in seen:
                seen.append(session)
    return seen


def distinct_turns(ranked: list[Item]) -> list[str]:
    seen: dict[str, None] = {}
    for item in ranked:
        for turn in item.turns:
            seen.setdefault(turn)
    return list(seen)


def question_figures(question: Question, ranked: list[Item]) -> dict:
    sessions = distinct_sessions(ranked)
    evidence_sessions = set(question.evidence_sessions)
    evidence_turns = question.evidence_turns
    figures: dict = {}
    for k in SESSION_K:
        found = evidence_sessions & set(sessions[:k])
        figures[f"session_any@{k}"] = float(bool(found))
        figures[f"session_all@{k}"] = float(found == evidence_sessions)
    if evidence_turns:
        retrieved = [Retrieved(item.content, frozenset(item.turns)) for item in ranked]
        for budget in BUDGETS:
            figures[f"turn_recall@{budget}tok"] = recall_at_tokens(retrieved, evidence_turns, budget)
        turns = distinct_turns(ranked)
        for k in OFFICIAL_K:  # LongMemEval's evaluate_retrieval over turns
            figures[f"official_turn_all@{k}"] = float(set(evidence_turns) <= set(turns[:k]))
    if question.question_type == "knowledge-update" and len({session_of(t) for t in evidence_turns}) > 1:
        turns = distinct_turns(ranked)
        found = [t for t in turns if t in set(evidence_turns)]
        latest = max(evidence_turns, key=lambda t: (session_of(t), int(t.split("-t")[1])))
        figures["latest_first"] = float(bool(found) and found[0] == latest)
    if question.question_type == "temporal-reasoning":
        dated = [
            item.timestamp[:10] == question.session_dates[session_of(item.turns[0])].date().isoformat()
            for item in ranked[:20]
            if item.timestamp and item.turns and set(item.turns) & set(evidence_turns)
        ]
        if dated:
            figures["evidence_dated_right"] = float(all(dated))
    return figures


def per_question(questions: list[Question], ranked: dict[Variant, list[list[Item]]]) -> list[dict]:
    """Each scored question's figures per variant (saved, so that runs on other questions can be combined)."""
    return [
        {
            "question_id": q.question_id,
            "question_type": q.question_type,
            "figures": {v.name: question_figures(q, ranked[v][i]) for v in ranked},
        }
        for i, q in enumerate(questions)
        if q.scored
    ]


def score(scored: list[dict]) -> list[dict]:
    """Mean figures per variant, overall and per type, of ``per_question``'s entries (one run's or several)."""
    rows = []
    names = list(dict.fromkeys(name for q in scored for name in q["figures"]))
    for name in names:
        system, mode, source = name.split("/")
        figures = [q["figures"].get(name, {}) for q in scored]
        groups = [("all", list(range(len(scored))))] + [
            (t, [i for i, q in enumerate(scored) if q["question_type"] == t]) for t in TYPES
        ]
        for group, members in groups:
            if not members:
                continue
            keys = sorted({key for i in members for key in figures[i]})
            row = {
                "system": system,
                "retrieval_mode": mode,
                "data_source": source,
                "question_type": group,
                "questions": len(members),
            }
            for key in keys:
                values = [figures[i][key] for i in members if key in figures[i]]
                row[key] = round(statistics.fmean(values), 3)
                if key in ("latest_first", "evidence_dated_right"):
                    row[f"{key}_n"] = len(values)
            rows.append(row)
    return rows


COLUMNS = (
    "session_any@5",
    "session_all@5",
    "session_all@10",
    "turn_recall@512tok",
    "turn_recall@2048tok",
    "official_turn_all@5",
    "official_turn_all@10",
    "official_turn_all@50",
)


def print_results(rows: list[dict]) -> None:
    flat = [
        {
            "system": r["system"],
            "mode": r["retrieval_mode"],
            "source": r["data_source"],
            "type": r["question_type"],
            "n": r["questions"],
            **{c: r.get(c) for c in COLUMNS},
        }
        for r in rows
    ]
    flat.sort(key=lambda r: (r["type"] != "all", r["type"], r["system"], r["mode"], r["source"]))
    print_table(flat, ["system", "mode", "source", "type", "n", *COLUMNS])


def plot(rows: list[dict], out_dir: Path) -> Path:
    """Turn-level evidence recall against the token budget, per question type: memsys's variants beside the
    anchors."""
    panels = {}
    for group in ("all", *TYPES):
        series = {
            f"{r['system']} {r['retrieval_mode']} {r['data_source']}": (
                list(BUDGETS),
                [r[f"turn_recall@{b}tok"] for b in BUDGETS],
            )
            for r in rows
            if r["question_type"] == group
            and f"turn_recall@{BUDGETS[0]}tok" in r
            and not (r["system"] == "memsys" and r["data_source"] == "episode" and r["retrieval_mode"] != "rrf")
        }
        if series:
            panels[f"LongMemEval turn-level evidence recall, {group}"] = series
    return panel_plot(
        out_dir / "turn_recall_by_type.png",
        panels,
        xlabel="budget of retrieved text (tokens, 4 chars each)",
        ylabel="evidence recall",
        log2_x=True,
        columns=3,
    )


def run(args: argparse.Namespace) -> dict:
    run_started = time.perf_counter()
    questions = load(args.data, args.questions, args.after, args.types)
    llm = {"base_url": args.llm, "model": args.llm_model} if args.llm else None
    started = time.perf_counter()
    ranked = ask_baselines(questions) if not args.no_baselines else {}
    baseline_s = time.perf_counter() - started
    print(f"anchors answered in {baseline_s:.1f} s", file=sys.stderr)
    with memsys_server(args.base_url, data_dir=args.data_dir) as base_url:
        ingestion = {} if args.skip_ingest else asyncio.run(ingest(base_url, questions, args.concurrency))
        if ingestion:
            print(f"ingest: {ingestion}", file=sys.stderr)
        started = time.perf_counter()
        memsys_ranked, latencies = asyncio.run(ask_memsys(base_url, questions, llm, args.concurrency))
        question_s = time.perf_counter() - started
    ranked.update(memsys_ranked)
    scored = per_question(questions, ranked)
    rows = score(scored)
    print_results(rows)
    config = {
        "data": str(args.data),
        "questions": len(questions),
        "scored_questions": sum(q.scored for q in questions),
        "turns": sum(len(q.turns) for q in questions),
        "top_k_asked": TOP_K_ASKED,
        "budget_rule": "whole items in rank order; the first that does not fit ends the fill; 4 chars = 1 token",
        "base_url": args.base_url or "own memsys serve on a fresh embedded database, defaults",
        "concurrency": args.concurrency,
        "llm": llm,
    }
    timing = {
        "ingestion": ingestion,
        "questions_s": round(question_s, 1),
        "retrieve_lightweight_ms": percentiles(latencies),
        "baselines_s": round(baseline_s, 1),
        "total_s": round(time.perf_counter() - run_started, 1),
    }
    out_dir = Path(args.out)
    extra = {"benchmark": "longmemeval", "timing": timing, "per_question": scored}
    path = save("results", config, rows, out_dir, extra=extra)
    figure = plot(rows, out_dir)
    print(f"\n{json.dumps(timing)}\nwrote {path} and {figure.name}")
    return {"path": path, "rows": rows, "timing": timing}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LongMemEval_S in the dev split's format")
    parser.add_argument("--questions", type=int, help="N questions spread over the types (default: all)")
    parser.add_argument("--types", nargs="+", help="only questions of these types (e.g. knowledge-update)")
    parser.add_argument("--after", type=int, help="less the questions of a --questions AFTER run (the next ones)")
    parser.add_argument("--combine", type=Path, nargs="+", help="only score the union of these runs' results.json")
    parser.add_argument("--base-url", help="a running memsys; default: start one on a fresh embedded database")
    parser.add_argument("--data-dir", type=Path, help="the database directory of the memsys it starts (kept)")
    parser.add_argument("--skip-ingest", action="store_true", help="ask only (the data is already in)")
    parser.add_argument("--no-baselines", action="store_true", help="memsys only")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--concurrency", type=int, default=4, help="histories memorized / requests in flight")
    parser.add_argument("--llm", metavar="BASE_URL", help="also ask retrieve_agentic with this OpenAI-compatible LLM")
    parser.add_argument("--llm-model", default="local")
    return parser.parse_args(argv)


def combine(args: argparse.Namespace) -> Path:
    """One results.json (and plot) over the questions of several runs, from their saved per-question figures."""
    runs = [json.loads(path.read_text()) for path in args.combine]
    scored = [q for run_ in runs for q in run_["per_question"]]
    rows = score(scored)
    print_results(rows)
    config = {
        "combined": [str(p) for p in args.combine],
        "scored_questions": len(scored),
        "runs": [run_["config"] for run_ in runs],
    }
    extra = {"benchmark": "longmemeval", "timing": [run_["timing"] for run_ in runs], "per_question": scored}
    path = save("results", config, rows, Path(args.out), extra=extra)
    plot(rows, Path(args.out))
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    arguments = parse_args()
    combine(arguments) if arguments.combine else run(arguments)
