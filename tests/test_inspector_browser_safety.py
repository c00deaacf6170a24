"""The inspector in a browser (issue 27): login only from its own origin, a cookie that holds a session id (never
the key), logout by a same-origin POST with the page's CSRF token, and the CSP / frame / nosniff / referrer headers
on every inspector response. A real ``memsys serve``; the browser's side (Origin, cookies) sent as a browser does
(tests/test_inspect.py drives the same flow in Chromium)."""

from __future__ import annotations

import re

import httpx

from tests.conftest import process_env
from tests.tenancy_support import create_key

HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def _safe(response: httpx.Response) -> None:
    for name, value in HEADERS.items():
        assert response.headers.get(name) == value, (response.url, name, response.headers)
    policy = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy and "script-src" not in policy


def test_login_session_logout_and_headers(server_process_factory, database_url: str) -> None:
    key = create_key(database_url, "acme")
    server = server_process_factory(process_env(database_url))
    server.start()
    base = server.base_url
    with httpx.Client(base_url=base, timeout=30) as http:
        # Another origin's page posting the login form (a login CSRF): refused, no cookie.
        for origin in ("http://evil.example", base.replace("127.0.0.1", "localhost")):
            forged = http.post("/inspect/login", data={"key": key}, headers={"Origin": origin})
            assert forged.status_code == 403 and "set-cookie" not in forged.headers, origin
        # A browser that sends no Origin but says the request is cross-site: refused by the form itself.
        cross_site = http.post("/inspect/login", data={"key": key}, headers={"Sec-Fetch-Site": "cross-site"})
        assert cross_site.status_code == 403 and "set-cookie" not in cross_site.headers
        _safe(cross_site)
        # Origin: null is what a page with Referrer-Policy: no-referrer sends: only a same-origin one passes.
        sandboxed = http.post(
            "/inspect/login", data={"key": key}, headers={"Origin": "null", "Sec-Fetch-Site": "cross-site"}
        )
        assert sandboxed.status_code == 403 and "set-cookie" not in sandboxed.headers

        login = http.post("/inspect/login", data={"key": key}, headers={"Origin": base})
        assert login.status_code == 303 and login.headers["location"] == "/inspect"
        _safe(login)
        session = login.cookies["memsys_session"]
        assert len(session) >= 40 and key not in session and key not in login.headers["set-cookie"]
        assert (
            re.search(r"(?i)httponly", login.headers["set-cookie"])
            and "samesite=strict" in login.headers["set-cookie"].lower()
        )

    # The session id opens the pages; the key as a cookie, or a made-up id, does not.
    cookies = {"memsys_session": session}
    overview = httpx.get(f"{base}/inspect", cookies=cookies)
    assert overview.status_code == 200 and "Tenant acme" in overview.text
    _safe(overview)
    for cookie in ({"memsys_session": key}, {"memsys_key": key}, {"memsys_session": "x" * 43}):
        refused = httpx.get(f"{base}/inspect", cookies=cookie)
        assert refused.status_code == 303 and refused.headers["location"] == "/inspect/login"
        _safe(refused)
    _safe(httpx.get(f"{base}/inspect/login"))
    missing = httpx.get(f"{base}/inspect/groups/nowhere", cookies=cookies)
    assert missing.status_code == 404
    _safe(missing)

    # Logout: not by GET; a POST without the page's token, or from another origin, is refused and ends nothing.
    token = re.search(r'name="csrf_token" value="([^"]+)"', overview.text).group(1)
    assert httpx.get(f"{base}/inspect/logout", cookies=cookies).status_code == 405
    for data, origin in (({}, base), ({"csrf_token": "wrong"}, base), ({"csrf_token": token}, "http://evil.example")):
        refused = httpx.post(f"{base}/inspect/logout", data=data, cookies=cookies, headers={"Origin": origin})
        assert refused.status_code == 403, (data, origin)
        assert httpx.get(f"{base}/inspect", cookies=cookies).status_code == 200
    done = httpx.post(f"{base}/inspect/logout", data={"csrf_token": token}, cookies=cookies, headers={"Origin": base})
    assert done.status_code == 303 and done.headers["location"] == "/inspect/login"
    assert 'memsys_session=""' in done.headers["set-cookie"] or "max-age=0" in done.headers["set-cookie"].lower()
    _safe(done)
    # The session is over on the server: the old cookie, sent again, opens nothing.
    assert httpx.get(f"{base}/inspect", cookies=cookies).status_code == 303


def test_an_operator_reads_a_memorys_history_and_corrects_deletes_restores_it(server_process_factory, database_url):
    key = create_key(database_url, "acme")
    server = server_process_factory(process_env(database_url))
    server.start()
    base = server.base_url
    api = httpx.Client(base_url=base + "/api/v3/agentic", headers={"Authorization": f"Bearer {key}"}, timeout=60)
    for n, (when, text) in enumerate(
        (("2026-01-10T09:00:00Z", "I live in Paris these days."), ("2026-06-10T09:00:00Z", "I moved to Berlin!"))
    ):
        body = {"message_id": f"m{n}", "create_time": when, "sender": "alice", "content": text, "group_id": "life"}
        assert api.post("/memorize", json=body).status_code == 200
        assert api.post("/flush", json={"group_id": "life"}).status_code == 200
    found = api.post(
        "/retrieve_lightweight",
        json={"query": "Paris", "user_id": "alice", "data_source": "semantic_memory", "include_superseded": True},
    ).json()["result"]["memories"]
    paris = next(m for m in found if "Paris" in m["content"])
    assert paris["status"] == "superseded"

    login = httpx.post(f"{base}/inspect/login", data={"key": key}, headers={"Origin": base})
    cookies = {"memsys_session": login.cookies["memsys_session"]}
    group = httpx.get(f"{base}/inspect/groups/life", cookies=cookies)
    assert '<del><span class="text">alice lives in Paris.</span></del>' in group.text
    assert f'href="/inspect/memories/{paris["superseded_by"]}"' in group.text
    page = httpx.get(f"{base}/inspect/memories/{paris['id']}", cookies=cookies)
    assert page.status_code == 200 and "superseded" in page.text and "alice lives in Berlin." in page.text
    _safe(page)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    action = f"{base}/inspect/memories/{paris['id']}"
    for data, origin in (({"content": "x"}, base), ({"content": "x", "csrf_token": token}, "http://evil.example")):
        refused = httpx.post(f"{action}/edit", data=data, cookies=cookies, headers={"Origin": origin})
        assert refused.status_code == 403
    corrected = "alice lived in Paris until June."
    done = httpx.post(
        f"{action}/edit", data={"content": corrected, "csrf_token": token}, cookies=cookies, headers={"Origin": base}
    )
    assert done.status_code == 303
    for step in ("restore", "delete", "restore"):
        assert (
            httpx.post(f"{action}/{step}", data={"csrf_token": token}, cookies=cookies, headers={"Origin": base})
        ).status_code == 303
    events = api.get(f"/memories/{paris['id']}/history").json()["result"]["events"]
    assert [e["event"] for e in events if e["event"] != "reembedded"] == [
        "formed",
        "superseded",
        "edited",
        "restored",
        "deleted",
        "restored",
    ]
    assert events[2]["actor"] == f"key:{key[:10]}" and events[2]["details"]["after"]["content"] == corrected
    assert api.get(f"/memories/{paris['id']}").json()["result"]["memory"]["status"] == "current"
