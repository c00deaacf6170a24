"""Agent cases and skills (app/formation/agent_memory.py) on a set of agent trajectories, through EverOS's v2 API:
which trajectories become cases, which tool sequences become skills, whether quality orders failures below
successes, and whether a case is found again by its task.

The trajectories are built here, by hand, from templates (no public set of agent trajectories ships with memsys):
five agents, 24 sessions — three agents each repeating one tool sequence over several tasks (a skill expected),
one agent whose every session uses other tools (no skill), failing runs (a tool answers with an error), and
sessions with no tool call (no case)::

    python -m benchmarks.agent_memory

Each expectation is fixed by construction, so every figure is a judged precision or recall over all 24 sessions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks.common import memsys_server, print_table, save

START_MS = 1_735_689_600_000


@dataclass
class Session:
    agent: str
    task: str
    tools: list[str]
    answer: str | None
    fails: bool = False
    expect_case: bool = True
    id: str = field(default="")


def sessions() -> list[Session]:
    made = []
    for task, answer in [
        ("Count the late invoices in the billing database", "There are 42 late invoices."),
        ("How many customers signed up last week", "118 customers signed up last week."),
        ("Find the total refunds issued in March", "Refunds in March came to 3,410 euros."),
        ("List the five largest unpaid orders", "The five largest unpaid orders are listed above."),
        ("Which region had the most support tickets", "Europe had the most tickets, 1,204."),
    ]:
        made.append(Session("analyst_bot", task, ["search_schema", "run_sql"], answer))
    for task, answer in [
        ("Summarise the article about battery recycling", "The article says recycling recovers 95% of lithium."),
        ("Give me the key points of the new EU AI act page", "It sets risk tiers and transparency duties."),
        ("What does the blog post on Rust async say", "It explains executors and pinning."),
        ("Summarise the release notes of PostgreSQL 18", "PostgreSQL 18 adds asynchronous I/O."),
    ]:
        made.append(Session("reader_bot", task, ["fetch_url", "summarise"], answer))
    for task, answer in [
        ("Book a table for two on Friday at 8pm", "Booked: Friday 20:00, two people."),
        ("Move my dentist appointment to next Tuesday", "Your appointment is now Tuesday at 10:00."),
        ("Cancel the hotel reservation in Lyon", "The Lyon reservation is cancelled."),
    ]:
        made.append(Session("concierge_bot", task, ["check_calendar", "book_slot", "send_confirmation"], answer))
    for task, tools, answer in [
        ("Translate the onboarding guide into German", ["translate"], "The German guide is ready."),
        ("Resize the product photos to 800 pixels", ["resize_images"], "All 40 photos are resized."),
        ("Check the weather in Oslo tomorrow", ["weather"], "Oslo: 3 degrees and snow."),
        ("Find a train from Paris to Geneva", ["train_search"], "The 9:14 TGV arrives at 12:20."),
    ]:
        made.append(Session("odd_jobs_bot", task, tools, answer))
    for task in ["Count the overdue invoices for ACME", "How many refunds failed yesterday"]:
        made.append(Session("analyst_bot", task, ["search_schema", "run_sql"], None, fails=True))
    for task in ["Summarise the page at a broken link", "Read the paywalled interview"]:
        made.append(Session("reader_bot", task, ["fetch_url"], None, fails=True))
    for task, answer in [
        ("Say hello to the new team members", "Hello everyone, welcome aboard!"),
        ("What is two plus two", "Four."),
        ("Thank the customer for the feedback", "Thank you for your feedback!"),
        ("Tell me a short joke", "Why did the database break up? Too many relations."),
    ]:
        made.append(Session("chat_bot", task, [], answer, expect_case=False))
    for number, session in enumerate(made):
        session.id = f"trajectory_{number:02d}"
    return made


EXPECTED_SKILLS = {
    ("analyst_bot", "search_schema > run_sql"),
    ("reader_bot", "fetch_url > summarise"),
    ("concierge_bot", "check_calendar > book_slot > send_confirmation"),
}
"""Tool sequences an agent repeated over two or more of its successful sessions; ``reader_bot``'s two failing runs
call only ``fetch_url``: a sequence seen twice that must make no skill."""


def messages(session: Session, start_ms: int) -> list[dict]:
    out = [{"sender_id": "user_1", "role": "user", "content": session.task, "timestamp": start_ms}]
    for step, tool in enumerate(session.tools):
        call = {"id": f"call_{step}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
        result = "error: upstream failed with 503" if session.fails else f"{tool} result {step}"
        out.append({"sender_id": session.agent, "role": "assistant", "content": "", "tool_calls": [call],
                    "timestamp": start_ms + 2 * step + 1})  # fmt: skip
        out.append({"sender_id": session.agent, "role": "tool", "tool_call_id": call["id"], "content": result,
                    "timestamp": start_ms + 2 * step + 2})  # fmt: skip
    if session.answer:
        out.append({"sender_id": session.agent, "role": "assistant", "content": session.answer,
                    "timestamp": start_ms + 2 * len(session.tools) + 1})  # fmt: skip
    return out


def run(base_url: str) -> dict:
    v2 = httpx.Client(base_url=base_url + "/api/v2/memory", timeout=120)
    made = sessions()
    for number, session in enumerate(made):
        start = START_MS + number * 3_600_000
        v2.post("/add", json={"session_id": session.id, "messages": messages(session, start), "async_mode": False})
        v2.post("/flush", json={"session_id": session.id}).raise_for_status()
    cases, skills = [], []
    for agent in sorted({s.agent for s in made}):
        for kind, into in (("agent_case", cases), ("agent_skill", skills)):
            page = v2.post("/get", json={"memory_type": kind, "agent_id": agent, "page_size": 100}).json()["data"]
            into.extend(page["agent_cases" if kind == "agent_case" else "agent_skills"])
    by_session = {case["session_id"]: case for case in cases}
    expected_cases = {s.id for s in made if s.expect_case}
    made_cases = set(by_session)
    right_fields = [
        by_session[s.id]["task_intent"] == s.task
        and by_session[s.id]["key_insight"] == s.answer
        and all(tool in by_session[s.id]["approach"] for tool in s.tools)
        for s in made
        if s.id in by_session
    ]
    quality = {s.id: by_session[s.id]["quality_score"] for s in made if s.id in by_session}
    failed = [quality[s.id] for s in made if s.fails and s.id in quality]
    succeeded = [quality[s.id] for s in made if not s.fails and s.id in quality]
    ordered = [f < g for f in failed for g in succeeded]
    made_skills = {
        (skill["agent_id"], " > ".join(skill["name"].removeprefix("Use ").split(" then "))) for skill in skills
    }
    found_again = []
    for session in made:
        if session.id not in by_session:
            continue
        answer = v2.post("/search", json={"query": session.task, "agent_id": session.agent, "top_k": 3}).json()["data"]
        top = answer["agent_cases"][:1]
        found_again.append(bool(top) and top[0]["session_id"] == session.id)
    return {
        "sessions": len(made),
        "cases_made": len(made_cases),
        "case_precision": round(len(made_cases & expected_cases) / max(len(made_cases), 1), 3),
        "case_recall": round(len(made_cases & expected_cases) / len(expected_cases), 3),
        "case_fields_right": round(statistics.mean(right_fields), 3),
        "failed_below_succeeded": round(statistics.mean(ordered), 3),
        "skills_made": sorted(" / ".join(skill) for skill in made_skills),
        "skill_precision": round(len(made_skills & EXPECTED_SKILLS) / max(len(made_skills), 1), 3),
        "skill_recall": round(len(made_skills & EXPECTED_SKILLS) / len(EXPECTED_SKILLS), 3),
        "case_found_by_its_task_at_1": round(statistics.mean(found_again), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", default=None, help="a running memsys (default: one of our own, offline)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with memsys_server(args.base_url) as url:
        figures = run(url)
    print_table([{"figure": key, "value": value} for key, value in figures.items()], ["figure", "value"])
    config = {"seconds": round(time.perf_counter() - started)}
    print(f"wrote {save('agent_memory', config, figures, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
