"""memsys driven by a real local LLM: SmolLM2-135M-Instruct under llama.cpp's OpenAI-compatible server.

    python benchmarks/local_llm.py [--conversation 0] [--limit-messages N] [--questions 100]

Opt-in: not run in CI and by no test (the first run compiles llama.cpp, about 9 minutes on 2 cores). On one
LoCoMo conversation it measures:

1. formation with the LLM (boundary judge and extraction by the model) against the offline path: evidence
   recall of ``rrf`` over event logs and episodes, seconds per message, MemCells that fell back to offline
   extraction, stalls (a formation backlog that stops moving);
2. agentic retrieval (``retrieve_agentic``) with the same model: its evidence recall, and how often it fell back;
3. QA: the model answers each question from memsys's 2048-token context (``rrf`` over event logs of the
   LLM-formed database) and from raw-turn RRF's, then judges each answer against the gold one (CORRECT/WRONG;
   the prompts are ``benchmarks/prompts/local_llm_*.txt``). Token F1 against the gold answer is reported too,
   and, as a control of the judge, its verdict on the gold answer itself and on another question's answer.

The model runs under llama.cpp's server from ``benchmarks/llama_runtime.py`` (its venv is built on first use,
then reused). memsys runs from a snapshot of the code (``--code``: the work tree, or a git ref) on fresh
embedded databases, one per formation path. Everything stays on 127.0.0.1. Heavy steps never overlap: the
model is idle while the offline path forms, and memsys is stopped while the model answers and judges.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import httpx

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``app`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import RESULTS_DIR, ROOT, memsys_server, percentiles, post_json, print_table, save
from benchmarks.evidence_recall import Retrieved, within_budget
from benchmarks.llama_runtime import (
    DEFAULT_CACHE,
    LLAMA_PACKAGE,
    MODEL,
    MODEL_ALIAS,
    chat,
    ensure_runtime,
    llama_server,
    max_tokens_cap,
    wait_idle,
)
from benchmarks.locomo import (
    CATEGORIES,
    Conversation,
    Question,
    Variant,
    ask_baselines,
    ask_memsys,
    ingest,
    load_conversations,
    question_body,
    score,
)

DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo-dev.json"
DEFAULT_OUT = RESULTS_DIR / "local_llm"
PROMPTS = Path(__file__).resolve().parent / "prompts"
ANSWER_PROMPT = PROMPTS / "local_llm_answer.txt"
JUDGE_PROMPT = PROMPTS / "local_llm_judge.txt"
ANSWER_MAX_TOKENS = 32
JUDGE_MAX_TOKENS = 4
BUDGETS_SHOWN = (512, 2048)
SHORT = {"all": "all", "1": "multi-hop", "2": "temporal", "3": "open-dom", "4": "single-hop"}


# --- the code memsys runs from, and its database --------------------------------------------------------


@contextmanager
def code_snapshot(code: str) -> Iterator[Path]:
    """A copy of memsys's code for the servers of this run: the work tree as it is now (``worktree``), or a
    git ref; someone editing the tree meanwhile changes nothing of the run."""
    if code == "worktree":
        from benchmarks.ingest import snapshot

        with snapshot() as path:
            yield path
        return
    with tempfile.TemporaryDirectory(prefix="memsys-local-llm-code-") as tmp:
        archive = subprocess.run(["git", "archive", code], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def describe_code(code: str) -> str:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD" if code == "worktree" else code],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"work tree at {head} (with uncommitted changes)" if code == "worktree" else f"{code} = {head}"


FORMATION_SQL = {
    "memcells": "SELECT extraction_mode, boundary_reason, count(*), sum(cardinality(message_ids)) FROM memcells "
    "GROUP BY 1, 2 ORDER BY 1, 2",
    "memories": "SELECT memory_type, count(*) FROM memories GROUP BY 1 ORDER BY 1",
    "fallback_memcells": "SELECT count(DISTINCT memcell_id) FROM memories WHERE metadata ? 'llm_fallback'",
    "messages": "SELECT status, count(*), max(extract_attempts) FROM messages GROUP BY 1",
    "jobs": "SELECT status, count(*) FROM procrastinate_jobs GROUP BY 1 ORDER BY 1",
}


def formation_stats(db) -> dict:
    """What the formation left in the database: MemCells by extraction mode and boundary reason, memories by
    type, MemCells formed offline after failed LLM extractions, messages, the queue's jobs."""
    rows = {name: db.conn.execute(sql).fetchall() for name, sql in FORMATION_SQL.items()}
    memcells = [
        {"extraction_mode": m, "boundary_reason": r, "memcells": n, "messages": k} for m, r, n, k in rows["memcells"]
    ]
    by_mode = Counter()
    for cell in memcells:
        by_mode[cell["extraction_mode"]] += cell["memcells"]
    return {
        "memcells": memcells,
        "memcells_by_extraction_mode": dict(by_mode),
        "memcells_fallen_back_to_offline": rows["fallback_memcells"][0][0],
        "memories_by_type": {t: n for t, n in rows["memories"]},
        "messages_by_status": {s: {"count": n, "max_extract_attempts": a} for s, n, a in rows["messages"]},
        "jobs_by_status": {s: n for s, n in rows["jobs"]},
    }


def llm_metrics(base_url: str) -> dict:
    """memsys's own LLM series (/metrics): calls by outcome with their seconds, errors by kind."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    out: dict = {"calls": {}, "seconds": {}, "errors": {}}
    for name, labels, value in re.findall(r"^(memsys_llm_\w+)\{([^}]*)\} (\S+)$", text, re.MULTILINE):
        label = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if name == "memsys_llm_call_duration_seconds_count":
            out["calls"][label["outcome"]] = int(float(value))
        elif name == "memsys_llm_call_duration_seconds_sum":
            out["seconds"][label["outcome"]] = round(float(value), 1)
        elif name == "memsys_llm_errors_total":
            out["errors"][label["kind"]] = int(float(value))
    return out


def metrics_delta(after: dict, before: dict) -> dict:
    return {
        key: {k: round(v - before[key].get(k, 0), 1) for k, v in after[key].items() if v != before[key].get(k, 0)}
        for key in after
    }


# --- formation: ingest, then wait for the backlog to drain, watching for stalls ------------------------


def form(base_url: str, db, conversation: Conversation, *, stall_s: float, timeout_s: float) -> dict:
    """Memorize the conversation (locomo.ingest: every turn, then flush) and wait until no message is pending
    and no job waits or runs. A stall is a stretch of ``stall_s`` in which nothing moved (no message formed,
    no MemCell written, no LLM call finished) while work was pending; waiting ends after ``timeout_s``."""
    started = time.perf_counter()
    memorize_s = asyncio.run(ingest(base_url, [conversation], concurrency=1))
    stalls: list[dict] = []
    timeline: list[dict] = []
    last_state, last_move, last_sample, stalled = None, time.perf_counter(), 0.0, False
    drained = False
    while True:
        now = time.perf_counter()
        health = httpx.get(f"{base_url}/health", timeout=10).json()["result"]["formation"]
        pending = db.pending()
        memcells = db.conn.execute("SELECT count(*) FROM memcells").fetchone()[0]
        calls = sum(llm_metrics(base_url)["calls"].values())
        state = (pending, memcells, calls)
        if state != last_state:
            if stalled:
                stalls[-1]["lasted_s"] = round(now - last_move, 1)
            last_state, last_move, stalled = state, now, False
        elif not stalled and now - last_move >= stall_s:
            stalled = True
            stalls.append(
                {"from_s": round(last_move - started, 1), "pending_messages": pending, "jobs": health, "lasted_s": None}
            )
            print(f"  STALL: nothing moved for {stall_s:.0f} s ({pending} messages pending, {health})", file=sys.stderr)
        if now - last_sample >= 30:
            last_sample = now
            timeline.append(
                {
                    "t_s": round(now - started, 1),
                    "pending_messages": pending,
                    "memcells": memcells,
                    "llm_calls": calls,
                    "load_avg_1m": round(os.getloadavg()[0], 2),
                    **{f"jobs_{k}": v for k, v in health.items()},
                }
            )
            print(
                f"  {now - started:7.0f} s: {pending} messages pending, {memcells} MemCells, {calls} LLM calls",
                file=sys.stderr,
            )
        if pending == 0 and health["pending"] == 0 and health["running"] == 0:
            drained = True
            break
        if now - started > timeout_s:
            break
        time.sleep(2)
    formation_s = time.perf_counter() - started
    return {
        "drained": drained,
        "memorize_and_flush_s": round(memorize_s, 1),
        "formation_s": round(formation_s, 1),
        "seconds_per_message": round(formation_s / len(conversation.turns), 3),
        "stalls": stalls,
        "timeline": timeline,
    }


def memsys_contexts(base_url: str, conversation: Conversation, questions: list[Question]) -> list[list[Retrieved]]:
    """For each question, ``rrf`` over event logs as a reader gets it: each memory one line, its day first."""

    async def run() -> list[list[Retrieved]]:
        async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
            out = []
            for question in questions:
                body = {**question_body(conversation, question), "retrieval_mode": "rrf", "data_source": "event_log"}
                memories = (await post_json(client, "/api/v3/agentic/retrieve_lightweight", body))["result"]["memories"]
                out.append(
                    [
                        Retrieved(
                            f"[{str(m['timestamp'])[:10]}] {m['content']}", frozenset(m.get("source_message_ids") or [])
                        )
                        for m in memories
                    ]
                )
            return out

    return asyncio.run(run())


def run_path(
    path: str,
    code: Path,
    conversation: Conversation,
    args: argparse.Namespace,
    out_dir: Path,
    llm_url: str | None,
    qa_questions: list[Question],
) -> dict:
    """One formation path on a fresh memsys: form, count, ask; with the LLM also agentic and the QA contexts."""
    from benchmarks.ingest import Database

    env = {"MEMSYS_LOG_LEVEL": "INFO", "MEMSYS_LLM_API_KEY": "", "OPENAI_API_KEY": "", "OPENROUTER_API_KEY": ""}
    if llm_url:
        env |= {"MEMSYS_LLM_API_KEY": "local", "MEMSYS_LLM_BASE_URL": llm_url, "MEMSYS_LLM_MODEL": MODEL_ALIAS}
    log = out_dir / f"memsys-{path}.log"
    log.unlink(missing_ok=True)
    result: dict = {"log": log.name}
    with tempfile.TemporaryDirectory(prefix=f"memsys-local-llm-{path}-") as data:
        with memsys_server(env=env, root=code, data_dir=Path(data), log=log) as base_url:
            db = Database(Path(data), code)
            try:
                print(f"[{path}] forming {len(conversation.turns)} messages", file=sys.stderr)
                before = llm_metrics(base_url)
                result["formation"] = form(
                    base_url, db, conversation, stall_s=args.stall_seconds, timeout_s=args.formation_timeout
                )
                result["formation"]["llm"] = metrics_delta(llm_metrics(base_url), before)
                result["formation"]["database"] = formation_stats(db)
                started = time.perf_counter()
                ranked, _ = asyncio.run(ask_memsys(base_url, [conversation], None, 3))
                result["ranked"] = {replace(v, system=f"memsys-{path}"): r for v, r in ranked.items()}
                result["questions_s"] = round(time.perf_counter() - started, 1)
                if llm_url and args.agentic_questions:
                    result["agentic_waited_for_model_s"] = round(wait_idle(llm_url), 1)
                    result["agentic"] = agentic(base_url, llm_url, conversation, args.agentic_questions)
                if qa_questions:
                    result["qa_contexts"] = memsys_contexts(base_url, conversation, qa_questions)
            finally:
                db.conn.close()
    return result


def agentic(base_url: str, llm_url: str, conversation: Conversation, limit: int) -> dict:
    """retrieve_agentic (over episodes, as locomo.py asks it) with the local model, one question at a time
    (the model serves one request at a time: concurrent ones would queue inside memsys's LLM timeout)."""
    print(f"[llm] agentic retrieval on {min(limit, len(conversation.questions))} questions", file=sys.stderr)
    subset = replace(conversation, questions=conversation.questions[:limit])
    llm = {"base_url": llm_url, "model": MODEL_ALIAS, "api_key": "local"}
    metadata: dict = {}
    before = llm_metrics(base_url)
    started = time.perf_counter()
    ranked, _ = asyncio.run(ask_memsys(base_url, [subset], llm, 1, metadata))
    seconds = time.perf_counter() - started
    variant = Variant("memsys", "agentic", "episode")
    answers = [metadata[variant][i] for i in range(len(subset.questions))]
    return {
        "questions": len(subset.questions),
        "ranked": {replace(variant, system="memsys-llm"): ranked[variant]},
        "seconds": round(seconds, 1),
        "latency_ms": percentiles([a.get("total_latency_ms", 0) for a in answers]),
        "retrieval_modes": dict(Counter(a.get("retrieval_mode") for a in answers)),
        "fallback_reasons": dict(Counter(a.get("fallback_reason") for a in answers if a.get("fallback_reason"))),
        "multi_round": sum(1 for a in answers if a.get("is_multi_round")),
        "refined_queries_examples": [a.get("refined_queries") for a in answers if a.get("refined_queries")][:5],
        "llm": metrics_delta(llm_metrics(base_url), before),
    }


# --- QA: the model answers from a context, then judges its answer ---------------------------------------


def token_f1(prediction: str, gold: str) -> float:
    """LoCoMo's answer F1: token overlap after lower-casing and dropping punctuation and articles."""

    def tokens(text: str) -> list[str]:
        text = re.sub(r"[^\w\s]", " ", text.lower())
        return [t for t in text.split() if t not in {"a", "an", "the", "and"}]

    p, g = tokens(prediction), tokens(gold)
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or not common:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def verdict(reply: str) -> str | None:
    """CORRECT / WRONG from the judge's reply (INCORRECT is WRONG); None when it says neither."""
    match = re.search(r"\b(INCORRECT|CORRECT|WRONG)\b", reply.upper())
    if not match:
        return None
    return "CORRECT" if match.group(1) == "CORRECT" else "WRONG"


def qa(
    llm_url: str,
    conversation: Conversation,
    questions: list[Question],
    contexts: dict[str, list[list[Retrieved]]],
    budget: int,
    controls: bool,
) -> dict:
    """Each system's context within ``budget`` tokens → the model's answer → the model's verdict."""
    answer_template, judge_template = ANSWER_PROMPT.read_text(), JUDGE_PROMPT.read_text()
    speakers = " and ".join(conversation.speakers)
    details: dict[str, list[dict]] = {name: [] for name in contexts}
    control_rows: list[dict] = []
    with httpx.Client(timeout=600) as client:
        for position, question in enumerate(questions):
            for name, per_question in contexts.items():
                chosen = within_budget(per_question[position], budget)
                context = "\n".join(item.content for item in chosen)
                prompt = answer_template.format(speakers=speakers, context=context, question=question.question)
                answer, answer_s = chat(client, llm_url, prompt, ANSWER_MAX_TOKENS)
                judged, judge_s = chat(
                    client,
                    llm_url,
                    judge_template.format(question=question.question, gold=question.answer, answer=answer),
                    JUDGE_MAX_TOKENS,
                )
                found = set().union(*(item.source_ids for item in chosen)) if chosen else set()
                details[name].append(
                    {
                        "question": question.question,
                        "category": question.category,
                        "gold": question.answer,
                        "answer": answer,
                        "judge": judged,
                        "verdict": verdict(judged),
                        "f1": round(token_f1(answer, question.answer), 3),
                        "context_chars": len(context),
                        "context_items": len(chosen),
                        "evidence_in_context": round(
                            sum(e in found for e in question.evidence) / len(question.evidence), 3
                        ),
                        "answer_s": round(answer_s, 2),
                        "judge_s": round(judge_s, 2),
                    }
                )
            if controls:
                other = questions[(position + 1) % len(questions)].answer
                row = {"question": question.question, "gold": question.answer, "other": other}
                for kind, candidate in (("gold_as_answer", question.answer), ("other_answer", other)):
                    reply, _ = chat(
                        client,
                        llm_url,
                        judge_template.format(question=question.question, gold=question.answer, answer=candidate),
                        JUDGE_MAX_TOKENS,
                    )
                    row[kind] = {"judge": reply, "verdict": verdict(reply)}
                control_rows.append(row)
            if (position + 1) % 10 == 0:
                print(f"  QA {position + 1}/{len(questions)}", file=sys.stderr)
    return {"details": details, "controls": control_rows}


def qa_summary(result: dict) -> dict:
    out: dict = {}
    for name, rows in result["details"].items():
        groups = [("all", rows)] + [(str(c), [r for r in rows if r["category"] == c]) for c in CATEGORIES]
        out[name] = {
            category: {
                "questions": len(members),
                "judged_correct": round(sum(r["verdict"] == "CORRECT" for r in members) / len(members), 3),
                "f1": round(statistics.fmean(r["f1"] for r in members), 3),
                "evidence_in_context": round(statistics.fmean(r["evidence_in_context"] for r in members), 3),
            }
            for category, members in groups
            if members
        }
        out[name]["all"] |= {
            "judge_unparsed": sum(r["verdict"] is None for r in rows),
            "answered_unknown": sum("unknown" in r["answer"].lower() for r in rows),
            "answer_s": percentiles([r["answer_s"] for r in rows]),
            "judge_s": percentiles([r["judge_s"] for r in rows]),
            "context_chars": percentiles([r["context_chars"] for r in rows]),
        }
    controls = result["controls"]
    if controls:
        out["judge_controls"] = {
            kind: {
                "said_correct": round(sum(r[kind]["verdict"] == "CORRECT" for r in controls) / len(controls), 3),
                "unparsed": sum(r[kind]["verdict"] is None for r in controls),
                "n": len(controls),
            }
            for kind in ("gold_as_answer", "other_answer")
        }
    return out


# --- the run --------------------------------------------------------------------------------------------


@contextmanager
def capped(llm_url: str, cap: int) -> Iterator[tuple[str, dict | None]]:
    """The URL memsys is given: the model's own (``cap`` 0), or the max_tokens proxy's in front of it."""
    if not cap:
        yield llm_url, None
        return
    with max_tokens_cap(llm_url, cap) as (url, counts):
        yield url, counts


def select(conversations: list[Conversation], index: int, limit_messages: int | None) -> Conversation:
    """The conversation to run on; with ``limit_messages`` its first turns, and only the questions whose
    evidence lies wholly in them."""
    conversation = conversations[index]
    if limit_messages is None:
        return conversation
    turns = conversation.turns[:limit_messages]
    known = {turn.dia_id for turn in turns}
    questions = [q for q in conversation.questions if all(e in known for e in q.evidence)]
    return replace(conversation, turns=turns, questions=questions)


def main(args: argparse.Namespace) -> dict:
    run_started = time.perf_counter()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    conversation = select(load_conversations(args.data), args.conversation, args.limit_messages)
    questions = conversation.questions
    qa_questions = questions[: args.questions]
    if not questions:
        raise SystemExit("no scored question has its evidence in the messages ingested: raise --limit-messages")
    started = time.perf_counter()
    runtime = ensure_runtime(args.cache)
    wall = {"runtime_s": round(time.perf_counter() - started, 1)}
    llama_log = out_dir / "llama-server.log"
    llama_log.unlink(missing_ok=True)
    memsys_code = describe_code(args.code)  # as the snapshot is taken: HEAD may move during the run
    with (
        code_snapshot(args.code) as code,
        llama_server(runtime, threads=args.threads, n_ctx=args.n_ctx, log=llama_log) as llm_url,
        capped(llm_url, args.max_tokens_cap) as (memsys_llm_url, proxied),
    ):
        started = time.perf_counter()
        offline = run_path("offline", code, conversation, args, out_dir, None, [])
        wall["offline_path_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        with_llm = run_path("llm", code, conversation, args, out_dir, memsys_llm_url, qa_questions)
        wall["llm_path_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        baselines = ask_baselines([conversation])
        wall["baselines_s"] = round(time.perf_counter() - started, 1)
        qa_result = None
        if qa_questions:
            print(f"[qa] {len(qa_questions)} questions × 2 contexts, answered and judged by the model", file=sys.stderr)
            wall["qa_waited_for_model_s"] = round(wait_idle(llm_url), 1)
            started = time.perf_counter()
            raw = baselines[Variant("raw-rrf", "rrf", "raw_turns")][: len(qa_questions)]
            contexts = {"memsys-llm rrf event_log": with_llm["qa_contexts"], "raw-turn rrf": raw}
            qa_result = qa(llm_url, conversation, qa_questions, contexts, args.qa_budget, args.judge_controls)
            wall["qa_s"] = round(time.perf_counter() - started, 1)
    ranked = {**offline["ranked"], **with_llm["ranked"], **baselines}
    recall = score(questions, ranked)
    agentic_result = with_llm.get("agentic")
    if agentic_result:
        recall += [
            {**row, "questions_asked": agentic_result["questions"]}
            for row in score(questions[: agentic_result["questions"]], agentic_result.pop("ranked"))
        ]
        # the same first questions through rrf over episodes, to compare agentic with like for like
        same = Variant("memsys-llm", "rrf", "episode")
        recall += [
            {**row, "system": "memsys-llm (agentic's questions)", "questions_asked": agentic_result["questions"]}
            for row in score(
                questions[: agentic_result["questions"]], {same: ranked[same][: agentic_result["questions"]]}
            )
        ]
    wall["total_s"] = round(time.perf_counter() - run_started, 1)
    wall["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results = {
        "evidence_recall": recall,
        "formation": {"offline": offline["formation"], "llm": with_llm["formation"]},
        "agentic": agentic_result,
        "qa": qa_summary(qa_result) if qa_result else None,
        "qa_details": qa_result,
        "wall_s": wall,
    }
    config = {
        "data": str(args.data),
        "conversation": {
            "index": args.conversation,
            "sample_id": conversation.sample_id,
            "messages": len(conversation.turns),
            "limit_messages": args.limit_messages,
            "scored_questions": len(questions),
        },
        "qa_questions": len(qa_questions),
        "qa_budget_tokens": args.qa_budget,
        "qa_context_memsys": "rrf over event_log of the LLM-formed database, top 100, each memory "
        "'[YYYY-MM-DD] content', whole memories in rank order while they fit (4 chars = 1 token)",
        "qa_context_raw": "raw-turn RRF (BM25 + dense MiniLM) of benchmarks/locomo.py, same budget rule",
        "answer_prompt": ANSWER_PROMPT.read_text(),
        "judge_prompt": JUDGE_PROMPT.read_text(),
        "answer_max_tokens": ANSWER_MAX_TOKENS,
        "judge_max_tokens": JUDGE_MAX_TOKENS,
        "model": MODEL,
        "llm_server": f"llama_cpp.server ({LLAMA_PACKAGE}), n_ctx {args.n_ctx}, n_threads {args.threads}",
        "runtime": runtime.build,
        "memsys_code": memsys_code,
        "memsys_llm_settings": "MEMSYS_LLM_BASE_URL = the local server, every other LLM setting at its default",
        "max_tokens_cap": args.max_tokens_cap or None,
        "memsys_llm_requests": proxied,
        "agentic_questions": args.agentic_questions,
        "stall_seconds": args.stall_seconds,
        "formation_timeout_s": args.formation_timeout,
    }
    path = save("results", config, results, out_dir, extra={"benchmark": "local_llm"})
    print_report(results, config)
    print(f"\nwrote {path}")
    return results


def print_report(results: dict, config: dict) -> None:
    print(
        f"\n== evidence recall on {config['conversation']['sample_id']} "
        f"({config['conversation']['messages']} messages, {config['conversation']['scored_questions']} questions) =="
    )
    wanted = [
        ("memsys-offline", "rrf", "event_log"),
        ("memsys-llm", "rrf", "event_log"),
        ("memsys-offline", "rrf", "episode"),
        ("memsys-llm", "rrf", "episode"),
        ("memsys-llm (agentic's questions)", "rrf", "episode"),
        ("memsys-llm", "agentic", "episode"),
        ("raw-rrf", "rrf", "raw_turns"),
    ]
    rows = []
    for system, mode, source in wanted:
        mine = [
            r
            for r in results["evidence_recall"]
            if (r["system"], r["retrieval_mode"], r["data_source"]) == (system, mode, source)
        ]
        if not mine:
            continue
        row = {
            "system": system,
            "mode": mode,
            "source": source,
            "n": next(r["questions"] for r in mine if r["category"] == "all"),
        }
        for r in mine:
            for budget in BUDGETS_SHOWN:
                row[f"{SHORT[r['category']]}@{budget}"] = r["recall_at_tokens"][str(budget)]
        rows.append(row)
    columns = [f"{SHORT[c]}@{b}" for c in SHORT for b in BUDGETS_SHOWN]
    print_table(rows, ["system", "mode", "source", "n", *columns])

    print("\n== formation ==")
    rows = []
    for path, f in results["formation"].items():
        database = f["database"]
        rows.append(
            {
                "path": path,
                "drained": f["drained"],
                "formation_s": f["formation_s"],
                "s/msg": f["seconds_per_message"],
                "memcells": sum(database["memcells_by_extraction_mode"].values()),
                "llm": database["memcells_by_extraction_mode"].get("llm", 0),
                "offline": database["memcells_by_extraction_mode"].get("offline", 0),
                "fell_back": database["memcells_fallen_back_to_offline"],
                "event_logs": database["memories_by_type"].get("event_log", 0),
                "semantic": database["memories_by_type"].get("semantic_memory", 0),
                "llm_calls": json.dumps(f["llm"]["calls"]),
                "llm_errors": json.dumps(f["llm"]["errors"]),
                "stalls": len(f["stalls"]),
            }
        )
    print_table(rows, list(rows[0]))
    if results["agentic"]:
        a = results["agentic"]
        print(
            f"\nagentic: {a['questions']} questions in {a['seconds']} s (p50 {a['latency_ms']['p50']} ms), "
            f"modes {a['retrieval_modes']}, multi-round {a['multi_round']}, fallbacks {a['fallback_reasons']}"
        )
    if results["qa"]:
        print(f"\n== QA with {config['qa_budget_tokens']}-token contexts, answered and judged by {MODEL_ALIAS} ==")
        rows = []
        for name, per in results["qa"].items():
            if name == "judge_controls":
                continue
            row = {
                "context": name,
                "n": per["all"]["questions"],
                "judged_correct": per["all"]["judged_correct"],
                "f1": per["all"]["f1"],
                "evidence_in_ctx": per["all"]["evidence_in_context"],
            }
            for c in CATEGORIES:
                if str(c) in per:
                    row[f"{SHORT[str(c)]} judged"] = per[str(c)]["judged_correct"]
            row |= {
                "unknown": per["all"]["answered_unknown"],
                "unparsed": per["all"]["judge_unparsed"],
                "answer_s_p50": per["all"]["answer_s"]["p50"],
            }
            rows.append(row)
        print_table(rows, list(rows[0]))
        if "judge_controls" in results["qa"]:
            c = results["qa"]["judge_controls"]
            print(
                f"judge control: gold answer judged CORRECT {c['gold_as_answer']['said_correct']}, "
                f"another question's answer judged CORRECT {c['other_answer']['said_correct']} "
                f"(n {c['gold_as_answer']['n']})"
            )
    print(f"\nwall times (s): {json.dumps(results['wall_s'])}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a file in the LoCoMo format")
    parser.add_argument("--conversation", type=int, default=0, help="index of the conversation in --data")
    parser.add_argument("--limit-messages", type=int, help="only its first N turns (and the questions they answer)")
    parser.add_argument("--questions", type=int, default=100, help="QA questions (first N scored ones); 0: no QA")
    parser.add_argument("--agentic-questions", type=int, default=50, help="questions asked agentically; 0: none")
    parser.add_argument("--qa-budget", type=int, default=2048, help="tokens of context the model answers from")
    parser.add_argument(
        "--judge-controls",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also let the model judge the gold answer and another question's answer",
    )
    parser.add_argument(
        "--max-tokens-cap",
        type=int,
        default=512,
        help="give memsys's LLM requests sent without max_tokens this limit, through a loopback proxy "
        "(memsys sends none, and llama.cpp then generates until its context is full); 0: memsys untouched",
    )
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    parser.add_argument("--n-ctx", type=int, default=4096, help="the model's context window")
    parser.add_argument("--stall-seconds", type=float, default=300, help="nothing moving this long is a stall")
    parser.add_argument("--formation-timeout", type=float, default=3600, help="give up waiting for a path's formation")
    parser.add_argument("--code", default="worktree", help="memsys code to run: worktree, or a git ref (e.g. HEAD)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the llama venv lives")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where results.json and the logs go")
    return parser.parse_args(argv)


if __name__ == "__main__":
    if shutil.which("git") is None:
        raise SystemExit("git is needed to snapshot memsys's code")
    main(parse_args())
