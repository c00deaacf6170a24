"""The README's "Five minutes with memsys", run as written against real servers: its blocks are read from the
README (``<!-- walkthrough: … -->`` before each), so the README cannot drift from the code.

Only the ports change (1995 and the local LLM's 8080 may be taken here): the servers start with
MEMSYS_PORT, and client commands get the test's ports. The local LLM is the scripted OpenAI-compatible server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import httpx

from benchmarks.fake_llm import FakeLLM, tool_calls
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"<!-- walkthrough: (serve|serve-llm|client) -->\n```bash\n(.*?)```", re.S)


def walkthrough() -> list[tuple[str, str]]:
    return BLOCK.findall((ROOT / "README.md").read_text())


class Serve:
    """A README serve command in the background, run by bash from the repository's root."""

    def __init__(self, command: str, env: dict[str, str], port: int, log: Path) -> None:
        self.port, self.log = port, log
        self.process = subprocess.Popen(
            ["bash", "-c", command], cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("memsys serve did not become healthy:\n" + log.read_text())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def test_the_readme_walkthrough_runs_as_written(tmp_path):
    blocks = walkthrough()
    assert [kind for kind, _ in blocks] == [
        "serve",
        "client",
        "client",
        "client",
        "client",
        "client",
        "serve-llm",
        "client",
    ]
    port = free_port()
    env = {
        **os.environ,
        "MEMSYS_DATA_DIR": str(tmp_path / "data"),
        "MEMSYS_PORT": str(port),
        "MEMSYS_LLM_API_KEY": "",
        "MEMSYS_LOG_LEVEL": "WARNING",
    }
    for name in ("MEMSYS_DATABASE_URL", "MEMSYS_SERVICE_DATABASE_URL", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        env.pop(name, None)
    outputs: list[dict] = []

    # The client blocks run as in one terminal: each after the first block's definitions (M, say).
    definitions = blocks[1][1].split("say m1")[0]

    def client(script: str) -> None:
        run = subprocess.run(
            ["bash", "-ec", (definitions + script).replace("127.0.0.1:1995", f"127.0.0.1:{port}")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        outputs.extend(json.loads(line) for line in run.stdout.splitlines() if line.strip())

    server = Serve(blocks[0][1], env, port, tmp_path / "serve.log")
    try:
        for _, text in blocks[1:6]:
            client(text)
    finally:
        server.stop()

    stored, found, flushed, formed, context = outputs[:3], outputs[3], outputs[4], outputs[5], outputs[6]
    assert [answer["result"]["status_info"] for answer in stored] == ["accumulated"] * 3
    messages = found["result"]["memories"]
    assert messages[0]["memory_type"] == "message" and messages[0]["formed"] is False
    assert messages[0]["content"] == "alice: I am vegetarian, and allergic to peanuts."
    assert flushed["result"]["status_info"] == "extracted" and flushed["result"]["count"] > 0
    facts = formed["result"]["memories"]
    assert facts and {m["memory_type"] for m in facts} == {"event_log"}
    assert "peanuts" in facts[0]["content"]
    knowledge = context["result"]["messages"][1]["content"]
    assert knowledge.startswith("[Retrieved Knowledge]") and "peanuts" in knowledge

    # A fact that changes: the newer value first, the older one superseded by it; a correction in the history.
    changed, diet, edited, history = outputs[7]["result"], outputs[8]["result"]["memories"], outputs[9], outputs[10]
    assert changed["status_info"] == "accumulated"
    assert diet[0]["content"] == "alice is vegan." and diet[0]["status"] == "current"
    older = next(m for m in diet if m["content"] == "alice is vegetarian.")
    assert older["status"] == "superseded" and older["superseded_by"] == diet[0]["id"]
    assert {m["content"]: m["status"] for m in diet}["alice is allergic to peanuts."] == "current"
    assert edited["result"]["memory"]["content"] == "alice is vegan, but eats honey."
    assert [event["event"] for event in history["result"]["events"]][:2] == ["formed", "edited"]

    with FakeLLM() as llm:
        llm.queue(
            tool_calls(("search_memories", {"query": "Alice allergies food she cannot eat"})),
            "Alice is vegetarian and allergic to peanuts: no meat, no peanuts.",
        )
        serve_llm = blocks[6][1].replace("127.0.0.1:8080", llm.base_url.removeprefix("http://").removesuffix("/v1"))
        server = Serve(serve_llm, env, port, tmp_path / "serve-llm.log")
        try:
            client(blocks[7][1])
        finally:
            server.stop()
        assert outputs[11]["status"] == "ok", outputs[11]
        agent = outputs[11]["result"]
        assert agent["success"] and agent["answer"].startswith("Alice is vegetarian")
        tool_reply = [m for m in agent["messages"] if m["role"] == "tool"][0]["content"]
        assert "peanuts" in tool_reply
        assert llm.chat_requests[0].body["model"] == "local"
