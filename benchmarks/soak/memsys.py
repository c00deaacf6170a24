"""The memsys the soak benchmark drives, and the test servers beside it.

``memsys serve`` (``MEMSYS_WORKERS=0``) and ``memsys worker`` run as processes of their own on the embedded
PostgreSQL in a data directory of the run; two OpenAI-compatible test servers (benchmarks/fake_llm.py) on 127.0.0.1
stand in for the LLM and the embedder, so that each can fail alone. ``answer`` gives the LLM's replies:
boundary judgements, extractions that keep every message's words (so that a tenant's marker reaches its
memories), profiles, and the judgements of agentic retrieval.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks.common import ROOT
from benchmarks.fake_llm import Reply

MEMSYS = [sys.executable, "-m", "app.cli"]
CALLER_ONLY = ("OPENAI_API_KEY", "OPENROUTER_API_KEY")
"""Read by memsys as its LLM key: the caller's must not reach the processes under test."""


class Memsys:
    """serve and worker processes on one data directory; every command logs to ``<run_dir>/<name>.log``."""

    def __init__(self, run_dir: Path, env: dict[str, str], port: int, worker_concurrency: int) -> None:
        self.run_dir = run_dir
        self.data_dir = run_dir / "data"
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.worker_concurrency = worker_concurrency
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("MEMSYS_") and k not in CALLER_ONLY}
        self.env = {**inherited, "MEMSYS_DATA_DIR": str(self.data_dir), "MEMSYS_DATABASE_URL": "", **env}
        self.processes: dict[str, subprocess.Popen] = {}
        self.starts: Counter[str] = Counter()
        self.clock = time.monotonic
        """What ``exits`` times are measured with (the load's clock, once it runs)."""
        self.exits: list[dict] = []
        """serve or worker processes that ended by themselves (not killed or stopped by the harness)."""
        self.stopped: dict[str, dict] = {}
        """How each process ended at the end of the run (SIGTERM): exit code, seconds."""
        self._ours: set[int] = set()

    # --- commands ---------------------------------------------------------------------------------
    def cli(self, *args: str, timeout_s: float = 120) -> str:
        """A ``memsys`` command run to completion (in a session of its own: a Ctrl-C of ours is not its)."""
        done = subprocess.run(
            [*MEMSYS, *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            start_new_session=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"memsys {' '.join(args)} exited with {done.returncode}:\n{done.stderr[-2000:]}")
        return done.stdout

    def owner_url(self) -> str:
        """The owner's URL of the embedded server (``memsys db-url`` starts it and leaves it running)."""
        return self.cli("db-url").strip().splitlines()[-1]

    def create_key(self, tenant: str) -> str:
        """A key for ``tenant``: the last word of ``memsys keys create``'s last line."""
        return self.cli("keys", "create", "--tenant", tenant, "--name", "soak").strip().splitlines()[-1].split()[-1]

    # --- long-running processes -------------------------------------------------------------------
    def start(self, name: str) -> None:
        """Start ``serve`` or ``worker`` (again, after a kill: the same port for serve)."""
        self.notice_exits()
        arguments = ["serve", "--port", str(self.port)] if name == "serve" else ["worker"]
        if name == "worker":
            arguments += ["--concurrency", str(self.worker_concurrency)]
        with open(self.run_dir / f"{name}.log", "ab") as log:
            log.write(f"\n=== soak: starting memsys {name} at {time.strftime('%H:%M:%S')}\n".encode())
            log.flush()
            self.processes[name] = subprocess.Popen(
                [*MEMSYS, *arguments],
                env=self.env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts[name] += 1

    def wait_serving(self, timeout_s: float = 90) -> None:
        """Until serve answers its liveness probe."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            process = self.processes["serve"]
            if process.poll() is not None:
                raise RuntimeError(f"memsys serve exited with {process.returncode}; see {self.run_dir / 'serve.log'}")
            try:
                if httpx.get(self.base_url + "/health/live", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"memsys serve did not answer within {timeout_s:.0f} s")

    def kill(self, name: str) -> dict:
        """``kill -9`` (of a process still running)."""
        self.notice_exits()
        process = self.processes[name]
        if process.poll() is not None:
            return {"pid": process.pid, "already_exited": process.returncode}
        self._ours.add(process.pid)
        process.kill()
        process.wait()
        return {"pid": process.pid}

    def notice_exits(self) -> list[dict]:
        """Record serve or worker processes that have ended by themselves since the last look; those."""
        noticed = []
        for name, process in self.processes.items():
            if process.poll() is not None and process.pid not in self._ours:
                self._ours.add(process.pid)
                at = round(self.clock(), 1)
                noticed.append({"process": name, "pid": process.pid, "returncode": process.returncode, "at_s": at})
        self.exits += noticed
        return noticed

    def pid(self, name: str) -> int | None:
        process = self.processes.get(name)
        return process.pid if process is not None and process.poll() is None else None

    def rss_kib(self, name: str) -> int | None:
        """VmRSS of a running process, in KiB."""
        pid = self.pid(name)
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except (OSError, ValueError, TypeError):
            return None
        return None

    # --- the embedded PostgreSQL ------------------------------------------------------------------
    def postmaster_pid(self) -> int | None:
        try:
            pid = int((self.data_dir / "pg" / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid

    def signal_postgres(self, sig: signal.Signals) -> int:
        pid = self.postmaster_pid()
        if pid is None:
            raise RuntimeError("the embedded PostgreSQL is not running")
        os.kill(pid, sig)
        return pid

    # --- the end ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERM to serve and worker (SIGKILL after 30 s), then the embedded PostgreSQL: nothing outlives the run."""
        self.notice_exits()
        began = time.monotonic()
        for process in self.processes.values():
            self._ours.add(process.pid)
            if process.poll() is None:
                process.terminate()
        for name, process in self.processes.items():
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            self.stopped[name] = {"returncode": process.returncode, "seconds": round(time.monotonic() - began, 1)}
        from app.db.embedded import stop_embedded

        if not stop_embedded(self.data_dir):
            pid = self.postmaster_pid()
            if pid is not None:  # not stopped by a fast shutdown within 20 s
                os.kill(pid, signal.SIGKILL)

    def log_errors(self, limit: int = 12) -> dict[str, dict]:
        """Per process log: how many ERROR/CRITICAL lines and tracebacks, and the most frequent messages."""
        summary = {}
        for path in sorted(self.run_dir.glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()
            # "2026-… 12:00:00,123 ERROR app.x: …" (memsys worker) or "ERROR - 2026-… - app.x - …" (uvicorn)
            errors = [line for line in lines if re.search(r"(^| )(ERROR|CRITICAL) ", line)]
            kinds = Counter(_TIMESTAMP.sub("", line)[:160] for line in errors)
            summary[path.stem] = {
                "errors": len(errors),
                "tracebacks": sum(1 for line in lines if line.startswith("Traceback")),
                "top": [{"count": n, "line": text} for text, n in kinds.most_common(limit)],
            }
        return summary


_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ?")


def process_env(llm_url: str, embedder_url: str, *, llm_timeout_s: float, quick: bool) -> dict[str, str]:
    """memsys's settings for the run: the test servers as LLM and embedder, formation in a worker process.
    ``quick`` shortens the retry and stall times so that every fault fits in a two-minute run."""
    env = {
        "MEMSYS_WORKERS": "0",
        "MEMSYS_LOG_LEVEL": "WARNING",
        "MEMSYS_LLM_API_KEY": "soak",
        "MEMSYS_LLM_BASE_URL": llm_url,
        "MEMSYS_LLM_MODEL": "soak-llm",
        "MEMSYS_LLM_TIMEOUT_SECONDS": str(llm_timeout_s),
        "MEMSYS_LLM_MAX_RETRIES": "1",
        "MEMSYS_EMBEDDING_PROVIDER": "openai",
        "MEMSYS_EMBEDDING_BASE_URL": embedder_url,
        "MEMSYS_EMBEDDING_API_KEY": "soak",
        "MEMSYS_EMBEDDING_MODEL": "soak-embedder",
        "MEMSYS_EMBEDDING_DIMENSIONS": "384",
        "MEMSYS_EMBEDDING_TIMEOUT_S": str(llm_timeout_s),
    }
    if quick:
        env |= {
            "MEMSYS_LLM_RETRY_BACKOFF_S": "0.2",
            "MEMSYS_FORMATION_RETRY_SECONDS": "3",
            "MEMSYS_WORKER_HEARTBEAT_SECONDS": "2",
            "MEMSYS_WORKER_STALLED_SECONDS": "8",
        }
    return env


# --- the LLM's answers ----------------------------------------------------------------------------
_MESSAGE = re.compile(r"^\[(?P<id>[^\]]+)\] \d{4}-\d\d-\d\d \d\d:\d\d (?P<name>[^:]+): (?P<text>.*)$", re.MULTILINE)
_PARTICIPANT = re.compile(r"^- (?P<user>[^:\s]+): (?P<name>[^(\n]+?)(?: \(.*\))?$", re.MULTILINE)


def answer(body: dict) -> Reply:
    """The test LLM's reply to any prompt memsys sends (formation and agentic retrieval), in its JSON."""
    messages = body.get("messages") or [{}]
    system = str(messages[0].get("content", ""))
    user = str(messages[-1].get("content", ""))
    digest = int(hashlib.sha256(user.encode()).hexdigest()[:8], 16)
    if '"should_end"' in system:
        # Now and then the judge cuts an episode, so that MemCells also close on the LLM's word.
        return Reply(content={"should_end": digest % 25 == 0, "reasoning": "topic", "topic_summary": "a chat"})
    said = [m.groupdict() for m in _MESSAGE.finditer(user)]
    people = {m["user"]: m["name"].strip() for m in _PARTICIPANT.finditer(user)}
    if '"profiles"' in system:
        profiles = [{"user_id": u, "profile": {"name": n, "summary": f"{n} chats here"}} for u, n in people.items()]
        return Reply(content={"profiles": profiles})
    if "personal_episodes" in system:
        episodes = [_personal(user_id, name, said) for user_id, name in people.items()]
        if '"event_log"' not in system:  # the second ask, for the personal episodes left out
            return Reply(content={"personal_episodes": episodes})
        transcript = " ".join(f"{m['name']}: {m['text']}" for m in said)
        return Reply(
            content={
                "title": "A chat",
                "summary": transcript[:200],
                "content": transcript,
                "personal_episodes": episodes,
                "event_log": [{"fact": f"{m['name']} said {m['text']}", "source_message_ids": [m["id"]]} for m in said],
                "semantic_memories": [],
            }
        )
    if "is_sufficient" in system:
        if digest % 2:
            return Reply(content={"is_sufficient": True, "reasoning": "enough", "refined_queries": []})
        refined = ["release schedule moved", "trip booked for autumn"]
        return Reply(content={"is_sufficient": False, "reasoning": "need more", "refined_queries": refined})
    if "Rate how relevant" in system:
        indexes = re.findall(r"^\[(\d+)\] ", user, flags=re.MULTILINE)
        return Reply(content={"scores": [{"index": int(n), "score": round(1 / int(n), 3)} for n in indexes]})
    if '"has_time"' in system:
        return Reply(content={"has_time": False})
    return Reply(status=500, json_body={"error": {"message": "the soak LLM has no answer for this prompt"}})


def _personal(user_id: str, name: str, said: list[dict]) -> dict:
    own = " ".join(m["text"] for m in said if m["name"].strip() == name) or "listened"
    return {"user_id": user_id, "title": f"{name} in the chat", "summary": own[:120], "content": f"{name}: {own}"}


def garbage(body: dict) -> Reply:
    """What the LLM answers when it answers garbage: prose instead of JSON, or a body that is not JSON at all."""
    if int(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:2], 16) % 2:
        return Reply(content="I am sorry, as a language model I cannot help with that }{")
    return Reply(raw_body="<html>502 bad gateway</html>")
