"""``memsys import`` checks a dump as the API checks a request (issue 27): a section for a tenant that neither the
header nor ``--tenant`` names is refused; a row with an id, size or type the API would refuse, a NUL, a lone
surrogate or a deeply nested line is "line N: why" with exit 2, no traceback and nothing written; a row the
database refuses names its lines and constraint, never the row. The real command on the test database."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from tests.conftest import run_memsys as memsys

# Real processes started, killed and restarted: pytest -m processes (.ci/run), kept out of the README's run.
pytestmark = pytest.mark.processes

SECRET = "the safe combination is 31-17-42"  # row contents: never in the command's output


def _message(number: int, **changes) -> dict:
    row = {
        "type": "message",
        "tenant_id": "acme",
        "stream_kind": "group",
        "stream_id": "group_1",
        "group_id": "group_1",
        "message_id": f"m{number}",
        "create_time": "2025-03-01T10:00:00+00:00",
        "sender": "alice",
        "sender_name": "Alice",
        "content": f"{SECRET} ({number})",
        "status": "pending",
        "received_at": "2025-03-01T10:00:01+00:00",
    }
    return {**row, **changes}


def _profile(**changes) -> dict:
    row = {
        "type": "profile",
        "tenant_id": "acme",
        "id": "6f1c1c9e-5f0a-4a53-9d51-0d6c8c9f0b11",
        "user_id": "alice",
        "group_id": "group_1",
        "version": 1,
        "profile": {"note": SECRET},
        "source": "llm",
        "memcell_id": None,
        "created_at": "2025-03-01T10:05:00+00:00",
    }
    return {**row, **changes}


def _dump(rows: list[dict], *, header_tenant: str | None = None) -> list[str]:
    """The lines of a dump holding ``rows`` (each with its ``tenant_id``), one section per tenant in order."""
    header = {
        "type": "header", "format": "memsys.dump", "version": 1, "exported_at": "2025-03-02T00:00:00+00:00",
        "embedding": {"model": "local:all-MiniLM-L6-v2", "dimensions": 384}, "tenant": header_tenant, "user": None,
    }  # fmt: skip
    lines = [json.dumps(header)]
    tenant = None
    for row in rows:
        if row["tenant_id"] != tenant:
            tenant = row["tenant_id"]
            lines.append(json.dumps({"type": "tenant", "tenant_id": tenant}))
        lines.append(json.dumps(row))
    lines.append(json.dumps({"type": "end", "rows": len(rows)}))
    return lines


def _nested(levels: int) -> list:
    value: list = [SECRET]
    for _ in range(levels):
        value = [value]
    return value


def _write(tmp_path: Path, lines: list[str], name: str = "dump.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    return path


def _stored_messages(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT count(*) FROM messages").fetchone()[0]


def _refused(database_url: str, path: Path, *args: str) -> str:
    done = memsys(database_url, "import", str(path), *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and SECRET not in done.stderr, done.stderr
    assert "nothing was imported" in done.stderr or "--tenant" in done.stderr, done.stderr
    assert _stored_messages(database_url) == 0
    return done.stderr


def test_a_good_dump_imports_and_each_bad_line_is_named(database_url: str, tmp_path: Path) -> None:
    good = [_message(1), _message(2)]
    # Line 3 is the first row (header, tenant line, row); each case breaks it (or the whole line) one way.
    cases = {
        "nul": (json.dumps(_message(1, content=f"{SECRET}\u0000")), "line 3: content: must not contain a NUL"),
        "raw_nul_byte": (json.dumps(_message(1))[:-2] + '\x00"}', "line 3: not JSON"),
        "surrogate_key": (
            json.dumps(_message(1, refer_list={"\ud800": SECRET})),
            "line 3: refer_list: a key must not contain a lone",
        ),
        "deep": (json.dumps(_profile(profile={"a": _nested(40)})), "line 3: nested more than 32 levels deep"),
        "very_deep": (
            '{"type": "message", "content": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "line 3: nested more than 32 levels deep",
        ),
        "long_id": (
            json.dumps(_message(1, sender="u" * 300)),
            "line 3: message.sender: an id or name of more than 256",
        ),
        "big_content": (
            json.dumps(_message(1, content=SECRET * 3000)),
            "line 3: message.content: longer than 65536 bytes",
        ),
        "wrong_type": (
            json.dumps(_message(1, message_id=17)),
            "line 3: message.message_id: must be a string, not a number",
        ),
        "bad_choice": (
            json.dumps(_message(1, status=SECRET)),
            "line 3: message.status: must be one of pending, processed",
        ),
        "bad_time": (json.dumps(_message(1, create_time=SECRET)), "line 3: message.create_time: not a valid value"),
        "big_int": (json.dumps(_profile(version=2**40)), "line 3: profile.version: out of range for a 32-bit integer"),
        "nan": (
            json.dumps(_profile(profile={"score": float("nan")})),
            "line 3: profile.score: holds a number that is not finite",
        ),
        "unknown_field": (json.dumps(_message(1, **{SECRET: 1})), "line 3: message has 1 unknown field(s)"),
        "bad_tenant": (json.dumps(_message(1, tenant_id=SECRET)), "line 3: tenant_id (a value not shown) is not the"),
    }
    for name, (broken, expected) in cases.items():
        lines = _dump(good)
        lines[2] = broken
        stderr = _refused(database_url, _write(tmp_path, lines, f"{name}.jsonl"))
        assert expected in stderr, (name, stderr)

    not_utf8 = _write(tmp_path, _dump(good), "latin1.jsonl")
    not_utf8.write_bytes(not_utf8.read_bytes().replace(b"Alice", b"Al\xe9ce", 1))
    assert "line 3: not UTF-8" in _refused(database_url, not_utf8)

    done = memsys(database_url, "import", str(_write(tmp_path, _dump(good))))
    assert done.returncode == 0, done.stderr
    assert _stored_messages(database_url) == 2


def test_sections_only_for_the_tenants_named(database_url: str, tmp_path: Path) -> None:
    both = [_message(1), _message(2, tenant_id="other")]
    # The header names acme: a section for another tenant is refused.
    stderr = _refused(database_url, _write(tmp_path, _dump(both, header_tenant="acme")))
    assert "line 4: a section for tenant other, which this import does not name (it names acme)" in stderr
    # A dump of every tenant, imported with --tenant acme: the other section is refused, nothing written.
    whole = _write(tmp_path, _dump(both), "whole.jsonl")
    stderr = _refused(database_url, whole, "--tenant", "acme")
    assert "line 4: a section for tenant other" in stderr
    # The header names acme, the command other: refused at the header.
    acme_only = _write(tmp_path, _dump([_message(1)], header_tenant="acme"), "acme.jsonl")
    assert "line 1: the dump is of tenant acme; --tenant names other" in _refused(
        database_url, acme_only, "--tenant", "other"
    )
    assert "--tenant: Invalid tenant" in _refused(database_url, acme_only, "--tenant", "../etc")

    # Both name acme, or only the header: written.
    done = memsys(database_url, "import", str(acme_only), "--tenant", "acme")
    assert done.returncode == 0, done.stderr
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT tenant_id, count(*) FROM messages GROUP BY 1").fetchall() == [("acme", 1)]


MISSING_MEMCELL = "0b8a4a8e-1111-4c4c-9999-000000000001"


@pytest.mark.parametrize("kind", ["message", "profile"])
def test_a_row_the_database_refuses_is_named_without_its_contents(kind: str, database_url: str, tmp_path: Path) -> None:
    """A row whose MemCell the dump does not hold passes every check of its own; the foreign key refuses it."""
    if kind == "message":
        # Its MemCell is the one field message 1 leaves out: a batch of its own (one statement would drop it).
        rows, where = [_message(1), _message(2, memcell_id=MISSING_MEMCELL)], "line 4"
    else:
        rows, where = [_message(1), _profile(memcell_id=MISSING_MEMCELL)], "line 4"
    stderr = _refused(database_url, _write(tmp_path, _dump(rows)))
    assert f"{where}: the database refused a {kind} row of tenant acme (ForeignKeyViolation, SQLSTATE 23503" in stderr
    assert f"constraint fk_{kind}s_tenant_id_memcells" in stderr, stderr
    assert "alice" not in stderr and MISSING_MEMCELL not in stderr, stderr
