"""The first key for another tenant while the tenant ``default`` holds data (issue 26, point 5): ``memsys keys
create`` says what is left behind and the command that reaches it again; ``memsys keys list`` as a table."""

from __future__ import annotations

import re

import pytest
from litestar.testing import TestClient

from tests.conftest import run_memsys as memsys
from tests.formation_helpers import FLUSH, MEMORIZE, META, META_BODY, conversation, rows
from tests.tenancy_support import bearer

# Also run against a Citus coordinator in CI (.ci/run), as the other key and tenant tests.
pytestmark = pytest.mark.citus

MEMORIES = "/api/v3/agentic/memories"


def _memorize_anonymously(client: TestClient) -> None:
    """The Quick start: no key yet, so every request is the tenant default."""
    assert client.post(META, json=META_BODY).status_code == 200
    for body in conversation("group_123"):
        assert client.post(MEMORIZE, json=body).status_code == 200
    assert client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]["status_info"] == "extracted"


def _key_of(created) -> str:
    return created.stdout.strip().splitlines()[-1]


def test_the_first_key_for_another_tenant_says_what_default_holds_and_how_to_reach_it(
    client: TestClient, database_url: str
):
    _memorize_anonymously(client)
    held = rows(
        database_url,
        "SELECT (SELECT count(*) FROM messages WHERE tenant_id = 'default') AS messages, "
        "(SELECT count(*) FROM memories WHERE tenant_id = 'default') AS memories",
    )[0]
    assert held == {"messages": 5, "memories": 8}  # offline: 1 + 2 episodes, 5 event logs

    created = memsys(database_url, "keys", "create", "--tenant", "acme")
    assert created.returncode == 0, created.stderr
    key_id = re.search(r"Created key (\S+) ", created.stdout).group(1)
    assert "Warning" not in created.stdout  # stdout keeps the key as its last word
    assert (
        "Warning: this is the first API key, so anonymous access ends now. The tenant 'default', which every "
        "anonymous request used, holds 5 messages and 8 memories; requests with this key see the tenant 'acme' "
        "only. To keep reaching that data, create a key for it and send that key with the requests meant for it:\n"
        "  memsys keys create --tenant default\n"
        "Or revoke this key to serve anonymously again:\n"
        f"  memsys keys revoke {key_id}\n"
    ) in created.stderr
    acme = _key_of(created)
    assert client.get(MEMORIES).status_code == 401  # anonymous access ended
    assert client.get(MEMORIES, headers=bearer(acme)).json()["result"]["count"] == 0

    # The command the warning names reaches the data again; a key made while one exists warns no more.
    default = memsys(database_url, "keys", "create", "--tenant", "default")
    assert default.returncode == 0 and default.stderr == "", default.stderr
    assert client.get(MEMORIES, headers=bearer(_key_of(default))).json()["result"]["count"] == 8
    second = memsys(database_url, "keys", "create", "--tenant", "other")
    assert second.returncode == 0 and "Warning" not in second.stderr


def test_no_warning_when_default_is_empty_or_the_key_is_for_default(client: TestClient, database_url: str):
    empty = memsys(database_url, "keys", "create", "--tenant", "acme")
    assert empty.returncode == 0 and "Warning" not in empty.stderr
    revoked = memsys(database_url, "keys", "revoke", re.search(r"Created key (\S+) ", empty.stdout).group(1))
    assert revoked.returncode == 0  # anonymous again
    _memorize_anonymously(client)
    for_default = memsys(database_url, "keys", "create", "--tenant", "default")
    assert for_default.returncode == 0 and "Warning" not in for_default.stderr


def test_keys_list_says_no_keys_or_shows_a_table(database_url: str):
    none = memsys(database_url, "keys", "list")
    assert none.returncode == 0 and none.stdout == "no keys\n"

    assert memsys(database_url, "keys", "create", "--tenant", "acme", "--name", "chat app").returncode == 0
    other = memsys(database_url, "keys", "create", "--tenant", "other")
    assert (
        memsys(database_url, "keys", "revoke", re.search(r"Created key (\S+) ", other.stdout).group(1)).returncode == 0
    )
    listed = memsys(database_url, "keys", "list")
    assert listed.returncode == 0
    header, *lines = listed.stdout.splitlines()
    assert header.split() == ["ID", "TENANT", "PREFIX", "NAME", "CREATED", "STATE"]
    stored = rows(database_url, "SELECT id, tenant_id, key_prefix FROM api_keys ORDER BY tenant_id, created_at")
    assert len(lines) == 2
    for line, key in zip(lines, stored, strict=True):
        assert line.split()[:3] == [str(key["id"]), key["tenant_id"], key["key_prefix"] + "…"]
    assert "chat app" in lines[0] and lines[0].endswith("active")
    assert re.search(r"revoked \d{4}-\d\d-\d\d \d\d:\d\d$", lines[1])
    # The columns line up under the header.
    assert {line.index(key["tenant_id"]) for line, key in zip(lines, stored, strict=True)} == {header.index("TENANT")}
