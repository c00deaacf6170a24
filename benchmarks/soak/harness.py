"""Soak and fault injection: memsys under a steady mixed load while its dependencies fail, one after another.

    python -m benchmarks.soak [--minutes 10] [--clients 32] [--tenants 4] [--short] [--out FILE]

Starts ``memsys serve`` (``MEMSYS_WORKERS=0``) and a ``memsys worker`` on a fresh embedded PostgreSQL, with
OpenAI-compatible test servers on 127.0.0.1 as LLM and embedder, creates a key per tenant, and runs
``--clients`` clients (memorize 70 %, lightweight retrieval 25 %, agentic retrieval 5 %, each client
``--rate`` requests a second) for ``--minutes``. Meanwhile it injects every fault of
``benchmarks.soak.faults.FAULTS`` on a schedule, each for a window followed by quiet time: PostgreSQL
stopped (fast, immediate, ``kill -9`` of the postmaster), ``kill -9`` of the worker and of the server
(started again by the harness), the LLM slow, answering garbage, gone; the embedder failing; every free
PostgreSQL connection held by a client; a burst of ten times the rate. ``--short`` runs every fault once in
about two minutes (the CI test). Then it flushes every group, waits for the formation backlog to drain and
checks the invariants in the database (``benchmarks.soak.checks``). Figures go to ``--out`` as JSON
(default ``benchmarks/results/soak.json``, ``soak_short.json`` with ``--short``); the processes' logs stay
in the run directory.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg

from benchmarks.common import RESULTS_DIR, free_port, print_table, save
from benchmarks.fake_llm import FakeLLM
from benchmarks.soak import checks
from benchmarks.soak.faults import FAULTS, Faults, Injection
from benchmarks.soak.load import GIVE_UP_S, Load, Tenant
from benchmarks.soak.memsys import Memsys, answer, process_env


@dataclass
class Config:
    minutes: float = 10.0
    clients: int = 32
    tenants: int = 4
    groups: int = 6
    """Groups per tenant (the same names in every tenant: only the tenant tells them apart)."""
    rate: float = 1.0
    """Requests a second per client."""
    short: bool = False
    out: Path = RESULTS_DIR / "soak.json"
    run_dir: Path | None = None
    worker_concurrency: int = 2
    llm_timeout_s: float = 5.0
    warmup_s: float = 30.0
    window_s: float = 15.0
    """How long a fault lasts (a killed process stays dead, the LLM stays slow...)."""
    slot_s: float = 49.0
    """From one fault's injection to the next's (window, then quiet time to recover)."""
    recover_s: float = 60.0
    """A fault whose service is not back this long after the window ended did not recover."""
    drain_s: float = 300.0
    faults: tuple[str, ...] = FAULTS

    @property
    def duration_s(self) -> float:
        return self.minutes * 60

    @property
    def phase_s(self) -> float:
        """The length of the "before" and "after" phases of each fault."""
        return min(self.slot_s - self.window_s, 30.0)


def plan(short: bool, minutes: float, **given: object) -> Config:
    """The schedule: ``--short`` fits every fault once in about two minutes; a full run spreads rounds of
    every fault across ``minutes`` (one round in ten minutes, about 49 s per fault)."""
    if short:
        config = Config(
            minutes=1.6, short=True, out=RESULTS_DIR / "soak_short.json", llm_timeout_s=2.0, warmup_s=6.0,
            window_s=3.0, slot_s=8.0, recover_s=20.0, drain_s=90.0,
        )  # fmt: skip
        return dataclasses.replace(config, **{k: v for k, v in given.items() if v is not None})
    config = dataclasses.replace(Config(minutes=minutes), **{k: v for k, v in given.items() if v is not None})
    available = config.duration_s - 2 * config.warmup_s
    rounds = max(1, round(available / (len(FAULTS) * 50)))
    faults = FAULTS * rounds
    slot_s = round(available / len(faults), 1)
    return dataclasses.replace(config, faults=faults, slot_s=slot_s, window_s=min(config.window_s, slot_s / 3))


# --- the run -------------------------------------------------------------------------------------
def run(config: Config) -> dict:
    """One soak run: start everything, load, inject, drain, check; always stop what was started. The saved
    payload (``results`` holds ``invariants``, ``faults``, ``figures``)."""
    run_dir = Path(config.run_dir or tempfile.mkdtemp(prefix="memsys-soak-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    llm, embedder = FakeLLM().start(), FakeLLM().start()
    for fake in (llm, embedder):
        fake.record = False  # a long run would keep every prompt
    llm.handler = answer
    env = process_env(llm.base_url, embedder.base_url, llm_timeout_s=config.llm_timeout_s, quick=config.short)
    memsys = Memsys(run_dir, env, free_port(), config.worker_concurrency)
    started = time.monotonic()
    try:
        results = asyncio.run(_drive(config, memsys, llm, embedder))
    finally:
        memsys.stop()
        llm.stop()
        embedder.stop()
    results["figures"]["log_errors"] = memsys.log_errors()
    results["figures"]["process_starts"] = dict(memsys.starts)
    results["figures"]["stopped_with_sigterm"] = memsys.stopped
    shutil.rmtree(memsys.data_dir, ignore_errors=True)
    settings = {k: v for k, v in env.items() if "URL" not in k}
    return {
        "config": {**_jsonable(config), "memsys_env": settings, "run_dir": str(run_dir)},
        "results": results,
        "wall_s": round(time.monotonic() - started, 1),
    }


async def _drive(config: Config, memsys: Memsys, llm: FakeLLM, embedder: FakeLLM) -> dict:
    owner_url, tenants = await _start(config, memsys)
    async with Load(memsys.base_url, tenants, config.rate, timeout_s=max(30.0, 6 * config.llm_timeout_s)) as load:
        memsys.clock = load.now
        samples: list[checks.Sample] = []
        injections: list[Injection] = []

        def supervise() -> None:
            """A process that ended by itself is started again, as a supervisor would; it stays recorded (an
            invariant fails) and the fault last injected is marked as not recovered by memsys alone."""
            for ended in memsys.notice_exits():
                memsys.start(ended["process"])
                ended["started_again_by_harness"] = True
                if injections:
                    note = f"memsys {ended['process']} exited by itself (code {ended['returncode']}); started again"
                    injections[-1].repaired = "; ".join(filter(None, (injections[-1].repaired, note)))

        sampling = asyncio.create_task(_sample(memsys, owner_url, load, samples, supervise))
        stop = asyncio.Event()
        clients = load.clients(config.clients, stop)
        faults = Faults(
            memsys, llm, embedder, load, owner_url,
            slow_s=config.llm_timeout_s + 3, burst_clients=config.clients * 9,
        )  # fmt: skip
        try:
            await _schedule(config, load, faults, injections)
        except BaseException:
            for task in [*clients, *faults.background]:
                task.cancel()
            raise
        finally:
            stop.set()
            await faults.restore_all()
        load_s = load.now()
        _, late = await asyncio.wait([*clients, *faults.background], timeout=GIVE_UP_S + 10)
        for task in late:
            task.cancel()
        drain = await drain_backlog(load, owner_url, config.drain_s)
        sampling.cancel()
        # The drain's last reading is the run's last sample: a backlog that drained between the sampler's
        # one-second ticks still counts as drained for the fault injected last.
        samples.append(
            checks.Sample(
                drain.pop("read_at"), memsys.rss_kib("serve"), memsys.rss_kib("worker"), *drain.pop("backlog")
            )
        )
        memsys.notice_exits()
        db = await asyncio.to_thread(checks.database_checks, owner_url, load)
    return _results(config, load, load_s, samples, injections, drain, db, memsys.exits)


async def _start(config: Config, memsys: Memsys) -> tuple[str, list[Tenant]]:
    """The embedded PostgreSQL (its owner's URL), a key per tenant, then serve and the worker."""
    owner_url = await asyncio.to_thread(memsys.owner_url)
    names = [f"t{i}" for i in range(config.tenants)]
    keys = [await asyncio.to_thread(memsys.create_key, names[0])]  # the first one migrates
    keys += await asyncio.gather(*(asyncio.to_thread(memsys.create_key, name) for name in names[1:]))
    groups = tuple(f"g{i}" for i in range(config.groups))
    tenants = [Tenant(name, key, f"mrk{i}x", groups) for i, (name, key) in enumerate(zip(names, keys, strict=True))]
    memsys.start("serve")
    memsys.start("worker")
    await asyncio.to_thread(memsys.wait_serving)
    return owner_url, tenants


def _results(
    config: Config,
    load: Load,
    load_s: float,
    samples: list[checks.Sample],
    injections: list[Injection],
    drain: dict,
    db: dict,
    exits: list[dict],
) -> dict:
    faults = [checks.fault_figures(i, load.records, samples, config.phase_s) for i in injections]
    for row in faults:
        row["recovered"] = checks.recovered(row, config.recover_s)
    rss = checks.rss_figures(samples, config.warmup_s / 2, config.warmup_s)
    records = load.records
    figures = {
        "load_s": round(load_s, 1),
        "requests": len(records),
        "served": sum(1 for r in records if r.status == 200),
        "served_by_operation": {
            op: sum(1 for r in records if r.op == op and r.status == 200) for op in checks.OPERATIONS
        },
        "overall": checks.phase_figures(records, 0, math.inf),
        "errors_by_kind": checks.errors_by_kind(records),
        "errors_outside_faults": checks.errors_outside(records, faults, config.recover_s),
        "unexpected_exits": exits,
        "agentic_fallbacks": sum(1 for r in records if r.mode == "agentic_fallback"),
        "messages": db["messages"],
        "final_drain": drain,
        "database": db["counts"],
        "rss": rss,
        "backlog_max": {
            "open_jobs": max((s.open_jobs or 0 for s in samples), default=0),
            "pending_messages": max((s.pending_messages or 0 for s in samples), default=0),
        },
    }
    return {
        "invariants": checks.invariants(db, load, faults, rss, exits, config.recover_s),
        "faults": faults,
        "figures": figures,
        "timeline": checks.timeline(records, samples),
    }


async def _schedule(config: Config, load: Load, faults: Faults, injections: list[Injection]) -> None:
    """Warm up, then each fault in its slot: inject, hold for the window, clear, wait until the service is
    back (or the deadline: then the harness repairs and the fault counts as not recovered)."""
    await _until(load, config.warmup_s)
    for number, name in enumerate(config.faults):
        await _until(load, config.warmup_s + number * config.slot_s)
        injection = await faults.inject(name)
        injections.append(injection)
        print(f"[{load.now():6.1f}s] {name} injected {injection.detail}", flush=True)
        await asyncio.sleep(config.window_s)
        await faults.clear(injection)
        back = await _wait_back(load, injection, config.recover_s)
        if back is None:
            await faults.repair(injection)
        print(
            f"[{load.now():6.1f}s] {name} cleared; "
            + (f"back after {back:.1f}s" if back is not None else f"NOT back; {injection.repaired}"),
            flush=True,
        )
    await _until(load, config.duration_s)


async def _wait_back(load: Load, injection: Injection, deadline_s: float) -> float | None:
    op = checks.PROBE[injection.name]
    since = injection.cleared
    while load.now() < since + deadline_s:
        if any(r.started >= since and checks.probe_ok(r, op) for r in reversed(load.records[-2000:])):
            return load.now() - since
        await asyncio.sleep(0.25)
    return None


async def _until(load: Load, at_s: float) -> None:
    if at_s > load.now():
        await asyncio.sleep(at_s - load.now())


async def _sample(
    memsys: Memsys, owner_url: str, load: Load, samples: list[checks.Sample], supervise: Callable[[], None]
) -> None:
    """Every second: processes that ended by themselves, the server's and the worker's RSS, and the formation
    backlog (when the database answers)."""
    conn: psycopg.AsyncConnection | None = None
    while True:
        supervise()
        sample = checks.Sample(load.now(), memsys.rss_kib("serve"), memsys.rss_kib("worker"))
        try:
            if conn is None or conn.closed:
                conn = await psycopg.AsyncConnection.connect(owner_url, autocommit=True, connect_timeout=2)
            row = await asyncio.wait_for(_backlog(conn), 3)
            sample.open_jobs, sample.oldest_open_s, sample.pending_messages = row
        except (psycopg.Error, OSError, TimeoutError):
            if conn is not None:
                await conn.close()
            conn = None
        except asyncio.CancelledError:
            if conn is not None:
                await conn.close()
            raise
        samples.append(sample)
        await asyncio.sleep(1.0)


async def _backlog(conn: psycopg.AsyncConnection) -> tuple:
    return await (await conn.execute(checks.BACKLOG_SQL)).fetchone()


async def drain_backlog(load: Load, owner_url: str, limit_s: float, groups: tuple[str, ...] | None = None) -> dict:
    """Flush each tenant's groups (``groups``: these in every tenant instead; closing their open episodes, each
    retried until answered), then wait until no message is pending and no formation job is open: at most
    ``limit_s`` in all."""
    began = load.now()
    deadline = began + limit_s

    async def flush(client: httpx.AsyncClient, tenant: Tenant, group: str) -> str:
        headers = {"Authorization": f"Bearer {tenant.key}"}
        answer = "not answered"
        while load.now() < deadline:
            try:
                response = await client.post("/api/v3/agentic/flush", json={"group_id": group}, headers=headers)
            except httpx.TransportError as exc:
                answer = type(exc).__name__
            else:
                if response.status_code == 200:
                    return response.json()["result"]["status_info"]
                answer = str(response.status_code)
            await asyncio.sleep(1.0)
        return answer

    async with httpx.AsyncClient(base_url=load.base_url, timeout=60) as client:
        answers = await asyncio.gather(*(flush(client, t, g) for t in load.tenants for g in groups or t.groups))
    flushed_s = load.now() - began
    while True:
        error = None
        try:
            async with await psycopg.AsyncConnection.connect(owner_url, autocommit=True, connect_timeout=2) as conn:
                backlog = tuple(await _backlog(conn))
        except psycopg.Error as exc:
            backlog, error = (None, None, None), type(exc).__name__
        read_at = load.now()
        drained = backlog[0] == 0 and backlog[2] == 0
        if drained or read_at >= deadline:
            break
        await asyncio.sleep(0.5)
    return {
        "flush_answers": dict(Counter(answers)),
        "flushed_s": round(flushed_s, 1),
        "drained": drained,
        "drained_s": round(load.now() - began, 1),
        "left": {"error": error} if error else {"open_jobs": backlog[0], "pending_messages": backlog[2]},
        "backlog": backlog,
        "read_at": read_at,
    }


# --- output --------------------------------------------------------------------------------------
def report(payload: dict) -> None:
    results = payload["results"]
    figures = results["figures"]
    print(f"\nsoak: {figures['requests']} requests in {figures['load_s']} s, {figures['served']} served")
    named = [(fault["fault"], fault["phases"]) for fault in results["faults"]]
    rows = checks.phase_rows(named, "fault", "p50/p95/p99 ms", _triple)
    print_table(rows, list(rows[0]) if rows else [])
    print()
    columns = ["fault", "first ok after inject s", "first ok after clear s", "backlog drained s", "recovered"]
    print_table(
        [
            {
                "fault": f["fault"],
                "first ok after inject s": f["first_success_after_inject_s"],
                "first ok after clear s": f["first_success_after_clear_s"],
                "backlog drained s": f["backlog_drained_after_clear_s"],
                "recovered": f["recovered"],
                "harness repair": f["repaired_by_harness"] or "",
            }
            for f in results["faults"]
        ],
        [*columns, "harness repair"],
    )
    print(f"\nmessages: {figures['messages']}")
    print(f"final drain: {figures['final_drain']}")
    print(f"rss: {figures['rss']}")
    print("errors by kind:")
    for kind, count in figures["errors_by_kind"].items():
        print(f"  {count:6d}  {kind}")
    print("invariants:")
    for name, verdict in results["invariants"].items():
        detail = {k: v for k, v in verdict.items() if k != "ok" and v}
        print(f"  {'ok  ' if verdict['ok'] else 'FAIL'}  {name}  {detail if detail else ''}")


def _triple(cell: dict) -> str:
    return f"{cell['p50']:.0f}/{cell['p95']:.0f}/{cell['p99']:.0f}"


def _jsonable(config: Config) -> dict:
    return {
        k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v for k, v in vars(config).items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the load runs (default 10)")
    parser.add_argument("--clients", type=int, default=None, help="concurrent clients (default 32)")
    parser.add_argument("--tenants", type=int, default=None, help="tenants, each with a key (default 4)")
    parser.add_argument("--rate", type=float, default=None, help="requests a second per client (default 1)")
    parser.add_argument("--short", action="store_true", help="every fault once in about two minutes")
    parser.add_argument("--out", type=Path, default=None, help="the JSON file (default benchmarks/results/soak.json)")
    parser.add_argument("--run-dir", type=Path, default=None, help="data and logs (default: a new temporary dir)")
    args = parser.parse_args(argv)

    # A SIGTERM ends the run like a Ctrl-C: the processes started are stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    config = plan(
        args.short, args.minutes, clients=args.clients, tenants=args.tenants, rate=args.rate, out=args.out,
        run_dir=args.run_dir,
    )  # fmt: skip
    payload = run(config)
    report(payload)
    extra = {"wall_s": payload["wall_s"]}
    path = save(config.out.stem, payload["config"], payload["results"], config.out.parent, extra)
    print(f"saved {path}; logs in {payload['config']['run_dir']}")
    return 0 if all(v["ok"] for v in payload["results"]["invariants"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
