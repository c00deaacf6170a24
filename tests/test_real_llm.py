"""memsys's LLM paths driven by a real local model (``pytest -m llm``): Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)
under llama-cpp-python's OpenAI-compatible server, on 127.0.0.1, as an operator would run it.

Skipped, with the reason, when the model file or the server's runtime is not on the machine: the model comes
from ``memsys local-model`` (``MEMSYS_TEST_LLM_MODEL``, default its ~/.cache/memsys/models file) and the server
from a Python with ``llama-cpp-python[server]`` (``MEMSYS_TEST_LLAMA_PYTHON``, default the benchmarks' venv,
~/.cache/memsys-bench/llama-venv, which ``python -m benchmarks.real_llm`` builds). The model is small and weak:
these tests check what memsys guarantees whatever it answers (no stall, no empty memory, each message formed
once, a real judgement, a real tool call before an answer), not that its memories are good.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from litestar.testing import TestClient

from app.formation import agent_memory, reconciliation
from app.formation.memcell import Draft, MemCell
from app.http.app import create_app
from app.providers import local_model
from app.providers.llm import LLMClient
from app.settings import Settings
from tests.conftest import free_port, process_env
from tests.formation_helpers import FLUSH, MEMORIZE, assert_each_message_in_one_memcell, message, rows
from tests.retrieval_support import memory, write

pytestmark = pytest.mark.llm

MODEL_FILE = Path(
    os.environ.get("MEMSYS_TEST_LLM_MODEL", f"~/.cache/memsys/models/{local_model.FILE_NAME}")
).expanduser()
LLAMA_PYTHON = Path(
    os.environ.get("MEMSYS_TEST_LLAMA_PYTHON", "~/.cache/memsys-bench/llama-venv/bin/python")
).expanduser()
TURNS = [
    ("caroline", "Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
    ("melanie", "Melanie", "That's great, Caroline! I'm running a charity race for mental health on June 14th."),
    ("caroline", "Caroline", "Good luck with the race! I'm thinking of going back to school to study counseling."),
    ("melanie", "Melanie", "You'd be a great counselor. I painted a sunrise over the lake last week."),
    ("caroline", "Caroline", "I'd love to see it. My family is adopting a dog from the shelter next month."),
    ("melanie", "Melanie", "A dog! My kids would be so jealous. We're camping at the beach this weekend."),
]
FACTS = [
    "Melanie: I'm running a charity race for mental health on June 14th.",
    "Caroline: I'm thinking of going back to school to study counseling.",
    "Melanie: I painted a sunrise over the lake last week.",
    "Caroline: My family is adopting a dog from the shelter next month.",
]


def _missing() -> str | None:
    if not MODEL_FILE.is_file():
        return f"no model at {MODEL_FILE}: run `memsys local-model` (or set MEMSYS_TEST_LLM_MODEL)"
    if not LLAMA_PYTHON.is_file():
        return f"no llama-cpp-python server at {LLAMA_PYTHON} (set MEMSYS_TEST_LLAMA_PYTHON)"
    check = subprocess.run([str(LLAMA_PYTHON), "-c", "import llama_cpp.server"], capture_output=True)
    if check.returncode != 0:
        return f"{LLAMA_PYTHON} cannot import llama_cpp.server"
    return None


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The model under llama-cpp-python's server on a free loopback port, as ``memsys local-model`` says to run it."""
    if reason := _missing():
        pytest.skip(reason)
    port = free_port()
    command = [str(LLAMA_PYTHON), *local_model.serve_arguments(MODEL_FILE, port=port)]
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, log.read_text()[-2000:]
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "llama.cpp's server did not start in 120 s"
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def operator_env(llama_url: str) -> dict[str, str]:
    """The operator's settings for a local model: its loopback URL and name, no key at all."""
    return {
        "MEMSYS_LLM_BASE_URL": llama_url,
        "MEMSYS_LLM_MODEL": local_model.MODEL_ALIAS,
        "MEMSYS_LLM_API_KEY": "",
        "MEMSYS_LLM_TIMEOUT_SECONDS": "300",
        "MEMSYS_LLM_MAX_TOKENS": "1024",
    }


def test_a_short_conversation_forms_with_the_real_model_without_stall_or_empty_memories(
    llama_url, server_process_factory, database_url
):
    """memsys serve with the local model as its LLM (no key: a loopback URL needs none) forms six turns: the
    judge and extraction are the model's; whatever it answers, every message lands in exactly one MemCell,
    no memory is empty, and a MemCell the model formed thinly keeps the offline path's memories instead."""
    server = server_process_factory({**process_env(database_url), **operator_env(llama_url)})
    server.start()
    sent = [
        message(i + 1, text, sender=sender, sender_name=name, group_id="friends")
        for i, (sender, name, text) in enumerate(TURNS)
    ]
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        for body in sent:
            assert client.post(MEMORIZE, json=body).status_code == 200
        assert client.post(FLUSH, json={"group_id": "friends"}).status_code == 200
        deadline = time.monotonic() + 900
        while rows(database_url, "SELECT count(*) AS n FROM messages WHERE status = 'pending'")[0]["n"]:
            assert time.monotonic() < deadline, "formation with the real model did not finish in 15 minutes"
            time.sleep(2)
    assert_each_message_in_one_memcell(database_url, {b["message_id"] for b in sent})
    memories = rows(
        database_url,
        "SELECT m.memory_type, m.content, m.metadata, m.source_message_ids, c.extraction_mode "
        "FROM memories m JOIN memcells c ON c.id = m.memcell_id",
    )
    assert memories and all(m["content"].strip() for m in memories)
    assert {"episode", "event_log"} <= {m["memory_type"] for m in memories}
    cells = rows(database_url, "SELECT boundary_reason, extraction_mode FROM memcells")
    assert len(cells) < len(TURNS), "not one MemCell per message: a judge ending every turn is distrusted"
    for m in memories:
        if m["extraction_mode"] == "offline":  # the guard formed it: every memory says why
            assert m["metadata"]["extraction"] == "offline" and m["metadata"]["llm_fallback"], m
        elif m["metadata"]["extraction"] == "offline":  # the model formed it: a message's own entry beside its facts
            assert m["memory_type"] == "event_log" and len(m["source_message_ids"]) == 1, m
    for cell in rows(database_url, "SELECT id, message_ids FROM memcells WHERE extraction_mode = 'llm'"):
        kept = rows(
            database_url,
            "SELECT source_message_ids FROM memories WHERE memcell_id = %s AND metadata ->> 'extraction' = 'offline'",
            cell["id"],
        )
        assert sorted(k["source_message_ids"][0] for k in kept) == sorted(cell["message_ids"])
    assert "memsys_llm_answers_total" in httpx.get(server.base_url + "/metrics").text


@pytest.fixture
def llm_api(settings: Settings, llama_url: str, database_url: str) -> Iterator[TestClient]:
    update = {
        "llm_base_url": llama_url,
        "llm_model": local_model.MODEL_ALIAS,
        "llm_api_key": None,
        "llm_timeout_s": 300.0,
        "llm_max_tokens": 512,
        "llm_max_retries": 0,
    }
    with TestClient(create_app(settings.model_copy(update=update)), raise_server_exceptions=False) as client:
        embedder = client.app.state.runtime.embedder
        write(
            database_url,
            [memory(t, embedder.embed_sync([t])[0], memory_type="event_log", group_id="friends") for t in FACTS],
        )
        yield client


def test_agentic_retrieval_gets_a_real_judgement(llm_api: TestClient):
    response = llm_api.post(
        "/api/v3/agentic/retrieve_agentic",
        json={"query": "When is Melanie's charity race?", "group_id": "friends", "data_source": "event_log"},
    )
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    metadata = result["metadata"]
    assert metadata["fallback_reason"] is None, metadata
    assert isinstance(metadata["is_sufficient"], bool) and metadata["reasoning"]
    assert "charity race" in result["memories"][0]["content"]


def test_the_agent_answers_after_a_real_tool_call(llm_api: TestClient):
    """llama.cpp honours the forced first call (tool_choice): the model itself calls search_memories through
    the function-calling API, and answers from what it found."""
    response = llm_api.post(
        "/api/v3/agentic/agent",
        json={
            "messages": [{"role": "user", "content": "When is Melanie's charity race?"}],
            "context_manage_mode": "auto",
            "group_id": "friends",
            "max_steps": 4,
        },
    )
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["success"] is True, result["metadata"]
    first = result["metadata"]["tool_calls"][0]
    assert (first["name"], first["made_by"], first["ok"]) == ("search_memories", "model", True)
    assert result["messages"][1]["tool_calls"][0]["function"]["name"] == "search_memories"
    assert result["messages"][2]["content"].startswith("1. [event_log") and result["answer"].strip()
    # What the model then writes is its own (it said "June 14th" in every run here); not asserted, to keep CI honest
    # about what memsys guarantees.


def test_memsys_local_model_checks_the_file_it_assembled():
    """``memsys local-model`` on a directory holding the model keeps it when its sha256 is the known one, and
    says how to serve it (no download: the file is there)."""
    if not MODEL_FILE.is_file():
        pytest.skip(f"no model at {MODEL_FILE}: run `memsys local-model`")
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "local-model", "--dir", str(MODEL_FILE.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr
    assert f"{MODEL_FILE} (sha256 {local_model.SHA256}, checked)" in done.stdout
    assert "MEMSYS_LLM_BASE_URL=http://127.0.0.1:18080/v1" in done.stdout and "downloading" not in done.stderr


def test_compression_writes_a_real_summary(llm_api: TestClient):
    """compress: older messages over the budget become a state snapshot the model wrote, not a copy."""
    history = []
    for user, reply in (
        (
            "My sister Ana is visiting from Lisbon next week; she arrives on Thursday evening by train.",
            "How nice! Do you have plans for her visit, or should we look for some ideas together?",
        ),
        (
            "We will hike in the mountains on Saturday and cook bacalhau with her friends on Sunday.",
            "That sounds lovely: a long walk and a Portuguese dinner. Shall I find a trail for Saturday?",
        ),
        (
            "Yes please. Also remember she is allergic to peanuts, so no satay or peanut sauce this time.",
            "Noted: no peanuts while Ana is here. I will keep that in mind for every meal you plan.",
        ),
    ):
        history += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    history.append({"role": "user", "content": "What did I say Ana is allergic to?"})
    response = llm_api.post(
        "/api/v3/agentic/agent",
        json={
            "messages": history,
            "context_manage_mode": "compress",
            "max_total_tokens": 100,
            "keep_recent_count": 1,
            "group_id": "friends",
            "max_steps": 3,
        },
    )
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["metadata"]["compressed"] >= 4
    snapshot = next(m["content"] for m in result["messages"] if m["content"].startswith("[State snapshot"))
    summary = snapshot.split("\n", 1)[1]
    assert len(summary.split()) >= 5 and summary not in {m["content"] for m in history}
    assert any(word in summary.lower() for word in ("ana", "sister", "peanut", "lisbon")), summary


EARLIER = [  # Alice's current memories, nearest first, as formation's candidate read gives them
    "Alice lives in Paris.",
    "Alice has a cat called Felix.",
    "Alice works as a nurse at the city hospital.",
]


def _candidates() -> list[dict]:
    from uuid import uuid4

    january = datetime(2026, 1, 12, 9, tzinfo=UTC)
    return [
        {"id": uuid4(), "content": text, "timestamp": january, "cosine": 0.6 - n / 10} for n, text in enumerate(EARLIER)
    ]


def _real_llm(settings: Settings, llama_url: str) -> LLMClient:
    """The client formation's worker would have for the local model."""
    return LLMClient.from_settings(
        settings.model_copy(
            update={
                "llm_base_url": llama_url,
                "llm_model": local_model.MODEL_ALIAS,
                "llm_api_key": None,
                "llm_timeout_s": 300.0,
                "llm_max_tokens": 256,
                "llm_max_retries": 0,
            }
        )
    )


def _reconcile(settings: Settings, llama_url: str, fact: str) -> reconciliation.Verdict:
    """One reconciliation call to the real model, as formation's worker makes it."""
    llm = _real_llm(settings, llama_url)
    june = datetime(2026, 6, 15, 19, tzinfo=UTC)
    draft = Draft("semantic_memory", fact, june, ["m9"], user_id="alice", metadata={"extraction": "llm"})
    return asyncio.run(reconciliation.verdict(llm, draft, _candidates()))


def test_reconciliation_with_the_real_model_supersedes_a_move(settings: Settings, llama_url: str):
    """A move: the model's answer, schema-constrained, names the earlier residence (memory 1) as superseded."""
    found = _reconcile(settings, llama_url, "Alice moved to Berlin last month and lives there now.")
    assert found.error is None, found
    assert (found.decision, found.chosen["content"]) == ("supersede", "Alice lives in Paris."), found.answer


def test_reconciliation_with_the_real_model_keeps_someone_elses_change(settings: Settings, llama_url: str):
    """Somebody else's move supersedes nothing of Alice's (the model answered supersede here before its prompt had
    examples, and may still: formation's check of its answer then keeps it, recorded as rejected)."""
    found = _reconcile(settings, llama_url, "Alice's sister Clara moved to Berlin last month.")
    assert found.decision == "keep" and found.chosen is None, found.answer


def test_reconciliation_with_the_real_model_recognises_a_restatement(settings: Settings, llama_url: str):
    """The same fact said again is not a newer value: nothing is superseded (the model's keep or duplicate, or its
    supersede taken as a duplicate by formation's check)."""
    found = _reconcile(settings, llama_url, "Alice still lives in Paris.")
    assert found.error is None, found
    assert found.decision != "supersede", found.answer


def _agent_session(turns: list[tuple[str, str, str | None]]) -> MemCell:
    """An agent's session as formation reads it: (role, content, tool called) per message."""
    start = datetime(2026, 6, 15, 19, tzinfo=UTC)
    return MemCell(
        [
            {
                "id": n,
                "message_id": f"a{n}",
                "sender": "helper-bot" if role != "user" else "dana",
                "role": role,
                "content": content,
                "create_time": start,
                "agent_id": "helper-bot",
                "custom_metadata": {"tool_calls": [{"id": f"c{n}", "name": tool}]} if tool else {},
            }
            for n, (role, content, tool) in enumerate(turns)
        ],
        reason="flush",
    )


def test_an_agents_case_is_read_by_the_real_model(settings: Settings, llama_url: str):
    """A successful and a failed session, each read by the model into intent, approach and quality (schema-
    constrained): both are its answers, not the rules' fallback, each names its task, and the failed run scores
    below the successful one."""
    sessions = {
        "weather": _agent_session(
            [
                ("user", "What will the weather be in Lisbon tomorrow?", None),
                ("assistant", "Let me check the forecast.", "get_weather"),
                ("tool", "Lisbon, tomorrow: sunny, 24 degrees, light wind.", None),
                ("assistant", "Tomorrow in Lisbon it will be sunny and about 24 degrees.", None),
            ]
        ),
        "booking": _agent_session(
            [
                ("user", "Book a table for two at Casa Pasta tonight at 8pm.", None),
                ("assistant", "Booking it now.", "book_table"),
                ("tool", "Error: the booking service timed out.", None),
                ("assistant", "Trying again.", "book_table"),
                ("tool", "Error: the booking service timed out.", None),
                ("assistant", "Sorry, I could not book the table: the booking service is not answering.", None),
            ]
        ),
    }

    async def read_all() -> dict[str, dict]:
        llm = _real_llm(settings, llama_url)  # one client, one event loop
        cases = {}
        for name, cell in sessions.items():
            by_rules = agent_memory.case_of(cell, None)
            assert by_rules is not None
            cases[name] = (await agent_memory.with_llm(llm, by_rules, cell, "en")).metadata
        return cases

    cases = asyncio.run(read_all())
    assert all(case["extraction"] == "llm" for case in cases.values()), cases
    assert "weather" in cases["weather"]["task_intent"].lower(), cases["weather"]
    assert any(word in cases["booking"]["task_intent"].lower() for word in ("book", "table", "reserv")), cases
    assert cases["booking"]["quality_score"] < cases["weather"]["quality_score"], cases
