"""memsys on Citus against one PostgreSQL node, same data, same machine, one run.

    python -m benchmarks.citus [--tenants 8] [--per-tenant 5000] [--queries 30] [--dir DIR]

Two databases on PostgreSQL 15 with the same binaries and settings: a Citus cluster (``deploy/citus/up.sh``:
a coordinator and two workers, the tables sharded by tenant) and a plain single node (no Citus), both migrated
by memsys's migrations. Each gets the same corpus (benchmarks/scale_corpus: realistic sentences and vectors),
split over ``--tenants`` tenants, and then:

* ingest: COPY of each tenant's memories through the coordinator (indexes and BM25 triggers in place, as memsys
  writes), and formation-shaped writes: transactions of 10 memories, one tenant each, from 4 writers at once;
* memorize through HTTP: ``memsys serve`` (offline formation in its process) on each database, messages sent by 4
  clients to 8 groups, then the time until every message is formed;
* retrieval as the service runs it (its role, one tenant per transaction, the rrf statement of
  sql/retrieval.sql): latency per query within a tenant, with and without a group filter;
* recall@20 of the vector leg against exact search (no index) under the same filters, and how many of the rrf
  top 20 the two databases share.

The figures are saved to benchmarks/results/citus.json. The nodes stay under DIR (default a temporary
directory) and are stopped at the end. Everything runs on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from sqlalchemy import create_engine

from app.db import migrate
from app.db.embedded import sqlalchemy_url
from app.db.migrate import service_role_for
from app.db.roles import quoted
from app.retrieval import repository
from app.settings import Settings
from app.tenancy.scope import check_tenant_id
from benchmarks import scale_corpus
from benchmarks.common import ROOT, memsys_server, percentiles, print_table, save
from benchmarks.scale import cached, configure, exact_ids, make_queries, parameters_for

PG_BIN = Path("/usr/lib/postgresql/15/bin")
UP, DOWN = ROOT / "deploy" / "citus" / "up.sh", ROOT / "deploy" / "citus" / "down.sh"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--per-tenant", type=int, default=5000, help="memories per tenant (default 5000)")
    parser.add_argument("--queries", type=int, default=30, help="queries per tenant and filter")
    parser.add_argument("--anchors", type=int, default=1000)
    parser.add_argument("--writes", type=int, default=400, help="formation-shaped transactions (10 memories each)")
    parser.add_argument("--messages", type=int, default=400, help="memorize requests through HTTP")
    parser.add_argument("--port", type=int, default=9720, help="the coordinator's; workers +1, +2; single node +3")
    parser.add_argument("--dir", type=Path, help="where the nodes' data goes (default: a temporary directory)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--name", default="citus")
    parser.add_argument("--out", type=Path, help="results directory (default benchmarks/results)")
    return parser.parse_args()


# ---------------------------------------------------------------------------------------------- the databases
def start_citus(directory: Path, port: int) -> str:
    env = {**os.environ, "MEMSYS_CITUS_PORT": str(port)}
    output = subprocess.run(["bash", str(UP), str(directory)], env=env, check=True, capture_output=True, text=True)
    return output.stdout.strip().splitlines()[-1]


def start_single(directory: Path, port: int) -> str:
    """Plain PostgreSQL 15 (Debian's, with the pgvector up.sh built), no Citus, the same settings."""
    data = directory / "single"

    def as_postgres(*command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True)

    if not (data / "PG_VERSION").exists():
        as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{data}'\n")
            conf.write("max_connections = 300\n")
    if subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(data), "status"],
                      capture_output=True).returncode != 0:  # fmt: skip
        as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(directory / "single.log"), "-w", "start")
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'memsys'").fetchone():
            conn.execute("CREATE DATABASE memsys")
    return f"postgresql://postgres@127.0.0.1:{port}/memsys"


def stop_all(directory: Path, port: int) -> None:
    subprocess.run(["bash", str(DOWN), str(directory / "cluster")], env={**os.environ, "MEMSYS_CITUS_PORT": str(port)},
                   capture_output=True)  # fmt: skip
    if (directory / "single" / "postmaster.pid").exists():
        subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(directory / "single"),
                        "-m", "fast", "stop"], capture_output=True)  # fmt: skip


def tenant_name(i: int) -> str:
    return check_tenant_id(f"tenant{i}")


# ---------------------------------------------------------------------------------------------- ingest
def prepare(url: str, tenants: int) -> dict[str, object]:
    """Migrate; one tenant row and one MemCell per tenant (the memories' provenance)."""
    migrate.upgrade(url, 384)
    memcells = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for i in range(tenants):
            tenant = tenant_name(i)
            conn.execute("INSERT INTO tenants (tenant_id) VALUES (%s) ON CONFLICT DO NOTHING", (tenant,))
            with conn.transaction():
                conn.execute(f"SET LOCAL memsys.tenant_id = '{tenant}'")
                memcells[tenant] = conn.execute(
                    "INSERT INTO memcells (stream_kind, stream_id, group_id, start_time, end_time, message_ids, "
                    "participants, boundary_reason, extraction_mode) VALUES ('group', 'bench', 'bench', now(), "
                    "now(), '{}', '{}', 'benchmark', 'offline') RETURNING id"
                ).fetchone()[0]
    return memcells


def copy_in(url: str, corpus: scale_corpus.Corpus, memcells: dict, per_tenant: int, now) -> dict:
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        for i, (tenant, memcell_id) in enumerate(memcells.items()):
            with conn.transaction():
                conn.execute(f"SET LOCAL memsys.tenant_id = '{tenant}'")
                columns = scale_corpus.COPY_COLUMNS
                with conn.cursor().copy(f"COPY memories ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy:
                    copy.set_types(scale_corpus.COPY_TYPES)
                    for row in scale_corpus.rows(corpus, i * per_tenant, (i + 1) * per_tenant, memcell_id, now):
                        copy.write_row(row)
        conn.execute("VACUUM ANALYZE memories")
    seconds = time.perf_counter() - started
    rows = per_tenant * len(memcells)
    return {"rows": rows, "seconds": round(seconds, 1), "rows_per_s": round(rows / seconds, 1)}


def formation_writes(url: str, corpus: scale_corpus.Corpus, memcells: dict, count: int, now, writers: int = 4) -> dict:
    """``count`` transactions of 10 memories each (a MemCell's worth), one tenant per transaction, from
    ``writers`` connections at once, as the service's role."""
    service_url = url.replace("postgresql://postgres@", f"postgresql://{service_role_for(url, None)}@")
    tenants = list(memcells)
    latencies: list[float] = []
    lock = threading.Lock()
    values = ", ".join(["(" + ", ".join(["%s"] * len(scale_corpus.COPY_TYPES)) + ")"] * 10)

    def writer(w: int) -> None:
        with psycopg.connect(service_url) as conn:
            register_vector(conn)
            for n in range(w, count, writers):
                tenant = tenants[n % len(tenants)]
                batch = list(scale_corpus.rows(corpus, 10_000_000 + n * 10, 10_000_000 + n * 10 + 10,
                                               memcells[tenant], now))  # fmt: skip
                began = time.perf_counter()
                with conn.transaction():  # one INSERT statement, as formation writes a MemCell's memories
                    conn.execute(f"SET LOCAL memsys.tenant_id = '{tenant}'")
                    conn.execute(f"INSERT INTO memories ({scale_corpus.COPY_COLUMNS}) VALUES {values}",
                                 [value for row in batch for value in row])  # fmt: skip
                with lock:
                    latencies.append((time.perf_counter() - began) * 1000)

    started = time.perf_counter()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    return {
        "transactions": count,
        "writers": writers,
        "rows_per_s": round(count * 10 / seconds, 1),
        "transaction_ms": percentiles(latencies),
    }


def memorize(url: str, messages: int, clients: int = 4, groups: int = 8) -> dict:
    """``messages`` memorize requests to a ``memsys serve`` on ``url`` (the tenant ``default``, no key), then
    the wait until the server's formation worker has formed every one (offline formation, no LLM)."""
    env = {"MEMSYS_DATABASE_URL": url, "MEMSYS_MIGRATE_ON_START": "false", "MEMSYS_LLM_API_KEY": ""}
    latencies: list[float] = []
    with memsys_server(env=env) as base:

        async def send() -> None:
            semaphore = asyncio.Semaphore(clients)
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:

                async def one(i: int) -> None:
                    body = {
                        "message_id": f"bench_{i}", "create_time": f"2025-01-15T10:{i // 60 % 60:02d}:{i % 60:02d}Z",
                        "sender": f"user_{i % 5}", "content": f"Message {i}: the budget review moves to Friday.",
                        "group_id": f"group_{i % groups}",
                    }  # fmt: skip
                    async with semaphore:
                        began = time.perf_counter()
                        response = await client.post("/api/v3/agentic/memorize", json=body)
                        latencies.append((time.perf_counter() - began) * 1000)
                    response.raise_for_status()

                await asyncio.gather(*(one(i) for i in range(messages)))
                for g in range(groups):  # the last episode of each group is formed at once
                    (await client.post("/api/v3/agentic/flush", json={"group_id": f"group_{g}"})).raise_for_status()

        started = time.perf_counter()
        asyncio.run(send())
        accepted_s = time.perf_counter() - started
        with psycopg.connect(url, autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM messages WHERE status = 'pending'").fetchone()[0]:
                if time.perf_counter() - started > 600:
                    raise RuntimeError("formation did not drain in 10 minutes")
                time.sleep(0.5)
        formed_s = time.perf_counter() - started
    return {
        "messages": messages,
        "clients": clients,
        "memorize_ms": percentiles(latencies),
        "accepted_per_s": round(messages / accepted_s, 1),
        "formed_per_s": round(messages / formed_s, 1),
    }


# ---------------------------------------------------------------------------------------------- retrieval
def search(conn, settings: Settings, tenant: str, q, grouped: bool, now, mode: str = "rrf") -> list[dict]:
    """The service's transaction: its role, its tenant, configure_search, then hybrid_search."""
    with conn.begin():
        role = service_role_for(str(conn.engine.url), None)
        conn.exec_driver_sql(f"SET LOCAL ROLE {quoted(role)}; SET LOCAL memsys.tenant_id = '{tenant}'")
        configure(conn, settings, mode, 20, q.memory_type, tenant)
        parameters = parameters_for(settings, q, grouped, now, mode, 20, tenant)
        return [dict(row) for row in conn.execute(repository.hybrid_statement(parameters), parameters).mappings()]


def retrieval(url: str, settings: Settings, queries: dict, now) -> tuple[list[dict], dict]:
    """Latency and recall per filter; the rrf top 20 of every query, as the corpus's message ids (to compare the
    two databases, whose memory ids differ)."""
    engine = create_engine(sqlalchemy_url(url))
    rows, tops = [], {}
    try:
        with engine.connect() as conn:
            for grouped in (False, True):
                for tenant, qs in queries.items():  # warm-up
                    for q in qs[:3]:
                        search(conn, settings, tenant, q, grouped, now)
                latencies, recalls = [], []
                for tenant, qs in queries.items():
                    for n, q in enumerate(qs):
                        began = time.perf_counter()
                        found = search(conn, settings, tenant, q, grouped, now)
                        latencies.append((time.perf_counter() - began) * 1000)
                        tops[(tenant, n, grouped)] = [row["source_message_ids"][0] for row in found]
                        truth = exact_ids(conn, q, grouped, now, tenant)
                        if truth:
                            leg = [row["id"] for row in search(conn, settings, tenant, q, grouped, now, "embedding")]
                            recalls.append(len(set(leg) & set(truth)) / len(truth))
                rows.append(
                    {
                        "filter": "tenant + group_id" if grouped else "tenant",
                        "rrf_ms": percentiles(latencies),
                        "vector_recall_at_20": round(float(np.mean(recalls)), 4),
                        "vector_recall_min": round(float(np.min(recalls)), 4),
                    }
                )
    finally:
        engine.dispose()
    return rows, tops


def corpus_and_queries(args: argparse.Namespace, prefix: str) -> tuple[Path, scale_corpus.Corpus, dict, dict]:
    """The nodes' directory (``--dir`` or a new one), the corpus of ``--tenants`` × ``--per-tenant`` memories and
    ``--queries`` queries per tenant (``--anchors``, ``--seed``), and its users and groups."""
    directory = args.dir or Path(tempfile.mkdtemp(prefix=prefix))
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o777)  # the nodes run as postgres
    from app.providers.embeddings import create_embedder

    embedder = create_embedder(Settings())
    users, groups = max(50, args.per_tenant // 50), max(20, args.per_tenant // 200)
    corpus = scale_corpus.build(
        args.tenants * args.per_tenant, users, groups, args.anchors, args.seed, cached(embedder, directory)
    )
    queries = {
        tenant_name(i): make_queries(corpus, args.queries, embedder.embed_sync, args.seed + i)
        for i in range(args.tenants)
    }
    return directory, corpus, queries, {"users": users, "groups": groups}


def main() -> None:
    args = parse_args()
    settings = Settings()
    directory, corpus, queries, shape = corpus_and_queries(args, "memsys-citus-bench-")
    config = {**{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, **shape,
              "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    print(f"citus benchmark: {config}")
    now = scale_corpus.now_utc()
    results: dict[str, dict] = {}
    tops: dict[str, dict] = {}
    try:
        began = time.perf_counter()
        urls = {"citus (coordinator + 2 workers)": start_citus(directory / "cluster", args.port)}
        results["cluster_up_s"] = round(time.perf_counter() - began, 1)
        urls["single node"] = start_single(directory, args.port + 3)
        for name, url in urls.items():
            print(f"{name}: {url}")
            memcells = prepare(url, args.tenants)
            copy = copy_in(url, corpus, memcells, args.per_tenant, now)
            print(f"  COPY {copy['rows']:,} memories: {copy['rows_per_s']:,} rows/s")
            writes = formation_writes(url, corpus, memcells, args.writes, now)
            print(f"  formation-shaped writes: {writes['rows_per_s']:,} rows/s")
            rows, tops[name] = retrieval(url, settings, queries, now)
            intake = memorize(url, args.messages)
            print(f"  memorize: p50 {intake['memorize_ms']['p50']} ms, formed {intake['formed_per_s']} messages/s")
            results[name] = {"copy": copy, "formation_writes": writes, "retrieval": rows, "memorize": intake}
    finally:
        stop_all(directory, args.port)
    names = [n for n in results if isinstance(results[n], dict)]
    shared = [
        len(set(tops[names[0]][key]) & set(tops[names[1]][key])) / max(1, len(tops[names[1]][key]))
        for key in tops[names[1]]
    ]
    results["rrf_top20_shared"] = round(float(np.mean(shared)), 4)
    table = []
    for name in names:
        for row in results[name]["retrieval"]:
            table.append(
                {
                    "database": name, "filter": row["filter"], "rrf p50 ms": row["rrf_ms"]["p50"],
                    "rrf p95 ms": row["rrf_ms"]["p95"], "vector recall@20": row["vector_recall_at_20"],
                    "COPY rows/s": results[name]["copy"]["rows_per_s"],
                    "10-row txn rows/s": results[name]["formation_writes"]["rows_per_s"],
                    "memorize p50 ms": results[name]["memorize"]["memorize_ms"]["p50"],
                    "formed msg/s": results[name]["memorize"]["formed_per_s"],
                }
            )  # fmt: skip
    print_table(table, list(table[0]))
    print(f"rrf top 20 shared by the two databases: {results['rrf_top20_shared']:.1%}")
    print(f"saved {save(args.name, config, results, out_dir=args.out)}")


if __name__ == "__main__":
    main()
