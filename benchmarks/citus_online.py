"""Citus online: a worker added, shards moved, a large tenant isolated, while memsys serves a mixed load.

    python -m benchmarks.citus_online [--dir DIR] [--port 9740] [--clients 12] [--big 1500] [--small 150]

A local cluster (``deploy/citus/up.sh``: a coordinator, two workers and a spare one, ``wal_level = logical``) gets a
fresh database; ``memsys serve`` (``MEMSYS_WORKERS=0``) and a ``memsys worker`` run on it with the soak's
OpenAI-compatible test servers as LLM and embedder (benchmarks/soak). Four tenants: ``t0`` with ten times the
others' messages (preloaded into a group ``archive`` that the load never writes) and four times their clients. The
soak's clients (memorize 70 %, lightweight 25 %, agentic 5 %) run throughout, and a prober asks fixed questions of
every tenant's ``archive`` every half second. Meanwhile, one after another, with quiet time between:

1. ``add_worker``: the spare worker registered (``citus_add_node``) and ``citus_rebalance_start()`` run to its end;
2. ``isolate_big_tenant``: ``isolate_tenant_to_new_shard('memcells', 't0', 'CASCADE')`` (``block_writes``: Citus's
   non-blocking split stalls under concurrent UPDATEs, citusdata/citus#6790) and that shard group moved to another
   worker (``citus_move_shard_placement``, logical replication);
3. ``worker_restart_mid_move``: the big tenant's shard group moved again, and its source worker restarted (fast
   shutdown) while the move copies; then the move run again, as the runbook says (docs/scaling.md);
4. ``cancelled_move``: a small tenant's shard group move cancelled (``pg_cancel_backend``) while it copies.

For each step: requests that failed, by status; latency p50/p95 before, during and after; how many probe answers
given during the step name the same memories, in the same order, as the same probe after everything. At the end the
soak's invariants, read from the database: every acknowledged message stored once and formed once, no tenant's
marker in another's answers or rows, no 5xx but 503s. JSON to benchmarks/results/citus_online.json and a timeline
plot beside it. Everything on 127.0.0.1; the nodes are stopped at the end (their data stays under DIR).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

from benchmarks.common import RESULTS_DIR, ROOT, free_port, percentiles, print_table, save
from benchmarks.fake_llm import FakeLLM
from benchmarks.soak import checks
from benchmarks.soak.harness import drain_backlog
from benchmarks.soak.load import GIVE_UP_S, PEOPLE, QUERIES, TOPICS, Load, Tenant
from benchmarks.soak.memsys import Memsys, answer, process_env

UP, DOWN = ROOT / "deploy" / "citus" / "up.sh", ROOT / "deploy" / "citus" / "down.sh"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
STEPS = ("add_worker", "isolate_big_tenant", "worker_restart_mid_move", "cancelled_move")
ARCHIVE = "archive"
"""The group every tenant's preloaded messages are in; the load never writes it, so its answers must not change."""
PROBES = tuple((query, source) for query in QUERIES[:3] for source in ("episode", "event_log"))


# ---------------------------------------------------------------------------------------------- the cluster
@dataclass
class Cluster:
    """The nodes of ``deploy/citus/up.sh DIR`` (with one spare worker) and a database of the run on them."""

    directory: Path
    port: int
    database: str = "memsys_online"
    workers: int = 2
    """Registered at the start; ``spare`` more are running, ready to be added (``add_worker``)."""
    spare: int = 1

    def node_port(self, worker: int) -> int:
        return self.port + worker

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    def up(self) -> None:
        env = {**os.environ, "MEMSYS_CITUS_PORT": str(self.port), "MEMSYS_CITUS_WORKERS": str(self.workers),
               "MEMSYS_CITUS_SPARE": str(self.spare)}  # fmt: skip
        subprocess.run(["bash", str(UP), str(self.directory)], env=env, check=True, capture_output=True, text=True)
        for node in range(1 + self.workers + self.spare):  # a fresh database on every node, Citus in each
            at = f"postgresql://postgres@127.0.0.1:{self.port + node}"
            with psycopg.connect(f"{at}/postgres", autocommit=True) as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone():
                    _drop_replication(f"{at}/{self.database}")
                for attempt in range(20):  # Citus's maintenance daemons let go of it within seconds
                    try:
                        conn.execute(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)")
                        break
                    except psycopg.errors.ObjectInUse:
                        if attempt == 19:
                            raise
                        time.sleep(1)
                # and the roles of moves and splits that failed in it (roles are the node's, not the database's)
                for (role,) in conn.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE 'citus\\_shard\\_%'"):
                    conn.execute(f'DROP ROLE "{role}"')
                conn.execute(f"CREATE DATABASE {self.database}")
            with psycopg.connect(f"{at}/{self.database}", autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
        self.sql("SELECT citus_set_coordinator_host('127.0.0.1', %s)", self.port)
        for worker in range(1, self.workers + 1):
            self.sql("SELECT citus_add_node('127.0.0.1', %s)", self.node_port(worker))

    def add_worker(self, worker: int) -> dict:
        """``worker`` registered and ``citus_rebalance_start()`` run to its end (polled): its job and state."""
        self.sql("SELECT citus_add_node('127.0.0.1', %s)", self.node_port(worker))
        job = self.sql("SELECT citus_rebalance_start()")[0][0]
        while True:
            state = self.sql("SELECT state FROM citus_rebalance_status() WHERE job_id = %s", job)[0][0]
            if state not in ("scheduled", "running", "cancelling", "failing"):
                return {"job": job, "state": state}
            time.sleep(0.5)

    def down(self) -> None:
        subprocess.run(["bash", str(DOWN), str(self.directory)], capture_output=True)

    def sql(self, statement: str, *params: object) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            cursor = conn.execute(statement, params or None)
            return cursor.fetchall() if cursor.description else []

    def restart(self, worker: int) -> None:
        data = self.directory / f"worker{worker}"
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        log = str(self.directory / f"worker{worker}.log")
        command = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "restart", "-l", log]
        subprocess.run([*prefix, *command], check=True, capture_output=True)

    def shard_of(self, tenant: str) -> tuple[int, int]:
        """(shard id of ``memcells`` holding ``tenant``, the worker number it is on)."""
        shard, port = self.sql(
            """SELECT s.shardid, n.nodeport FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
                JOIN pg_dist_node n USING (groupid)
               WHERE s.shardid = get_shard_id_for_distribution_column('memcells', %s::text)""",
            tenant,
        )[0]
        return shard, port - self.port

    def registered(self) -> list[int]:
        return [port - self.port for (port,) in self.sql("SELECT nodeport FROM pg_dist_node WHERE groupid > 0")]

    def shards_per_worker(self) -> dict[int, int]:
        rows = self.sql(
            """SELECT n.nodeport, count(*) FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
                JOIN pg_dist_shard s USING (shardid) WHERE s.logicalrelid = 'memcells'::regclass GROUP BY 1"""
        )
        return {port - self.port: count for port, count in rows}

    def move(self, shard: int, source: int, target: int, pid: list[int] | None = None) -> None:
        """``citus_move_shard_placement`` by logical replication (its backend's pid appended to ``pid``)."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            if pid is not None:
                pid.append(conn.info.backend_pid)
            conn.execute(
                "SELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s, shard_transfer_mode => "
                "'force_logical')",
                (shard, self.node_port(source), self.node_port(target)),
            )

    def stop_operations(self) -> dict:
        """A step that failed or took too long: the rebalance job stopped, shard operations cancelled, their
        leftovers cleaned up."""
        self.sql("SELECT citus_rebalance_stop() FROM citus_rebalance_status() WHERE state = 'running'")
        cancelled = self.sql(
            "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND query ~ '(isolate_tenant_to_new_shard|citus_move_shard_placement|citus_split_shard)'"
        )[0][0]
        time.sleep(2)
        self.sql("CALL citus_cleanup_orphaned_resources()")
        return {"cancelled": cancelled}

    def copying(self) -> bool:
        """A shard move is under way (its logical replication slot exists on some node)."""
        rows = self.sql("SELECT count(*) FROM get_rebalance_progress() WHERE progress = 1")
        return bool(rows and rows[0][0])


def _drop_replication(url: str) -> None:
    """What a move that failed half way may leave in a database of an earlier run (subscriptions and slots): a
    database with them cannot be dropped."""
    with psycopg.connect(url, autocommit=True) as conn:
        for (name,) in conn.execute(
            "SELECT subname FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database "
            "WHERE datname = current_database())"
        ).fetchall():
            conn.execute(f'ALTER SUBSCRIPTION "{name}" DISABLE')
            conn.execute(f'ALTER SUBSCRIPTION "{name}" SET (slot_name = NONE)')
            conn.execute(f'DROP SUBSCRIPTION "{name}"')
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE database = current_database() AND NOT active"
        )


# ---------------------------------------------------------------------------------------------- the steps
async def add_worker(cluster: Cluster, tenants: list[Tenant]) -> dict:
    done = await asyncio.to_thread(cluster.add_worker, cluster.workers + 1)
    return {**done, "shards_per_worker": cluster.shards_per_worker()}


async def isolate_big_tenant(cluster: Cluster, tenants: list[Tenant]) -> dict:
    big = tenants[0].name
    before, _ = cluster.shard_of(big)
    await asyncio.to_thread(
        cluster.sql,
        "SELECT isolate_tenant_to_new_shard('memcells', %s::text, 'CASCADE', shard_transfer_mode => 'block_writes')",
        big,
    )
    shard, source = cluster.shard_of(big)
    target = next(w for w in sorted(cluster.registered(), reverse=True) if w != source)
    await asyncio.to_thread(cluster.move, shard, source, target)
    return {"shard_before": before, "shard": shard, "from": source, "to": cluster.shard_of(big)[1]}


async def worker_restart_mid_move(cluster: Cluster, tenants: list[Tenant]) -> dict:
    """The big tenant's shard group moved again; its source worker restarted while the move copies; the failed
    move's leftovers cleaned up and the move run again."""
    shard, source = cluster.shard_of(tenants[0].name)
    target = next(w for w in cluster.registered() if w != source)
    moving = asyncio.create_task(asyncio.to_thread(cluster.move, shard, source, target))
    restarted_at = None
    while not moving.done():
        if cluster.copying():
            await asyncio.sleep(0.3)
            await asyncio.to_thread(cluster.restart, source)
            restarted_at = time.monotonic()
            break
        await asyncio.sleep(0.05)
    first: str = "completed before the restart"
    try:
        await moving
    except psycopg.Error as exc:
        first = f"failed: {str(exc).strip().splitlines()[0]}"
    attempts = 1
    while cluster.shard_of(tenants[0].name)[1] == source:
        await asyncio.to_thread(cluster.sql, "CALL citus_cleanup_orphaned_resources()")
        attempts += 1
        try:
            await asyncio.to_thread(cluster.move, shard, source, target)
        except psycopg.Error as exc:
            if attempts >= 5:
                raise
            print(f"  move attempt {attempts} failed: {str(exc).strip().splitlines()[0]}", flush=True)
            await asyncio.sleep(2)
    return {
        "shard": shard, "from": source, "to": cluster.shard_of(tenants[0].name)[1], "restarted": source,
        "restart_during_copy": restarted_at is not None, "first_attempt": first, "attempts": attempts,
    }  # fmt: skip


async def cancelled_move(cluster: Cluster, tenants: list[Tenant]) -> dict:
    """A small tenant's shard group move cancelled while it copies: it stays where it was, whole."""
    shard, source = cluster.shard_of(tenants[1].name)
    target = next(w for w in cluster.registered() if w != source)
    pid: list[int] = []
    moving = asyncio.create_task(asyncio.to_thread(cluster.move, shard, source, target, pid))
    cancelled = False
    while not moving.done():
        if pid and cluster.copying():
            await asyncio.sleep(0.2)
            cancelled = bool(cluster.sql("SELECT pg_cancel_backend(%s::int)", pid[0])[0][0])
            break
        await asyncio.sleep(0.05)
    outcome = "completed before the cancel"
    try:
        await moving
    except psycopg.errors.QueryCanceled:
        outcome = "cancelled"
    await asyncio.to_thread(cluster.sql, "CALL citus_cleanup_orphaned_resources()")
    return {"shard": shard, "from": source, "now_on": cluster.shard_of(tenants[1].name)[1], "outcome": outcome,
            "cancel_sent": cancelled}  # fmt: skip


ACTIONS = {
    "add_worker": add_worker,
    "isolate_big_tenant": isolate_big_tenant,
    "worker_restart_mid_move": worker_restart_mid_move,
    "cancelled_move": cancelled_move,
}


# ---------------------------------------------------------------------------------------------- the probes
@dataclass
class Probe:
    tenant: str
    query: str
    source: str
    at: float
    status: int | None
    ids: tuple[str, ...] = ()


@dataclass
class Prober:
    """Fixed questions to every tenant's ``archive`` group, one every ``every_s``, round robin."""

    load: Load
    every_s: float = 0.5
    answers: list[Probe] = field(default_factory=list)

    async def ask(self, client: httpx.AsyncClient, tenant: Tenant, query: str, source: str) -> Probe:
        body = {"query": query, "top_k": 10, "data_source": source, "group_id": ARCHIVE, "time_range_days": 100000}
        started = self.load.now()
        try:
            response = await client.post(
                "/api/v3/agentic/retrieve_lightweight", json=body, headers={"Authorization": f"Bearer {tenant.key}"}
            )
        except httpx.TransportError:
            return Probe(tenant.name, query, source, started, None)
        ids = tuple(m["id"] for m in response.json()["result"]["memories"]) if response.status_code == 200 else ()
        return Probe(tenant.name, query, source, started, response.status_code, ids)

    async def run(self, stop: asyncio.Event) -> None:
        asks = [(t, q, s) for t in self.load.tenants for q, s in PROBES]
        async with httpx.AsyncClient(base_url=self.load.base_url, timeout=30) as client:
            turn = 0
            while not stop.is_set():
                self.answers.append(await self.ask(client, *asks[turn % len(asks)]))
                turn += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.every_s)

    async def reference(self) -> dict[tuple[str, str, str], tuple[str, ...]]:
        async with httpx.AsyncClient(base_url=self.load.base_url, timeout=30) as client:
            return {(t.name, q, s): (await self.ask(client, t, q, s)).ids for t in self.load.tenants for q, s in PROBES}


async def sample_cpu(load: Load, samples: list[tuple[float, float]], stop: asyncio.Event) -> None:
    """The machine's CPU busy share (0-100 %, all cores, from /proc/stat) every second: every node, memsys and the
    load share these cores."""

    def read() -> tuple[int, int]:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        return sum(values) - idle, sum(values)

    busy, total = read()
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
        now_busy, now_total = read()
        samples.append((round(load.now(), 1), round(100 * (now_busy - busy) / max(1, now_total - total), 1)))
        busy, total = now_busy, now_total


def cpu_between(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    chosen = [busy for at, busy in samples if start <= at < end]
    return round(sum(chosen) / len(chosen), 1) if chosen else None


def agreement(answers: list[Probe], reference: dict, start: float, end: float) -> dict:
    chosen = [p for p in answers if start <= p.at < end]
    answered = [p for p in chosen if p.status == 200]
    return {
        "asked": len(chosen),
        "answered": len(answered),
        "same_ids": sum(1 for p in answered if set(p.ids) == set(reference[(p.tenant, p.query, p.source)])),
        "same_order": sum(1 for p in answered if p.ids == reference[(p.tenant, p.query, p.source)]),
        "empty": sum(1 for p in answered if not p.ids),
    }


# ---------------------------------------------------------------------------------------------- the run
@dataclass
class Config:
    directory: Path
    port: int = 9740
    clients: int = 12
    rate: float = 1.0
    big: int = 1500
    small: int = 150
    warmup_s: float = 40.0
    settle_s: float = 30.0
    """Quiet time after a step (its "after" phase) and before the next (the next one's "before")."""
    step_timeout_s: float = 600.0
    run_dir: Path | None = None
    out: Path = RESULTS_DIR


def run(config: Config) -> dict:
    cluster = Cluster(config.directory, config.port)
    started = time.monotonic()
    print("[citus_online] cluster up", flush=True)
    cluster.up()
    run_dir = Path(config.run_dir or tempfile.mkdtemp(prefix="memsys-citus-online-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    llm, embedder = FakeLLM().start(), FakeLLM().start()
    for fake in (llm, embedder):
        fake.record = False
    llm.handler = answer
    env = process_env(llm.base_url, embedder.base_url, llm_timeout_s=5.0, quick=False)
    env |= {"MEMSYS_DATABASE_URL": cluster.url, "MEMSYS_MIGRATE_ON_START": "false"}
    memsys = Memsys(run_dir, env, free_port(), worker_concurrency=2)
    try:
        results = asyncio.run(_drive(config, cluster, memsys))
    finally:
        memsys.stop()
        llm.stop()
        embedder.stop()
        cluster.down()
    results["figures"]["log_errors"] = memsys.log_errors()
    results["figures"]["process_starts"] = dict(memsys.starts)
    return {
        "config": {k: str(v) for k, v in vars(config).items()} | {"run_dir": str(run_dir)},
        "results": results,
        "wall_s": round(time.monotonic() - started, 1),
    }


async def _drive(config: Config, cluster: Cluster, memsys: Memsys) -> dict:
    names = [f"t{i}" for i in range(4)]
    await asyncio.to_thread(memsys.cli, "migrate", timeout_s=600)
    keys = [await asyncio.to_thread(memsys.create_key, name) for name in names]
    groups = tuple(f"g{i}" for i in range(6))
    tenants = [Tenant(name, key, f"mrk{i}x", groups) for i, (name, key) in enumerate(zip(names, keys, strict=True))]
    memsys.start("serve")
    memsys.start("worker")
    await asyncio.to_thread(memsys.wait_serving)
    async with Load(memsys.base_url, tenants, config.rate, timeout_s=60, retry_429=True) as load:
        memsys.clock = load.now
        print(f"[{load.now():6.1f}s] preloading {config.big} + 3 x {config.small} messages", flush=True)
        preload = await _preload(load, config, cluster.url)
        print(f"[{load.now():6.1f}s] preloaded and formed in {preload['formed_s']} s", flush=True)
        prober = Prober(load)
        reference_before = await prober.reference()
        stop = asyncio.Event()
        weighted = [tenants[0]] * 4 + tenants[1:]
        clients = load.clients(config.clients, stop, weighted)
        probing = asyncio.create_task(prober.run(stop))
        cpu: list[tuple[float, float]] = []
        sampling = asyncio.create_task(sample_cpu(load, cpu, stop))
        steps = []
        try:
            await asyncio.sleep(config.warmup_s)
            for name in STEPS:
                began = load.now()
                print(f"[{began:6.1f}s] {name}", flush=True)
                try:
                    detail = await asyncio.wait_for(ACTIONS[name](cluster, tenants), config.step_timeout_s)
                except TimeoutError:
                    detail = {"error": f"not done in {config.step_timeout_s:.0f} s", **cluster.stop_operations()}
                except psycopg.Error as exc:
                    detail = {"error": str(exc).strip().splitlines()[0], **cluster.stop_operations()}
                ended = load.now()
                print(f"[{ended:6.1f}s] {name} done in {ended - began:.1f} s: {detail}", flush=True)
                steps.append({"step": name, "began_s": round(began, 1), "ended_s": round(ended, 1), **detail})
                memsys.notice_exits()
                await asyncio.sleep(config.settle_s)
        finally:
            stop.set()
        load_s = load.now()
        _, late = await asyncio.wait([*clients, probing, sampling], timeout=GIVE_UP_S + 10)
        for task in late:
            task.cancel()
        drain = await drain_backlog(load, cluster.url, 300)
        reference = await prober.reference()
        db = await asyncio.to_thread(checks.database_checks, cluster.url, load)
    results = _results(
        config, load, load_s, steps, prober, reference, reference_before, drain, db, memsys.exits, preload
    )
    for step in results["steps"]:
        began, ended = step["began_s"], step["ended_s"]
        step["cpu_busy_pct"] = {
            "before": cpu_between(cpu, began - config.settle_s, began),
            "during": cpu_between(cpu, began, ended),
            "after": cpu_between(cpu, ended, ended + config.settle_s),
        }
    results["cpu_busy_pct"] = cpu
    return results


async def _preload(load: Load, config: Config, owner_url: str) -> dict:
    """``big`` messages for t0 and ``small`` for each other tenant into its ``archive`` group, by 16 senders;
    then the group flushed and formed."""
    began = load.now()
    queue: asyncio.Queue = asyncio.Queue()
    for index, tenant in enumerate(load.tenants):
        for n in range(config.big if index == 0 else config.small):
            queue.put_nowait((tenant, n))
    failed = Counter()

    async def sender(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            tenant, n = queue.get_nowait()
            person = list(PEOPLE)[n % len(PEOPLE)]
            text = TOPICS[n % len(TOPICS)].format(n=n)
            body = {
                "group_id": ARCHIVE, "message_id": f"a{n}", "sender": person, "sender_name": PEOPLE[person],
                "create_time": f"2026-06-01T{(n // 60) % 24:02d}:{n % 60:02d}:00Z",
                "content": f"{tenant.marker} {PEOPLE[person]} says {text}",
            }  # fmt: skip
            for _ in range(20):  # a 429 (the key's fair share) again after its Retry-After, as the client does
                response = await client.post(
                    "/api/v3/agentic/memorize", json=body, headers={"Authorization": f"Bearer {tenant.key}"}
                )
                if response.status_code != 429:
                    break
                await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
            key = (tenant.name, ARCHIVE, body["message_id"])
            load.attempted.add(key)  # the invariants count them as the load's: acknowledged, so stored once
            if response.status_code == 200:
                load.accepted.add(key)
            else:
                failed[response.status_code] += 1

    async with httpx.AsyncClient(base_url=load.base_url, timeout=60) as client:
        await asyncio.gather(*(sender(client) for _ in range(16)))
    sent_s = load.now() - began
    formed = await drain_backlog(load, owner_url, 600, groups=(ARCHIVE,))
    return {"sent_s": round(sent_s, 1), "formed_s": round(load.now() - began, 1), "refused": dict(failed), **formed}


def _results(
    config: Config, load: Load, load_s: float, steps: list[dict], prober: Prober, reference: dict,
    reference_before: dict, drain: dict, db: dict, exits: list[dict], preload: dict,
) -> dict:  # fmt: skip
    records = load.records
    for step in steps:
        began, ended = step["began_s"], step["ended_s"]
        before = (began - config.settle_s, began)
        step["phases"] = {
            "before": checks.phase_figures(records, *before),
            "during": checks.phase_figures(records, began, ended),
            "after": checks.phase_figures(records, ended, ended + config.settle_s),
        }
        step["failed"] = dict(Counter(r.kind for r in records if r.status != 200 and began <= r.started < ended))
        step["probes_during"] = agreement(prober.answers, reference, began, ended)
    during = [s["probes_during"] for s in steps]
    memorize_p95 = {
        s["step"]: _ratio(s["phases"]["during"]["memorize"], s["phases"]["before"]["memorize"]) for s in steps
    }
    invariants = {
        **checks.data_invariants(db, load, exits),
        "searches_during_moves_agree": {
            # a step shorter than the probes' half second (a move cancelled at once) may have none of its own
            "ok": sum(d["answered"] for d in during) > 0 and all(d["same_ids"] == d["answered"] for d in during),
            "answered": sum(d["answered"] for d in during), "same_ids": sum(d["same_ids"] for d in during),
            "reference_unchanged": reference == reference_before,
        },
        "p95_during_at_most_2x_before": {
            "ok": all(r is not None and r <= 2.0 for r in memorize_p95.values()), "memorize_p95_ratio": memorize_p95,
        },
        "every_step_done": {
            "ok": not any("error" in s for s in steps), "failed": [s["step"] for s in steps if "error" in s],
        },
    }  # fmt: skip
    invariants["formed_once"]["ok"] &= drain["drained"]  # and no formation job left open
    figures = {
        "preload": preload,
        "load_s": round(load_s, 1),
        "requests": len(records),
        "served": sum(1 for r in records if r.status == 200),
        "errors_by_kind": checks.errors_by_kind(records),
        "messages": db["messages"],
        "final_drain": drain,
        "database": db["counts"],
        "probes": len(prober.answers),
    }
    return {
        "invariants": invariants, "steps": steps, "figures": figures, "timeline": checks.timeline(records, []),
        "p95_by_5s": p95_by_bin(records),
    }  # fmt: skip


def _ratio(during: dict, before: dict) -> float | None:
    if not during["n"] or not before["n"]:
        return None
    return round(during["p95"] / before["p95"], 2)


# ---------------------------------------------------------------------------------------------- output
def report(payload: dict) -> None:
    results = payload["results"]
    named = [(step["step"], step["phases"]) for step in results["steps"]]
    rows = checks.phase_rows(named, "step", "p50/p95 ms", lambda cell: f"{cell['p50']:.0f}/{cell['p95']:.0f}")
    print_table(rows, list(rows[0]) if rows else [])
    print()
    columns = ["step", "seconds", "failed", "probes same/answered", "CPU % before/during"]
    print_table(
        [
            {
                "step": s["step"],
                "seconds": round(s["ended_s"] - s["began_s"], 1),
                "failed": s["failed"] or "",
                "probes same/answered": f"{s['probes_during']['same_ids']}/{s['probes_during']['answered']}",
                "CPU % before/during": f"{s['cpu_busy_pct']['before']}/{s['cpu_busy_pct']['during']}",
            }
            for s in results["steps"]
        ],
        columns,
    )
    figures = results["figures"]
    print(f"\nmessages: {figures['messages']}\nfinal drain: {figures['final_drain']}")
    print("invariants:")
    for name, verdict in results["invariants"].items():
        detail = {k: v for k, v in verdict.items() if k != "ok" and v}
        print(f"  {'ok  ' if verdict['ok'] else 'FAIL'}  {name}  {detail if detail else ''}")


def plot(payload: dict, path: Path) -> Path:
    """Two panels over the run's seconds: requests answered and failed, and memorize's p95 per 5 s; the steps
    shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = payload["results"]
    timeline = results["timeline"]
    figure, (counts, latency) = plt.subplots(2, 1, figsize=(11, 6), dpi=72, sharex=True)
    counts.plot([r["t"] for r in timeline], [r["ok"] for r in timeline], linewidth=0.8, label="answered / s")
    counts.plot([r["t"] for r in timeline], [r["failed"] for r in timeline], linewidth=0.8, label="failed / s")
    cpu = results["cpu_busy_pct"]
    counts.plot([t for t, _ in cpu], [busy / 10 for _, busy in cpu], linewidth=0.8, label="CPU busy / 10 (%)")
    bins = results["p95_by_5s"]
    latency.plot([b["t"] for b in bins], [b["memorize_p95_ms"] for b in bins], marker="o", markersize=2,
                 linewidth=0.8, label="memorize p95 ms")  # fmt: skip
    latency.plot([b["t"] for b in bins], [b["search_p95_ms"] for b in bins], marker="o", markersize=2,
                 linewidth=0.8, label="lightweight p95 ms")  # fmt: skip
    for axes in (counts, latency):
        for step in results["steps"]:
            axes.axvspan(step["began_s"], step["ended_s"], alpha=0.15, color="tab:red")
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8, loc="upper left")
    for step in results["steps"]:
        counts.annotate(step["step"], (step["began_s"], 0), fontsize=7, rotation=90, va="bottom")
    latency.set_xlabel("seconds since the load began")
    counts.set_title("memsys on Citus: online moves under load (steps shaded)", fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


def p95_by_bin(records: list, bin_s: float = 5.0) -> list[dict]:
    rows = []
    last = max((r.started for r in records), default=0)
    for start in range(0, int(last) + 1, int(bin_s)):
        row = {"t": start}
        for op, name in (("memorize", "memorize_p95_ms"), ("retrieve_lightweight", "search_p95_ms")):
            chosen = [
                r.latency_ms for r in records if r.op == op and r.status == 200 and start <= r.started < start + bin_s
            ]
            row[name] = percentiles(chosen)["p95"] if chosen else None
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, help="the cluster's data (default: a new temporary directory)")
    parser.add_argument("--port", type=int, default=9740, help="the coordinator's port; workers on the next three")
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--big", type=int, default=1500, help="messages preloaded for the big tenant")
    parser.add_argument("--small", type=int, default=150, help="messages preloaded for each other tenant")
    parser.add_argument("--settle", type=float, default=30.0, help="quiet seconds after each step")
    parser.add_argument("--warmup", type=float, default=40.0)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--name", default="citus_online")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    config = Config(
        Path(args.dir or tempfile.mkdtemp(prefix="memsys-citus-")), args.port, args.clients, big=args.big,
        small=args.small, settle_s=args.settle, warmup_s=args.warmup, out=args.out,
    )  # fmt: skip
    payload = run(config)
    report(payload)
    path = save(args.name, payload["config"], payload["results"], args.out, {"wall_s": payload["wall_s"]})
    print(f"saved {path}; plot {plot(payload, path.with_suffix('.png'))}")
    return 0 if all(v["ok"] for v in payload["results"]["invariants"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
