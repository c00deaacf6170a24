"""Forget is complete (issue 27): a v1 personal conversation (the assistant's replies quote the user) goes with the
user and is in their export; every id memorize accepts (``/``, ``%``, ``..``) can be forgotten, exported and viewed
in the inspector, and a path that would name another id is refused; task ids and page numbers that cannot be stored
are 4xx, not 500s. Through a real ``memsys serve`` (the router's decoding of a raw path is what matters)."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import httpx

from tests.conftest import process_env
from tests.formation_helpers import FLUSH, MEMORIZE, message, rows, wait_for

PASSPORT = "my passport number is K9271183"
V3 = "/api/v3/agentic"


def _v1_personal(http: httpx.Client, user_id: str) -> None:
    """A personal conversation over /api/v1: the user and the assistant, who quotes them; formed by a flush."""
    turns = [("user", PASSPORT), ("assistant", f"Noted: {PASSPORT}. I will remind you before it expires.")]
    items = [
        {"role": role, "content": text, "timestamp": 1_740_000_000_000 + 60_000 * number}
        for number, (role, text) in enumerate(turns)
    ]
    assert http.post("/api/v1/memories", json={"user_id": user_id, "messages": items}).status_code == 200
    flushed = http.post("/api/v1/memories/flush", json={"user_id": user_id}, timeout=60)
    assert flushed.json()["data"]["status"] == "extracted", flushed.text


def test_a_v1_personal_conversation_is_exported_and_forgotten_with_its_user(server_process_factory, database_url):
    server = server_process_factory(process_env(database_url))
    server.start()
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        _v1_personal(http, "wei")
        _v1_personal(http, "ana")  # someone else's conversation: untouched

        export = http.get(f"{V3}/export", params={"user_id": "wei"}).json()["result"]
        assert {m["sender"] for m in export["messages"]} == {"wei", "assistant"}
        assert export["memories"] and all(m["group_id"] == "personal:wei" for m in export["memories"])

        answer = http.request("DELETE", f"{V3}/users", params={"user_id": "wei"})
        assert answer.status_code == 200, answer.text
        conversations = answer.json()["result"]["conversations"]
        assert (
            conversations["forgotten"] == 1 and conversations["deleted"]["messages"] == 2
        )  # theirs and the assistant's
        assert conversations["deleted"]["memcells"] == 1 and conversations["deleted"]["memories"] > 0

        after = http.get(f"{V3}/export", params={"user_id": "wei"}).json()["result"]
        assert after["messages"] == after["memories"] == after["profiles"] == []
    wait_for(database_url, "SELECT count(*) FROM messages WHERE status = 'pending'", 0)
    for table, text in (("messages", "content"), ("memories", "content"), ("memcells", "topic_summary")):
        found = rows(database_url, f"SELECT {text} AS text, group_id FROM {table}")
        assert found and {row["group_id"] for row in found} == {"personal:ana"}, (table, found)
        assert all("K9271183" not in (row["text"] or "") or row["group_id"] == "personal:ana" for row in found)


def test_every_id_memorize_accepts_can_be_forgotten_exported_and_viewed(server_process_factory, database_url):
    server = server_process_factory(process_env(database_url))
    server.start()
    odd = ["a/b", "50%", "..", "a/", "g/1"]
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for number, sender in enumerate([*odd, "a"]):
            body = message(number, f"{sender} says hello", sender=sender, group_id="g/1")
            assert http.post(MEMORIZE, json=body).status_code == 200
        assert http.post(FLUSH, json={"group_id": "g/1"}, timeout=60).status_code == 200

        # A path the router would read as another id is refused, naming the query route; "a" is untouched.
        for path in (f"{V3}/users/a%2F", f"{V3}/users/a/"):
            refused = http.delete(path)
            assert refused.status_code == 400, (path, refused.text)
            assert "use DELETE /api/v3/agentic/users?user_id=" in refused.json()["message"]
        assert http.delete(f"{V3}/users/a%2Fb").status_code == 404  # two segments: no route at all
        refused = http.get(f"{V3}/users/a%2F/export")
        assert refused.status_code == 400 and "GET /api/v3/agentic/export?user_id=" in refused.json()["message"]
        assert rows(database_url, "SELECT count(*) AS n FROM messages WHERE sender = 'a'")[0]["n"] == 1

        # The path form, where it can carry the id; the query form, for any id.
        assert http.get(f"{V3}/users/{quote('50%', safe='')}/export").json()["result"]["messages"][0]["sender"] == "50%"
        for user_id in odd[:-1]:
            export = http.get(f"{V3}/export", params={"user_id": user_id}).json()["result"]
            assert [m["sender"] for m in export["messages"]] == [user_id], user_id
            assert http.request("DELETE", f"{V3}/users", params={"user_id": user_id}).status_code == 200
        left = rows(database_url, "SELECT DISTINCT sender FROM messages ORDER BY 1")
        assert [row["sender"] for row in left] == ["a", "g/1"]

        # The inspector (anonymous on loopback: no key exists) links a group with '/' by its query route.
        overview = http.get("/inspect").text
        assert 'href="/inspect/group?group_id=g%2F1"' in overview
        group = http.get("/inspect/group", params={"group_id": "g/1"})
        assert group.status_code == 200 and "g/1 says hello" in group.text
        assert http.get("/inspect/groups/g%2F").status_code == 400  # would show group "g"
        forgotten = http.request("DELETE", f"{V3}/groups", params={"group_id": "g/1"})
        assert forgotten.status_code == 200 and forgotten.json()["result"]["deleted"]["messages"] == 2
        assert rows(database_url, "SELECT count(*) AS n FROM messages")[0]["n"] == 0


def _task(parts: list[str]) -> str:
    raw = json.dumps(parts).encode()  # ensure_ascii: "\u0000" and "\ud800" travel as JSON escapes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_unstorable_task_ids_and_huge_pages_are_4xx(server_process_factory, database_url):
    server = server_process_factory(process_env(database_url))
    server.start()
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for parts in (["group", "g\u0000", "m1"], ["group", "g", "\ud800"], ["group", "g"], {"a": 1, "b": 2, "c": 3}):
            answer = http.get(f"/api/v1/tasks/{_task(parts)}")
            assert answer.status_code == 404, (parts, answer.text)
        for page in (10**30, 2**63, 0):
            answer = http.post("/api/v1/memories/get", json={"page": page, "filters": {"user_id": "wei"}})
            assert answer.status_code == 400, (page, answer.text)
            assert answer.json()["code"] == "INVALID_PARAMETER" and "page" in answer.json()["message"]
            fetched = http.get("/api/v0/memories", params={"user_id": "wei", "page": str(page)})
            assert fetched.status_code == 400 and "page" in fetched.json()["message"], fetched.text
