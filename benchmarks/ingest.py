"""Memorize intake and background formation: accepted messages/s, memorize latency, formed messages/s.

Offline formation (no LLM key), local all-MiniLM-L6-v2 embeddings, MEMSYS_BOUNDARY_MAX_MESSAGES=50, one
single-sentence message per memorize, so that every message gives exactly one event-log entry. One run:

1. Intake. 16, then 64 concurrent clients, each on its own group and its own keep-alive connection, each
   sending its messages one after the other (closed loop: sustained throughput at that concurrency, not a
   burst), against ``memsys serve`` with ``MEMSYS_WORKERS=0``: memorize only stores the message and queues
   its stream's job, and no worker competes for the CPU, so this is intake alone. Afterwards, not timed,
   every group is flushed, two ``memsys worker`` processes drain the backlog on the same database, and every
   message must have exactly one event-log entry (nothing lost, nothing twice). Scenarios 1 and 2 share one
   server on one fresh embedded database, each starting with no backlog, and run a copy of the working tree
   taken at the start (committed or not), so that every process of the run runs the same code.
2. Formation. N messages over G groups are loaded with no worker running and every group is flushed (the
   server's flush waits 0.1 s and answers ``pending``: it only marks the stream); then workers are started
   (``memsys worker``, their own processes on the same embedded PostgreSQL) and timed until no message is
   pending: one process with ``--concurrency 1``, one with ``--concurrency 2`` (one embedding process), and
   two processes with ``--concurrency 1`` (two embedding processes). Formed messages/s counts from the moment
   every worker has registered with the queue (its model loaded) to the last MemCell; the start before it is
   reported apart. Each run checks one event-log entry per message.
3. Inline baseline. Scenario 1 at 16 clients against the code that formed memories inside memorize
   (``--baseline-ref``, checked out in a temporary git worktree, its own server on its own fresh data dir):
   there a memorize that closes a MemCell embeds and writes it, so its messages/s is intake and formation.

CPU per message is reported by process (server or workers, local embedding processes, PostgreSQL, this load
generator): it holds on a machine other work shares, and shows where the time goes.

    python -m benchmarks.ingest                              # full run, ~7 minutes on 2 cores
    python -m benchmarks.ingest --intake-messages 320 --formation-messages 400 --formation-groups 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

import httpx
import psutil
import psycopg

from app.text.tokens import count_tokens
from benchmarks.common import ROOT, memsys_server, percentiles, print_table, save

BASELINE_REF = "6bf4859"  # the last commit that formed memories inside the memorize request
WORDS_PER_MESSAGE = 7
WORDS = (
    "deploy release search index latency budget design review migration postgres vector memory agent "
    "schedule meeting customer feedback roadmap bug fix test coverage rollout"
).split()
FORMATION_RUNS = (("1 worker", 1, 1), ("1 process, concurrency 2", 1, 2), ("2 processes", 2, 1))
"""(name, worker processes, --concurrency of each)."""
GOALS = {"intake_16_msg_per_s": 1000, "intake_16_p95_ms": 100, "formation_msg_per_s": 200}


def message(group: str, client: int, i: int, start: datetime) -> dict:
    """A chat message about as long as the API's own example ("Let's discuss the technical approach for the new
    feature today": 11 words); formation embeds every message, so length is what costs."""
    words = " ".join(WORDS[(i * 7 + k * 3 + client) % len(WORDS)] for k in range(WORDS_PER_MESSAGE))
    return {
        "group_id": group,
        "group_name": f"Bench {group}",
        "message_id": f"{client}-{i}",
        "create_time": (start + timedelta(seconds=i)).isoformat(),
        "sender": f"user_{client % 4}",
        "sender_name": f"User {client % 4}",
        "content": f"Let's talk about the {words} today",
    }


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


@contextmanager
def snapshot() -> Iterator[Path]:
    """A copy of the code as it is now, committed or not (tracked and untracked files, not ignored ones), for
    every process of the run: a worker started minutes later runs the same code as the server even while
    someone edits the tree."""
    with tempfile.TemporaryDirectory(prefix="memsys-ingest-code-") as tmp:
        for name in git("ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0"):
            source = ROOT / name
            if name and source.is_file():
                (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, Path(tmp) / name)
        yield Path(tmp)


class Database:
    """The embedded PostgreSQL of one data dir, through its owner's URL (``memsys db-url``): sees every tenant."""

    CHECK = """
        SELECT (SELECT count(*) FROM messages) AS messages,
               (SELECT count(*) FROM messages WHERE status = 'pending') AS pending,
               (SELECT count(*) FROM memories WHERE memory_type = 'event_log') AS event_logs,
               (SELECT count(*) FROM (
                    SELECT m.id FROM messages m
                      LEFT JOIN memories e ON e.memory_type = 'event_log' AND e.memcell_id = m.memcell_id
                                          AND e.source_message_ids = ARRAY[m.message_id]
                     GROUP BY m.id HAVING count(e.id) <> 1) wrong) AS not_exactly_once
    """

    def __init__(self, data_dir: Path, root: Path) -> None:
        self.data_dir, self.root = data_dir, root
        env = {**os.environ, "MEMSYS_DATA_DIR": str(data_dir), "MEMSYS_LOG_LEVEL": "WARNING"}
        url = subprocess.run(
            [sys.executable, "-m", "app.cli", "db-url"], env=env, cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        self.conn = psycopg.connect(url, autocommit=True)

    def pending(self) -> int:
        return self.conn.execute("SELECT count(*) FROM messages WHERE status = 'pending'").fetchone()[0]

    def pending_and_workers(self) -> tuple[int, int]:
        """Messages pending, and formation workers registered with the queue (a worker registers once its
        model is loaded)."""
        return self.conn.execute(
            "SELECT (SELECT count(*) FROM messages WHERE status = 'pending'), "
            "(SELECT count(*) FROM procrastinate_workers)"
        ).fetchone()

    def check_formed_once(self, what: str) -> dict:
        """Every message processed, with exactly one event-log entry; SystemExit otherwise."""
        row = self.conn.execute(self.CHECK).fetchone()
        counts = dict(zip(("messages", "pending", "event_logs", "not_exactly_once"), row, strict=True))
        if counts["pending"] or counts["not_exactly_once"] or counts["event_logs"] != counts["messages"]:
            raise SystemExit(f"{what}: formation lost or doubled messages: {counts}")
        return counts

    def postmaster(self) -> psutil.Process:
        return psutil.Process(int((self.data_dir / "pg" / "postmaster.pid").read_text().split()[0]))

    def backend_pid(self) -> int:
        """This connection's backend: its polling is left out of PostgreSQL's CPU."""
        return self.conn.info.backend_pid

    def close(self) -> None:
        self.conn.close()


def cpu_seconds(roots: list[psutil.Process], leave_out: int | None = None) -> float:
    """User + system CPU of these processes, their live descendants (but ``leave_out``) and reaped children."""
    total = 0.0
    for root in roots:
        times = root.cpu_times()
        total += times.children_user + times.children_system
        for process in [root, *root.children(recursive=True)]:
            if process.pid == leave_out:
                continue
            try:
                total += sum(process.cpu_times()[:2])
            except psutil.Error:  # a backend that ended between listing and reading
                continue
    return total


def formation_cpu(db: Database, workers: list[psutil.Process]) -> tuple[float, float, float]:
    """CPU seconds of the worker processes themselves, of their children (the local embedding processes)
    and of PostgreSQL."""
    own = sum(sum(process.cpu_times()[:2]) for process in workers)
    return own, cpu_seconds(workers) - own, cpu_seconds([db.postmaster()], leave_out=db.backend_pid())


def server_process(base_url: str) -> psutil.Process:
    port = base_url.rsplit(":", 1)[1]
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "app.cli" in cmdline and "serve" in cmdline and port in cmdline:
            return process
    raise RuntimeError(f"no memsys serve process on port {port}")


class Connection:
    """One keep-alive HTTP/1.1 connection that posts JSON. The load generator shares the machine's 2 cores
    with the server: httpx took over 1 ms of CPU per request here, this about 0.3 ms."""

    def __init__(self, base_url: str) -> None:
        url = urlparse(base_url)
        self.host, self.port = url.hostname, url.port or 80
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict) -> dict:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        payload = json.dumps(body).encode()
        head = f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
        self.writer.write(f"{head}Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
        status = int((await self.reader.readline()).split()[1])
        length = None
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise RuntimeError(f"POST {path}: {status} answer without Content-Length")
        answer = await self.reader.readexactly(length)
        if status not in (200, 201):
            raise RuntimeError(f"POST {path}: {status} {answer[:300]!r}")
        return json.loads(answer)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def send(base_url: str, clients: int, per_client: int, run: str) -> tuple[float, list[float], dict[str, int]]:
    """``clients`` closed-loop clients, each on its own connection sending ``per_client`` messages to its own
    group ``{run}-{c}``: wall seconds, latencies (ms) and the answers' status_info counts."""
    start = datetime(2025, 1, 15, 10, tzinfo=UTC)
    latencies: list[float] = []
    outcomes: dict[str, int] = {}
    connections = [Connection(base_url) for _ in range(clients)]

    async def client(c: int) -> None:
        for i in range(per_client):
            body = message(f"{run}-{c}", c, i, start)
            began = time.perf_counter()
            answer = await connections[c].post("/api/v3/agentic/memorize", body)
            latencies.append((time.perf_counter() - began) * 1000)
            status = answer["result"]["status_info"]
            outcomes[status] = outcomes.get(status, 0) + 1

    try:
        began = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        return time.perf_counter() - began, latencies, outcomes
    finally:
        for connection in connections:
            connection.close()


async def flush_all(base_url: str, groups: list[str]) -> list[str]:
    """Flush every group at once; the answers' status_info."""
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as http:

        async def flush(group: str) -> str:
            response = await http.post("/api/v3/agentic/flush", json={"group_id": group})
            response.raise_for_status()
            return response.json()["result"]["status_info"]

        return await asyncio.gather(*(flush(g) for g in groups))


def intake(base_url: str, code: str, clients: int, messages: int, db: Database) -> dict:
    """One intake scenario: the figures of ``send`` and the CPU the server, PostgreSQL and this process used."""
    run = uuid.uuid4().hex[:8]
    per_client = messages // clients
    server, postmaster = server_process(base_url), db.postmaster()

    def cpu() -> tuple[float, float, float]:
        return cpu_seconds([server]), cpu_seconds([postmaster], leave_out=db.backend_pid()), time.process_time()

    load_before = os.getloadavg()[0]
    cpu_before = cpu()
    elapsed, latencies, outcomes = asyncio.run(send(base_url, clients, per_client, run))
    cpu_after = cpu()
    server_cpu, postgres_cpu, client_cpu = (after - before for after, before in zip(cpu_after, cpu_before, strict=True))
    sent = per_client * clients
    latency = percentiles(latencies)
    row = {
        "scenario": f"intake, {clients} clients",
        "code": code,
        "clients": clients,
        "messages": sent,
        "seconds": round(elapsed, 2),
        "msg_per_s": round(sent / elapsed, 1),
        "p50_ms": latency["p50"],
        "p95_ms": latency["p95"],
        "p99_ms": latency["p99"],
        "max_ms": round(max(latencies), 1),
        "answers": outcomes,
        "server_cpu_ms_per_msg": round(server_cpu * 1000 / sent, 2),
        "postgres_cpu_ms_per_msg": round(postgres_cpu * 1000 / sent, 2),
        "client_cpu_ms_per_msg": round(client_cpu * 1000 / sent, 2),
        "load_1m_before": round(load_before, 2),
        "load_1m_after": round(os.getloadavg()[0], 2),
        "groups": [f"{run}-{c}" for c in range(clients)],
    }
    print(
        f"{row['scenario']} ({code}): {row['msg_per_s']} msg/s, p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, "
        f"p99 {row['p99_ms']} ms",
        flush=True,
    )
    return row


@contextmanager
def workers(db: Database, env: dict[str, str], processes: int, concurrency: int) -> Iterator[list[subprocess.Popen]]:
    """``memsys worker --concurrency N`` processes (the code in ``db.root``) on the embedded database of ``db``,
    stopped afterwards."""
    child_env = {**os.environ, **env, "MEMSYS_DATA_DIR": str(db.data_dir)}
    command = [sys.executable, "-m", "app.cli", "worker", "--concurrency", str(concurrency)]
    started = [subprocess.Popen(command, env=child_env, cwd=db.root) for _ in range(processes)]
    try:
        yield started
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


@dataclass
class Drained:
    """When the workers were all ready (registered with the queue, model loaded) and when no message was
    pending, in seconds from their start, and the backlog left when they were ready."""

    ready_s: float
    end_s: float
    pending_at_ready: int


def wait_drained(
    db: Database, started: list[subprocess.Popen], timeout_s: float, on_ready: Callable[[], None] | None = None
) -> Drained:
    """Poll until no message is pending. A worker that exits, or a backlog that outlives the timeout, ends the
    benchmark."""
    began = time.perf_counter()
    workers_before = db.pending_and_workers()[1]
    ready: tuple[float, int] | None = None
    while True:
        pending, registered = db.pending_and_workers()
        now = time.perf_counter() - began
        if ready is None and registered >= workers_before + len(started):
            ready = now, pending
            if on_ready is not None:
                on_ready()
        if pending == 0:
            ready_s, pending_at_ready = ready or (now, 0)
            return Drained(ready_s, now, pending_at_ready)
        if any(process.poll() is not None for process in started):
            raise SystemExit(f"a formation worker exited with {[p.returncode for p in started]}")
        if now > timeout_s:
            raise SystemExit(f"{pending} messages still pending after {timeout_s:.0f} s")
        time.sleep(0.1)


def drain(base_url: str, db: Database, env: dict[str, str], groups: list[str], what: str) -> dict:
    """Not timed: flush the groups, let two worker processes form the backlog, check every message formed
    once; the counts and how long the backlog took from the workers' start."""
    asyncio.run(flush_all(base_url, groups))
    with workers(db, env, 2, 1) as started:
        drained = wait_drained(db, started, timeout_s=1800)
    return {**db.check_formed_once(what), "seconds": round(drained.end_s, 1)}


def formation(
    base_url: str,
    db: Database,
    env: dict[str, str],
    name: str,
    processes: int,
    concurrency: int,
    args: argparse.Namespace,
) -> dict:
    """Load the backlog with no worker running and flush it, then time ``processes`` workers forming it."""
    run = uuid.uuid4().hex[:8]
    per_group = args.formation_messages // args.formation_groups
    asyncio.run(send(base_url, args.formation_groups, per_group, run))
    groups = [f"{run}-{c}" for c in range(args.formation_groups)]
    answers = asyncio.run(flush_all(base_url, groups))
    if set(answers) != {"pending"}:
        raise SystemExit(f"flush with no worker running answered {set(answers)}, not only 'pending'")
    backlog = db.pending()
    load_before = os.getloadavg()[0]
    with workers(db, env, processes, concurrency) as started:
        watched = [psutil.Process(p.pid) for p in started]
        cpu_at_ready: list[tuple[float, ...]] = []
        drained = wait_drained(db, started, 1800, on_ready=lambda: cpu_at_ready.append(formation_cpu(db, watched)))
        cpu_used = [end - ready for end, ready in zip(formation_cpu(db, watched), cpu_at_ready[0], strict=True)]
    failed = httpx.get(f"{base_url}/health").json()["result"]["formation"]["failed"]
    db.check_formed_once(name)
    if drained.pending_at_ready == 0:
        raise SystemExit(f"{name}: the backlog was formed before every worker was ready; load more messages")
    seconds = drained.end_s - drained.ready_s
    row = {
        "scenario": f"formation, {name}",
        "processes": processes,
        "concurrency": concurrency,
        "groups": args.formation_groups,
        "messages": backlog,
        "start_s": round(drained.ready_s, 2),
        "formed_before_ready": backlog - drained.pending_at_ready,
        "seconds": round(seconds, 2),
        "msg_per_s": round(drained.pending_at_ready / seconds, 1),
        "msg_per_s_incl_start": round(backlog / drained.end_s, 1),
        "cpu_ms_per_msg": round(sum(cpu_used) * 1000 / drained.pending_at_ready, 2),
        "worker_cpu_ms_per_msg": round(cpu_used[0] * 1000 / drained.pending_at_ready, 2),
        "embedder_cpu_ms_per_msg": round(cpu_used[1] * 1000 / drained.pending_at_ready, 2),
        "postgres_cpu_ms_per_msg": round(cpu_used[2] * 1000 / drained.pending_at_ready, 2),
        "failed_jobs_total": failed,
        "load_1m_before": round(load_before, 2),
        "load_1m_after": round(os.getloadavg()[0], 2),
    }
    print(
        f"formation, {name}: {row['msg_per_s']} msg/s once ready ({row['start_s']} s to start), "
        f"{row['msg_per_s_incl_start']} msg/s from the process start",
        flush=True,
    )
    return row


def run_current(args: argparse.Namespace, env: dict[str, str], code: Path) -> tuple[list[dict], list[dict]]:
    """Scenarios 1 and 2 on the code in ``code``, one server (MEMSYS_WORKERS=0) on one fresh embedded database."""
    server_env = {**env, "MEMSYS_WORKERS": "0", "MEMSYS_FLUSH_TIMEOUT_SECONDS": "0.1"}
    with (
        tempfile.TemporaryDirectory(prefix="memsys-ingest-") as tmp,
        memsys_server(env=server_env, root=code, data_dir=Path(tmp)) as base_url,
    ):
        db = Database(Path(tmp), root=code)
        try:
            asyncio.run(send(base_url, 4, 20, "warm-up"))
            asyncio.run(flush_all(base_url, [f"warm-up-{c}" for c in range(4)]))  # formed by the first drain
            intakes = []
            for clients in (16, 64):
                row = intake(base_url, "background", clients, args.intake_messages, db)
                if set(row["answers"]) != {"accumulated"}:
                    raise SystemExit(f"memorize answered {row['answers']}, not only 'accumulated'")
                row["formed"] = drain(base_url, db, env, row.pop("groups"), row["scenario"])
                intakes.append(row)
            formations = [formation(base_url, db, env, *run, args) for run in FORMATION_RUNS]
        finally:
            db.close()
    return intakes, formations


def run_inline_baseline(args: argparse.Namespace, env: dict[str, str]) -> dict:
    """Scenario 1 at 16 clients on ``--baseline-ref``, where memorize forms inline."""
    code = f"inline ({args.baseline_ref})"
    with tempfile.TemporaryDirectory(prefix="memsys-ingest-inline-") as tmp:
        worktree, data_dir = Path(tmp) / "code", Path(tmp) / "data"
        git("worktree", "add", "--detach", str(worktree), args.baseline_ref)
        try:
            with memsys_server(env=env, root=worktree, data_dir=data_dir) as base_url:
                db = Database(data_dir, root=worktree)
                try:
                    asyncio.run(send(base_url, 4, 20, "warm-up"))
                    asyncio.run(flush_all(base_url, [f"warm-up-{c}" for c in range(4)]))  # the model loaded
                    row = intake(base_url, code, 16, args.intake_messages, db)
                    asyncio.run(flush_all(base_url, row.pop("groups")))  # inline: formed by the time it answers
                    row["formed"] = db.check_formed_once(code)
                finally:
                    db.close()
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, capture_output=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intake-messages", type=int, default=3200, help="messages per intake scenario")
    parser.add_argument("--formation-messages", type=int, default=2000, help="backlog of each formation run")
    parser.add_argument("--formation-groups", type=int, default=40, help="groups the backlog is spread over")
    parser.add_argument("--baseline-ref", default=BASELINE_REF, help="the inline-formation code to compare with")
    parser.add_argument("--no-baseline", action="store_true", help="skip scenario 3")
    parser.add_argument("--out", type=Path, default=None, help="directory for the JSON (default benchmarks/results)")
    parser.add_argument(
        "--embedding-base-url",
        help="embed through this OpenAI-compatible /embeddings endpoint instead of the local model "
        "(to see the pipeline without the local model's CPU cost); results go to ingest_remote_embeddings.json",
    )
    args = parser.parse_args(argv)

    env = {
        "MEMSYS_LLM_API_KEY": "",
        "MEMSYS_EMBEDDING_PROVIDER": "local",
        "MEMSYS_BOUNDARY_MAX_MESSAGES": "50",
        "MEMSYS_LOG_LEVEL": "WARNING",
        "TQDM_DISABLE": "1",  # the model's loading bar, once per process started
    }
    if args.embedding_base_url:
        env.update(MEMSYS_EMBEDDING_PROVIDER="openai", MEMSYS_EMBEDDING_BASE_URL=args.embedding_base_url)
    commit, uncommitted = git("rev-parse", "--short", "HEAD"), bool(git("status", "--porcelain", "app", "migrations"))
    with snapshot() as code:
        intakes, formations = run_current(args, env, code)
    if not args.no_baseline:
        intakes.append(run_inline_baseline(args, env))
        background, inline = intakes[0], intakes[-1]
        background["msg_per_s_vs_inline"] = round(background["msg_per_s"] / inline["msg_per_s"], 2)
        background["p95_vs_inline"] = round(background["p95_ms"] / inline["p95_ms"], 3)

    print()
    print_table(intakes, ["scenario", "code", "messages", "seconds", "msg_per_s", "p50_ms", "p95_ms", "p99_ms",
                          "max_ms", "server_cpu_ms_per_msg", "postgres_cpu_ms_per_msg", "client_cpu_ms_per_msg",
                          "msg_per_s_vs_inline"])  # fmt: skip
    print()
    print_table(formations, ["scenario", "messages", "start_s", "formed_before_ready", "seconds", "msg_per_s",
                             "msg_per_s_incl_start", "worker_cpu_ms_per_msg", "embedder_cpu_ms_per_msg",
                             "postgres_cpu_ms_per_msg", "failed_jobs_total"])  # fmt: skip
    measured = {
        "intake_16_msg_per_s": intakes[0]["msg_per_s"],
        "intake_16_p95_ms": intakes[0]["p95_ms"],
        "formation_msg_per_s": max(r["msg_per_s"] for r in formations),
    }
    goals = {
        name: {
            "goal": GOALS[name],
            "measured": value,
            "met": value < GOALS[name] if name.endswith("_ms") else value >= GOALS[name],
        }
        for name, value in measured.items()
    }
    print()
    for name, goal in goals.items():
        print(f"goal {name}: {goal['goal']}, measured {goal['measured']}: {'met' if goal['met'] else 'MISSED'}")

    config = {
        "mode": "offline formation, "
        + (f"embeddings from {args.embedding_base_url}" if args.embedding_base_url else "local all-MiniLM-L6-v2"),
        "boundary_max_messages": 50,
        "closed_loop": True,
        "intake_server": "memsys serve, MEMSYS_WORKERS=0, one fresh embedded database for scenarios 1 and 2; "
        "after each intake scenario the backlog is drained (not timed) by two memsys worker processes",
        "message_tokens": count_tokens(message("g", 0, 0, datetime(2025, 1, 15, tzinfo=UTC))["content"]),
        "intake_messages": args.intake_messages,
        "formation_messages": args.formation_messages,
        "formation_groups": args.formation_groups,
        "baseline_ref": None if args.no_baseline else args.baseline_ref,
        "commit": commit,
        "uncommitted_app_changes": uncommitted,
    }
    name = "ingest_remote_embeddings" if args.embedding_base_url else "ingest"
    results = {"intake": intakes, "formation": formations, "goals": goals}
    path = save(name, config, results, out_dir=args.out)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
