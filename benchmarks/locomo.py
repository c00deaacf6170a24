"""LoCoMo evidence recall: memsys driven through its public HTTP API, against raw-turn baselines.

    python -m benchmarks.locomo --data ../shared/datasets/locomo/locomo-dev.json [--base-url URL] [--out DIR]
        [--data-dir DIR [--skip-ingest]]

Without ``--base-url`` a memsys of our own is started on a fresh embedded database (kept in ``--data-dir``;
``--skip-ingest`` then asks again over what an earlier run memorized: a retrieval change measured in ~3 minutes).
Each conversation is registered (conversation-meta), its turns memorized in order and flushed; then every
question of categories 1-4 is asked through ``retrieve_lightweight`` for each retrieval mode and data source
(and through ``retrieve_agentic`` with ``--llm``). BM25, dense and RRF over the raw turns answer the same questions.
The figures are evidence recall in the top k and within a token budget (``benchmarks/evidence_recall.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
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
from benchmarks.evidence_recall import TOKEN_BUDGETS, TOP_K, Retrieved, clean_evidence, mean_scores, question_scores

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MODES = ("rrf", "embedding", "bm25")
SOURCES = ("episode", "event_log")
TURN_OFFSET = timedelta(seconds=30)  # between consecutive turns of a session
TOP_K_ASKED = 100  # deep enough for 2048 tokens of small memories
DEFAULT_OUT = RESULTS_DIR / "locomo"


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    session_time: datetime
    session_label: str
    create_time: datetime

    @property
    def content(self) -> str:
        """What memsys is sent: the text, and the image as its caption."""
        return self.text + (f" [image: {self.caption}]" if self.caption else "")

    @property
    def baseline_text(self) -> str:
        """A raw turn as the baselines index and return it: session date, speaker, text, image caption.
        This form reproduces the dataset's reference figures."""
        return f"[{self.session_label}] {self.speaker}: {self.content}"


@dataclass
class Question:
    question: str
    evidence: list[str]
    category: int
    answer: str = ""
    """The gold answer (for benchmarks that grade a reader's answer, e.g. ``benchmarks/local_llm.py``)."""


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)

    @property
    def asked_on(self) -> date:
        """The day after the last turn: when a client would ask about this conversation."""
        return (self.turns[-1].create_time + timedelta(days=1)).date()


def parse_session_time(label: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as a UTC datetime (the dataset has no time zone)."""
    return datetime.strptime(label.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load_conversations(path: Path, limit_conversations: int | None = None) -> list[Conversation]:
    """Conversations of a LoCoMo-format file, with their scored questions (categories 1-4 with evidence)."""
    conversations = []
    for sample in json.loads(Path(path).read_text())[:limit_conversations]:
        body = sample["conversation"]
        sessions = sorted(
            (int(key.split("_")[1]) for key in body if re.fullmatch(r"session_\d+", key) and body[key]),
        )
        turns: list[Turn] = []
        for number in sessions:
            label = body[f"session_{number}_date_time"]
            start = parse_session_time(label)
            for index, raw in enumerate(body[f"session_{number}"]):
                turns.append(
                    Turn(
                        dia_id=raw["dia_id"],
                        speaker=raw["speaker"],
                        text=raw["text"],
                        caption=raw.get("blip_caption"),
                        session_time=start,
                        session_label=label,
                        create_time=start + index * TURN_OFFSET,
                    )
                )
        known = {turn.dia_id for turn in turns}
        questions = []
        for qa in sample.get("qa", []):
            evidence = clean_evidence(qa.get("evidence", []), known)
            if qa.get("category") in CATEGORIES and evidence:
                questions.append(Question(qa["question"], evidence, qa["category"], str(qa.get("answer", ""))))
        conversations.append(
            Conversation(sample["sample_id"], (body["speaker_a"], body["speaker_b"]), turns, questions)
        )
    return conversations


def limit_questions(conversations: list[Conversation], limit: int | None) -> None:
    """Keep the first ``limit`` questions overall, in file order."""
    if limit is None:
        return
    for conversation in conversations:
        conversation.questions = conversation.questions[: max(0, limit)]
        limit -= len(conversation.questions)


# --- memsys, through the HTTP API ---------------------------------------------------------------------


async def ingest_conversation(client: httpx.AsyncClient, conversation: Conversation) -> None:
    """conversation-meta, every turn in order through memorize, then flush."""
    await post_json(
        client,
        "/api/v3/agentic/conversation-meta",
        {
            "version": "1.0",
            "scene": "group_chat",
            "scene_desc": "LoCoMo: a long-term conversation between two people over many sessions",
            "name": conversation.sample_id,
            "description": f"LoCoMo conversation {conversation.sample_id}",
            "group_id": conversation.sample_id,
            "created_at": conversation.turns[0].create_time.isoformat(),
            "default_timezone": "UTC",
            "user_details": {name: {"full_name": name, "role": "participant"} for name in conversation.speakers},
            "tags": ["locomo"],
        },
    )
    for turn in conversation.turns:
        await post_json(client, "/api/v3/agentic/memorize", memorize_body(conversation.sample_id, turn))
    await post_json(client, "/api/v3/agentic/flush", {"group_id": conversation.sample_id})


def memorize_body(group_id: str, turn: Turn) -> dict:
    """A turn as memorize takes it: its speaker as sender, its id as message_id, at its time."""
    return {
        "group_id": group_id,
        "message_id": turn.dia_id,
        "create_time": turn.create_time.isoformat(),
        "sender": turn.speaker,
        "sender_name": turn.speaker,
        "content": turn.content,
        "refer_list": [],
    }


async def ingest(base_url: str, conversations: list[Conversation], concurrency: int) -> float:
    """Memorize every conversation (``concurrency`` at a time, each in order) and wait until all is formed; the
    seconds it took."""
    started = time.perf_counter()
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:

        async def one(conversation: Conversation) -> None:
            async with gate:
                await ingest_conversation(client, conversation)

        await asyncio.gather(*(one(c) for c in conversations))
        await wait_until_formed(client)
    return time.perf_counter() - started


@dataclass(frozen=True)
class Variant:
    """One way of asking: a system, a retrieval mode and a data source."""

    system: str
    retrieval_mode: str
    data_source: str


def question_body(conversation: Conversation, question: Question) -> dict:
    """A retrieval request for a question: the conversation's group, asked when the conversation ended."""
    return {
        "query": question.question,
        "group_id": conversation.sample_id,
        "top_k": TOP_K_ASKED,
        "memory_scope": "group",
        "current_time": conversation.asked_on.isoformat(),
        "time_range_days": 36500,
    }


async def ask_memsys(
    base_url: str,
    conversations: list[Conversation],
    llm: dict | None,
    concurrency: int,
    metadata: dict[Variant, dict[int, dict]] | None = None,
) -> tuple[dict[Variant, list[list[Retrieved]]], list[float]]:
    """Every question through retrieve_lightweight (and retrieve_agentic with ``llm``): the ranked memories
    per variant in question order, and each request's latency in ms. ``metadata``, when given, receives each
    answer's ``metadata`` by variant and question position (e.g. whether agentic retrieval fell back)."""
    jobs: list[tuple[Variant, int, str, dict]] = []
    index = 0
    for conversation in conversations:
        for question in conversation.questions:
            base = question_body(conversation, question)
            for mode in MODES:
                for source in SOURCES:
                    body = {**base, "retrieval_mode": mode, "data_source": source}
                    jobs.append((Variant("memsys", mode, source), index, "retrieve_lightweight", body))
            if llm:
                body = {**base, "data_source": "episode", "top_k": 20, "llm_config": llm}
                jobs.append((Variant("memsys", "agentic", "episode"), index, "retrieve_agentic", body))
            index += 1
    ranked: dict[Variant, list[list[Retrieved]]] = defaultdict(lambda: [[] for _ in range(index)])
    latencies: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:

        async def one(variant: Variant, position: int, endpoint: str, body: dict) -> None:
            async with gate:
                started = time.perf_counter()
                payload = await post_json(client, f"/api/v3/agentic/{endpoint}", body)
                latencies.append((time.perf_counter() - started) * 1000)
            if metadata is not None:
                metadata.setdefault(variant, {})[position] = payload["result"].get("metadata") or {}
            ranked[variant][position] = [
                Retrieved(m["content"], frozenset(m.get("source_message_ids") or []))
                for m in payload["result"]["memories"]
            ]

        await asyncio.gather(*(one(*job) for job in jobs))
    return dict(ranked), latencies


# --- baselines ------------------------------------------------------------------------------------------


def ask_baselines(conversations: list[Conversation]) -> dict[Variant, list[list[Retrieved]]]:
    """BM25, dense and RRF over each conversation's raw turns, on the same questions."""
    from app.providers.embeddings import BUNDLED_MODEL, LocalEmbedder
    from benchmarks.raw_turn_baselines import BASELINES, RawTurnIndex

    embedder = LocalEmbedder(BUNDLED_MODEL, 384, 64)
    ranked: dict[Variant, list[list[Retrieved]]] = {Variant(f"raw-{b}", b, "raw_turns"): [] for b in BASELINES}
    for conversation in conversations:
        if not conversation.questions:
            continue
        items = [Retrieved(t.baseline_text, frozenset([t.dia_id])) for t in conversation.turns]
        index = RawTurnIndex([item.content for item in items], embedder)
        for rankings in index.rank_all([q.question for q in conversation.questions]):
            for name in BASELINES:
                ranked[Variant(f"raw-{name}", name, "raw_turns")].append([items[i] for i in rankings[name]])
    return ranked


# --- scoring and output ---------------------------------------------------------------------------------


def score(questions: list[Question], ranked: dict[Variant, list[list[Retrieved]]]) -> list[dict]:
    """One row per variant and category (and "all"), in the results.json shape."""
    rows = []
    for variant, per_question in ranked.items():
        scores = [question_scores(r, q.evidence) for r, q in zip(per_question, questions, strict=True)]
        groups = [("all", list(range(len(questions))))] + [
            (str(c), [i for i, q in enumerate(questions) if q.category == c]) for c in CATEGORIES
        ]
        for category, members in groups:
            if not members:
                continue
            means = mean_scores([scores[i] for i in members])
            rows.append(
                {
                    "system": variant.system,
                    "retrieval_mode": variant.retrieval_mode,
                    "data_source": variant.data_source,
                    "category": category,
                    "questions": len(members),
                    **means,
                }
            )
    return rows


def memory_sizes(ranked: dict[Variant, list[list[Retrieved]]]) -> dict[str, dict]:
    """Characters per retrieved memory, per variant: what decides how many fit in a budget."""
    return {
        f"{v.system}/{v.retrieval_mode}/{v.data_source}": percentiles([len(m.content) for r in per_q for m in r])
        for v, per_q in ranked.items()
    }


def print_results(rows: list[dict]) -> None:
    flat = []
    for row in rows:
        flat.append(
            {
                "system": row["system"],
                "mode": row["retrieval_mode"],
                "source": row["data_source"],
                "cat": row["category"],
                **{f"@{k}": row["recall_at_k"][str(k)] for k in TOP_K},
                **{f"{t}tok": row["recall_at_tokens"][str(t)] for t in TOKEN_BUDGETS},
            }
        )
    flat.sort(key=lambda r: (r["cat"] != "all", r["cat"], r["system"], r["mode"], r["source"]))
    print_table(
        flat, ["system", "mode", "source", "cat", *(f"@{k}" for k in TOP_K), *(f"{t}tok" for t in TOKEN_BUDGETS)]
    )


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """Recall against token budget, one line per system, mode and source: overall, and per category."""

    def series(category: str) -> dict:
        return {
            f"{r['system']} {r['retrieval_mode']} {r['data_source']}": (
                list(TOKEN_BUDGETS),
                [r["recall_at_tokens"][str(t)] for t in TOKEN_BUDGETS],
            )
            for r in rows
            if r["category"] == category
        }

    labels = {"all": "all categories", **{str(c): f"category {c}, {name}" for c, name in CATEGORIES.items()}}
    panels = {f"LoCoMo evidence recall, {labels[c]}": series(c) for c in labels if series(c)}
    options = {"xlabel": "budget of retrieved text (tokens, 4 chars each)", "ylabel": "evidence recall", "log2_x": True}
    first = next(iter(panels))
    paths = [panel_plot(out_dir / "recall_vs_budget.png", {first: panels.pop(first)}, **options)]
    if panels:
        paths.append(panel_plot(out_dir / "recall_vs_budget_by_category.png", panels, **options))
    return paths


BEFORE_AFTER = (("memsys", "rrf", "event_log"), ("raw-rrf", "rrf", "raw_turns"))
"""The rows a before/after figure draws: memsys's best mode and source, and the raw-turn baseline."""


def before_after_plot(rows: list[dict], before: Path, out_dir: Path) -> Path:
    """Recall against token budget per category: this run's ``BEFORE_AFTER`` rows, and memsys's row of an
    earlier run's results.json (``before``, dotted, labelled with that run's date)."""
    earlier = json.loads(before.read_text())
    when = earlier["machine"]["when"][:10]
    runs = [(rows, "now", BEFORE_AFTER), (earlier["results"], f"before, {when}", BEFORE_AFTER[:1])]
    labels = {"all": "all categories", **{str(c): f"category {c}, {name}" for c, name in CATEGORIES.items()}}
    drawn = {
        f"LoCoMo evidence recall, {title}": {
            f"{r['system']} {r['retrieval_mode']} {r['data_source']} ({label})": (
                list(TOKEN_BUDGETS),
                [r["recall_at_tokens"][str(t)] for t in TOKEN_BUDGETS],
            )
            for run_rows, label, wanted in runs
            for r in run_rows
            if r["category"] == category and (r["system"], r["retrieval_mode"], r["data_source"]) in wanted
        }
        for category, title in labels.items()
    }
    panels = {title: series for title, series in drawn.items() if series}  # categories the data has
    options = {"xlabel": "budget of retrieved text (tokens, 4 chars each)", "ylabel": "evidence recall", "log2_x": True}
    return panel_plot(out_dir / "recall_vs_budget_before_after.png", panels, **options)


def replot(args: argparse.Namespace) -> list[Path]:
    """The figures again from ``--out``'s results.json (and ``--before``), without running anything."""
    rows = json.loads((args.out / "results.json").read_text())["results"]
    plots = plot(rows, args.out)
    if args.before:
        plots.append(before_after_plot(rows, args.before, args.out))
    print(f"wrote {', '.join(str(p) for p in plots)}")
    return plots


def run(args: argparse.Namespace, env: dict[str, str] | None = None) -> dict:
    """The whole benchmark; ``env`` adds to the environment of the memsys it starts (e.g. another embedder)."""
    run_started = time.perf_counter()
    conversations = load_conversations(args.data, args.limit_conversations)
    limit_questions(conversations, args.limit_questions)
    questions = [q for c in conversations for q in c.questions]
    llm = None
    if args.llm:
        llm = {"base_url": args.llm, "model": args.llm_model, "api_key": args.llm_api_key}
    started = time.perf_counter()
    ranked = ask_baselines(conversations)
    baseline_s = time.perf_counter() - started
    with memsys_server(args.base_url, env=env, data_dir=args.data_dir) as base_url:
        ingest_s = 0.0 if args.skip_ingest else ingest_and_report(base_url, conversations, args.concurrency)
        started = time.perf_counter()
        memsys_ranked, latencies = asyncio.run(ask_memsys(base_url, conversations, llm, args.concurrency))
        question_s = time.perf_counter() - started
    ranked.update(memsys_ranked)
    rows = score(questions, ranked)
    print_results(rows)
    out_dir = Path(args.out)
    config = {
        "data": str(args.data),
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "top_k_asked": TOP_K_ASKED,
        "turn_offset_s": TURN_OFFSET.total_seconds(),
        "budget_rule": "whole memories in rank order; the first that does not fit ends the fill; 4 chars = 1 token",
        "base_url": args.base_url or "own memsys serve on a fresh embedded database",
        "concurrency": args.concurrency,
        "llm": {"base_url": args.llm, "model": args.llm_model} if args.llm else None,
    }
    timing = {
        "ingestion_s": round(ingest_s, 1),
        "memsys_questions_s": round(question_s, 1),
        "memsys_requests": len(latencies),
        "memsys_request_ms": percentiles(latencies),
        "baselines_s": round(baseline_s, 1),
        "total_s": round(time.perf_counter() - run_started, 1),
    }
    path = save(
        "results",
        config,
        rows,
        out_dir,
        extra={"benchmark": "locomo", "timing": timing, "memory_chars": memory_sizes(ranked)},
    )
    plots = plot(rows, out_dir)
    if args.before:
        plots.append(before_after_plot(rows, args.before, out_dir))
    if args.details:
        write_details(out_dir / "details.jsonl", conversations, ranked)
    print(
        f"\ningestion {timing['ingestion_s']} s, memsys questions {timing['memsys_questions_s']} s "
        f"({len(latencies)} requests, p50 {timing['memsys_request_ms']['p50']} ms), baselines {baseline_s:.1f} s"
    )
    print(f"wrote {path} and {', '.join(p.name for p in plots)}")
    return {"path": path, "rows": rows, "timing": timing}


def write_details(path: Path, conversations: list[Conversation], ranked: dict[Variant, list[list[Retrieved]]]) -> None:
    """One JSON line per question: its evidence and, per variant, each ranked memory's size and source turns."""
    asked = [(c.sample_id, q) for c in conversations for q in c.questions]
    with path.open("w") as out:
        for position, (sample_id, question) in enumerate(asked):
            line = {
                "sample_id": sample_id,
                "question": question.question,
                "category": question.category,
                "evidence": question.evidence,
                "ranked": {
                    f"{v.system}/{v.retrieval_mode}/{v.data_source}": [
                        [len(m.content), sorted(m.source_ids)] for m in per_question[position]
                    ]
                    for v, per_question in ranked.items()
                },
            }
            out.write(json.dumps(line) + "\n")


def ingest_and_report(base_url: str, conversations: list[Conversation], concurrency: int) -> float:
    seconds = asyncio.run(ingest(base_url, conversations, concurrency))
    turns = sum(len(c.turns) for c in conversations)
    print(f"memorized {turns} turns of {len(conversations)} conversations in {seconds:.1f} s", file=sys.stderr)
    return seconds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="a file in the LoCoMo format (required unless --replot)")
    parser.add_argument("--base-url", help="a running memsys; default: start one on a fresh embedded database")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where results.json and the plots go")
    parser.add_argument("--data-dir", type=Path, help="the database directory of the memsys it starts (kept)")
    parser.add_argument("--skip-ingest", action="store_true", help="ask only (the data is already in)")
    parser.add_argument("--limit-conversations", type=int, help="only the first N conversations")
    parser.add_argument("--limit-questions", type=int, help="only the first N scored questions overall")
    parser.add_argument("--concurrency", type=int, default=3, help="conversations memorized / requests in flight")
    parser.add_argument("--details", action="store_true", help="also write details.jsonl: every ranked list")
    parser.add_argument("--llm", metavar="BASE_URL", help="also ask retrieve_agentic with this OpenAI-compatible LLM")
    parser.add_argument("--llm-model", default=os.environ.get("MEMSYS_LLM_MODEL", "qwen/qwen3-235b-a22b-2507"))
    parser.add_argument("--llm-api-key", default=os.environ.get("MEMSYS_LLM_API_KEY"))
    parser.add_argument(
        "--before", type=Path, help="an earlier run's results.json: also plot recall_vs_budget_before_after.png"
    )
    parser.add_argument("--replot", action="store_true", help="only draw the figures again from --out's results.json")
    args = parser.parse_args(argv)
    if args.data is None and not args.replot:
        parser.error("--data is required (unless --replot)")
    return args


if __name__ == "__main__":
    arguments = parse_args()
    replot(arguments) if arguments.replot else run(arguments)
