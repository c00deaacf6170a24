"""What a soak run measured and whether memsys held: figures from the clients' records and the sampler,
invariants from the database (read as its owner, every tenant at once) once the backlog has drained.

"Formed exactly once": every stored message is processed and points to one MemCell, that MemCell lists it,
no message is listed by two MemCells, and every MemCell has messages pointing to it and memories.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg

from benchmarks.common import percentiles
from benchmarks.soak.faults import PROBE, Injection
from benchmarks.soak.load import OPERATIONS, Load, Record

RSS_BOUND_FACTOR = 2.0
"""The server's RSS may reach this multiple of its warmed-up RSS, no more (a leak grows past it in minutes)."""


@dataclass
class Sample:
    at: float
    serve_rss_kib: int | None
    worker_rss_kib: int | None
    open_jobs: int | None = None
    """Formation jobs waiting or running."""
    oldest_open_s: float | None = None
    """Age of the oldest of them (since it was deferred)."""
    pending_messages: int | None = None


BACKLOG_SQL = """
SELECT count(DISTINCT j.id),
       extract(epoch FROM now() - min(e.at))::float8,
       (SELECT count(*) FROM messages WHERE status = 'pending')
  FROM procrastinate_jobs j
  LEFT JOIN procrastinate_events e ON e.job_id = j.id AND e.type = 'deferred'
 WHERE j.queue_name = 'formation' AND j.task_name IN ('form_stream', 'form_again') AND j.status IN ('todo', 'doing')
"""


# --- figures -------------------------------------------------------------------------------------
def phase_figures(records: Sequence[Record], start: float, end: float) -> dict[str, dict]:
    """Per operation, requests started in [start, end): latency percentiles (ms), answered ok, errors."""
    figures = {}
    for op in OPERATIONS:
        chosen = [r for r in records if r.op == op and start <= r.started < end]
        figures[op] = percentiles([r.latency_ms for r in chosen]) | {
            "ok": sum(1 for r in chosen if r.status == 200),
            "errors": sum(1 for r in chosen if r.status != 200),
        }
    return figures


def phase_rows(named: list[tuple[str, dict]], label: str, heading: str, latency: Callable[[dict], str]) -> list[dict]:
    """The printed table of a run's faults or steps: per name and phase (before, during, after), each operation's
    latency (``heading``, ``latency`` of its figures) and ok/errors."""
    rows = []
    for name, phases in named:
        for phase in ("before", "during", "after"):
            row = {label: name if phase == "before" else "", "phase": phase}
            for op, short in (("memorize", "mem"), ("retrieve_lightweight", "light"), ("retrieve_agentic", "agentic")):
                cell = phases[phase][op]
                row[f"{short} {heading}"] = latency(cell) if cell["n"] else "-"
                row[f"{short} ok/err"] = f"{cell['ok']}/{cell['errors']}"
            rows.append(row)
    return rows


def probe_ok(record: Record, op: str) -> bool:
    return record.op == op and record.status == 200 and (op != "retrieve_agentic" or record.mode == "agentic")


def first_success(records: Sequence[Record], op: str, after: float) -> float | None:
    """Seconds from ``after`` to the end of the first successful ``op`` started at or after it."""
    ends = [r.ended for r in records if r.started >= after and probe_ok(r, op)]
    return round(min(ends) - after, 2) if ends else None


def drained_after(samples: Sequence[Sample], after: float) -> float | None:
    """Seconds from ``after`` until no formation job deferred before it was still waiting or running."""
    for sample in samples:
        if sample.at < after or sample.open_jobs is None:
            continue
        if sample.open_jobs == 0 or (sample.oldest_open_s is not None and sample.oldest_open_s <= sample.at - after):
            return round(sample.at - after, 2)
    return None


def fault_figures(injection: Injection, records: Sequence[Record], samples: Sequence[Sample], phase_s: float) -> dict:
    op = PROBE[injection.name]
    cleared = injection.cleared if injection.cleared is not None else injection.injected
    return {
        "fault": injection.name,
        "injected_at_s": round(injection.injected, 2),
        "cleared_at_s": round(cleared, 2),
        "detail": injection.detail,
        "probe": op,
        "first_success_after_inject_s": first_success(records, op, injection.injected),
        "first_success_after_clear_s": first_success(records, op, cleared),
        "backlog_drained_after_clear_s": drained_after(samples, cleared),
        "repaired_by_harness": injection.repaired,
        "phases": {
            "before": phase_figures(records, injection.injected - phase_s, injection.injected),
            "during": phase_figures(records, injection.injected, cleared),
            "after": phase_figures(records, cleared, cleared + phase_s),
        },
    }


def recovered(fault: dict, recover_s: float) -> bool:
    """Back within ``recover_s`` of the fault's end with no help, and its backlog formed before the run ended."""
    first = fault["first_success_after_clear_s"]
    return (
        fault["repaired_by_harness"] is None
        and first is not None
        and first <= recover_s
        and fault["backlog_drained_after_clear_s"] is not None
    )


def errors_by_kind(records: Sequence[Record]) -> dict[str, int]:
    kinds = Counter(f"{r.op}: {r.kind}" for r in records if r.status != 200)
    return dict(kinds.most_common())


def bad_server_errors(records: Sequence[Record]) -> dict[str, int]:
    """5xx answers other than 503 with the envelope and SERVICE_UNAVAILABLE."""
    bad = Counter(
        f"{r.op}: {r.kind}{'' if r.envelope else ' (no envelope)'}"
        for r in records
        if r.status is not None
        and r.status >= 500
        and not (r.status == 503 and r.envelope and r.kind == "503 SERVICE_UNAVAILABLE")
    )
    return dict(bad)


def errors_outside(records: Sequence[Record], faults: Sequence[dict], recover_s: float) -> dict[str, dict]:
    """Failed requests started outside every fault's disturbance (injection to first success after it ended,
    or the recovery deadline): what went wrong with nothing injected, and when (the first ten)."""
    spans = [(f["injected_at_s"], f["cleared_at_s"] + (f["first_success_after_clear_s"] or recover_s)) for f in faults]
    outside: dict[str, dict] = {}
    for r in records:
        if r.status != 200 and not any(start <= r.started <= end for start, end in spans):
            kind = outside.setdefault(f"{r.op}: {r.kind}", {"count": 0, "at_s": []})
            kind["count"] += 1
            if len(kind["at_s"]) < 10:
                kind["at_s"].append(round(r.started, 1))
    return outside


def timeline(records: Sequence[Record], samples: Sequence[Sample], step_s: float = 1.0) -> list[dict]:
    """Per ``step_s``: requests answered ok and failed (by start time), the server's RSS and the backlog."""
    rows: dict[int, dict] = {}
    for record in records:
        row = rows.setdefault(int(record.started // step_s), {"ok": 0, "failed": 0})
        row["ok" if record.status == 200 else "failed"] += 1
    for sample in samples:
        row = rows.setdefault(int(sample.at // step_s), {"ok": 0, "failed": 0})
        row |= {
            "serve_rss_mib": round(sample.serve_rss_kib / 1024, 1) if sample.serve_rss_kib else None,
            "open_jobs": sample.open_jobs,
            "pending_messages": sample.pending_messages,
        }
    return [{"t": round(slot * step_s, 1), **rows[slot]} for slot in sorted(rows)]


def rss_figures(samples: Sequence[Sample], warm_from: float, warm_to: float) -> dict:
    """The server's RSS (MiB): warmed up (the median over [warm_from, warm_to)), min, max, at the end; the bound."""
    serve = [s.serve_rss_kib for s in samples if s.serve_rss_kib]
    warm = sorted(s.serve_rss_kib for s in samples if s.serve_rss_kib and warm_from <= s.at < warm_to)
    worker = [s.worker_rss_kib for s in samples if s.worker_rss_kib]
    warm_kib = warm[len(warm) // 2] if warm else (serve[0] if serve else 0)

    def mib(kib: float | None) -> float | None:
        return round(kib / 1024, 1) if kib else None

    return {
        "serve_warm_mib": mib(warm_kib),
        "serve_min_mib": mib(min(serve, default=None)),
        "serve_max_mib": mib(max(serve, default=None)),
        "serve_end_mib": mib(serve[-1] if serve else None),
        "serve_bound_mib": mib(warm_kib * RSS_BOUND_FACTOR),
        "worker_max_mib": mib(max(worker, default=None)),
        "samples": len(serve),
    }


# --- the database --------------------------------------------------------------------------------
def database_checks(owner_url: str, load: Load) -> dict:
    """Counts and violations read from the database after the backlog drained."""
    with psycopg.connect(owner_url, autocommit=True) as conn:
        stored = Counter()
        for tenant, group, message_id, count in conn.execute(
            "SELECT tenant_id, group_id, message_id, count(*) FROM messages GROUP BY 1, 2, 3"
        ):
            stored[(tenant, group, message_id)] = count

        def one(sql: str) -> int:
            return conn.execute(sql).fetchone()[0]

        formed = {
            "pending": one("SELECT count(*) FROM messages WHERE status = 'pending'"),
            "processed_without_memcell": one(
                "SELECT count(*) FROM messages WHERE status = 'processed' AND memcell_id IS NULL"
            ),
            "in_two_memcells": one(
                """SELECT count(*) FROM (SELECT 1 FROM memcells c, unnest(c.message_ids) AS m(message_id)
                    GROUP BY c.tenant_id, c.stream_kind, c.stream_id, m.message_id HAVING count(*) > 1) twice"""
            ),
            "not_listed_by_its_memcell": one(
                """SELECT count(*) FROM messages m JOIN memcells c ON c.tenant_id = m.tenant_id AND c.id = m.memcell_id
                    WHERE NOT m.message_id = ANY (c.message_ids)"""
            ),
            "listed_but_pointing_elsewhere": one(
                """SELECT count(*) FROM memcells c CROSS JOIN unnest(c.message_ids) AS l(message_id)
                    LEFT JOIN messages m ON m.tenant_id = c.tenant_id AND m.stream_kind = c.stream_kind
                     AND m.stream_id = c.stream_id AND m.message_id = l.message_id
                    WHERE m.memcell_id IS DISTINCT FROM c.id"""
            ),
            "memcells_without_messages": one(
                """SELECT count(*) FROM memcells c WHERE NOT EXISTS
                    (SELECT 1 FROM messages m WHERE m.tenant_id = c.tenant_id AND m.memcell_id = c.id)"""
            ),
            "memcells_without_memories": one(
                """SELECT count(*) FROM memcells c WHERE NOT EXISTS
                    (SELECT 1 FROM memories m WHERE m.tenant_id = c.tenant_id AND m.memcell_id = c.id)"""
            ),
        }
        counts = {
            "memcells": one("SELECT count(*) FROM memcells"),
            "formed": one("SELECT count(*) FROM messages WHERE memcell_id IS NOT NULL"),
            "memories": dict(conn.execute("SELECT memory_type, count(*) FROM memories GROUP BY 1 ORDER BY 1")),
            "memcells_by_extraction": dict(
                conn.execute("SELECT extraction_mode, count(*) FROM memcells GROUP BY 1 ORDER BY 1")
            ),
            "memcells_by_boundary": dict(
                conn.execute("SELECT boundary_reason, count(*) FROM memcells GROUP BY 1 ORDER BY 1")
            ),
        }
        markers = {t.name: t.marker for t in load.tenants}
        foreign = []
        for table in ("messages", "memories"):
            markers_sql = (
                "SELECT tenant_id, (regexp_matches(content, 'mrk[0-9]+x', 'g'))[1], count(*) FROM {} GROUP BY 1, 2"
            )
            for tenant, marker, count in conn.execute(markers_sql.format(table)):
                if markers.get(tenant) != marker:
                    foreign.append({"table": table, "tenant": tenant, "marker": marker, "rows": count})
    missing = sorted(k for k in load.accepted if stored[k] == 0)
    return {
        "messages": {
            "attempted": len(load.attempted),
            "accepted": len(load.accepted),
            "gave_up": len(load.gave_up),
            "stored": sum(stored.values()),
            "formed": counts.pop("formed"),
        },
        "accepted_missing": missing[:20],
        "accepted_missing_count": len(missing),
        "stored_twice": sum(1 for n in stored.values() if n > 1),
        "stored_never_sent": sum(1 for k in stored if k not in load.attempted),
        "formation": formed,
        "counts": counts,
        "foreign_markers": foreign,
    }


def invariants(
    db: dict, load: Load, faults: list[dict], rss: dict, exits: list[dict], recover_s: float
) -> dict[str, dict]:
    """The soak's: nothing lost, formed twice or leaked (``data_invariants``), the server's memory bounded, and every
    fault recovered from."""
    not_recovered = [f["fault"] for f in faults if not recovered(f, recover_s)]
    return {
        **data_invariants(db, load, exits),
        "rss_bounded": {
            "ok": rss["serve_max_mib"] is not None and rss["serve_max_mib"] <= rss["serve_bound_mib"],
            "max_mib": rss["serve_max_mib"],
            "bound_mib": rss["serve_bound_mib"],
        },
        "every_fault_recovered": {"ok": bool(faults) and not not_recovered, "not_recovered": not_recovered},
    }


def data_invariants(db: dict, load: Load, exits: list[dict]) -> dict[str, dict]:
    """What any run of the load must keep (``database_checks``' reading): every acknowledged message stored once
    and formed once, no tenant's rows in another's answers or tables, no 5xx but enveloped 503s, no process ended
    by itself."""
    bad_5xx = bad_server_errors(load.records)
    return {
        "accepted_stored_once": {
            "ok": db["accepted_missing_count"] == 0 and db["stored_twice"] == 0 and db["stored_never_sent"] == 0,
            "missing": db["accepted_missing_count"],
            "twice": db["stored_twice"],
            "never_sent": db["stored_never_sent"],
        },
        "formed_once": {"ok": not any(db["formation"].values()), **db["formation"]},
        "tenant_isolation": {
            "ok": not load.leaks and not db["foreign_markers"],
            "responses_with_foreign_data": load.leaks[:20],
            "rows_with_foreign_markers": db["foreign_markers"][:20],
        },
        "only_503_with_envelope": {"ok": not bad_5xx, "other_5xx": bad_5xx},
        "processes_stayed_up": {"ok": not exits, "exited_by_themselves": exits},
    }
