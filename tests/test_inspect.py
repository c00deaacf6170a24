"""The web inspector (GET /inspect) as a person sees it: Debian's Chromium, headless, driven by Playwright,
against a real ``memsys serve`` with two tenants.

Needs ``/usr/bin/chromium`` (``apt-get install chromium``; Playwright's own browser download is not used).
Without it the test is skipped, except in CI (``CI=true``), where it fails. The screenshot goes to the test's
temporary directory; ``MEMSYS_INSPECTOR_SCREENSHOT=docs/inspector.png`` also writes it there (the one
docs/integrations.md shows).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

import httpx

from tests.browser_support import chromium, new_key
from tests.conftest import process_env
from tests.formation_helpers import FLUSH, MEMORIZE, META, META_BODY, conversation, message
from tests.tenancy_support import bearer

SECRET = "the vault code is 4711"  # the other tenant's words: never on acme's pages


def fill(base_url: str, key: str, group_id: str, lines: list[dict]) -> None:
    headers = bearer(key)
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as http:
        assert http.post(META, json={**META_BODY, "group_id": group_id}).status_code == 200
        for body in lines:
            assert http.post(MEMORIZE, json=body).status_code == 200
        flushed = http.post(FLUSH, json={"group_id": group_id}).json()
        assert flushed["result"]["status_info"] == "extracted", flushed


def test_the_inspector_in_chromium(server_process_factory, database_url: str, tmp_path: Path):
    from playwright.sync_api import expect, sync_playwright

    browser_path = chromium("the inspector's browser test")
    server = server_process_factory(process_env(database_url))
    server.start()
    base = server.base_url

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)

        # No key exists yet and the server is on loopback: the page opens in tenant default.
        page.goto(f"{base}/inspect")
        expect(page.locator("h1")).to_have_text("Tenant default")
        expect(page.locator("header")).to_contain_text("anonymous: no key exists")

        acme, other = (new_key(database_url, tenant) for tenant in ("acme", "other"))
        fill(base, acme, "group_123", conversation())
        secret = message(1, f"Top secret: {SECRET}", sender="user_999", group_id="other_group")
        fill(base, other, "other_group", [secret])

        # Keys exist now: the page asks for one; a wrong key is refused on the form.
        page.goto(f"{base}/inspect")
        assert urlparse(page.url).path == "/inspect/login"
        expect(page.locator("h1")).to_have_text("Sign in")
        page.fill("input[name=key]", "msk_not-a-key")
        with page.expect_response(f"{base}/inspect/login") as refused:
            page.click("button:has-text('Open')")
        assert refused.value.status == 401
        expect(page.get_by_role("alert")).to_have_text("Invalid or revoked API key")

        page.fill("input[name=key]", acme)
        page.click("button:has-text('Open')")
        page.wait_for_url(f"{base}/inspect")
        (cookie,) = page.context.cookies()
        assert (cookie["name"], cookie["path"], cookie["httpOnly"], cookie["sameSite"]) == (
            "memsys_session", "/inspect", True, "Strict"
        )  # fmt: skip
        assert acme not in cookie["value"]  # a session id, never the key

        # The overview: the tenant, the backlog, memories per type, the group and its people.
        expect(page.locator("h1")).to_have_text("Tenant acme")
        expect(page.locator("header .tenant")).to_have_text("acme")
        for state in ("pending", "running", "failed", "oldest waiting"):
            expect(page.locator("#backlog")).to_contain_text(state)
        expect(page.locator("#memory-counts")).to_contain_text("episode3")
        groups = page.locator("#groups")
        expect(groups.locator("tr")).to_have_count(2)
        expect(groups).to_contain_text("Project Discussion Group")
        expect(page.locator("#users")).to_contain_text("Zhang San")
        expect(page.locator("#users")).to_contain_text("Li Si")
        overview = page.inner_text("body")
        assert "other_group" not in overview and "user_999" not in overview

        # A group: its messages, episodes, event log and profiles.
        groups.get_by_role("link", name="group_123").click()
        page.wait_for_url(f"{base}/inspect/groups/group_123")
        expect(page.locator("h1")).to_have_text("Group group_123 · Project Discussion Group")
        messages = page.locator("h2#messages + table")
        expect(messages.locator("tr")).to_have_count(6)
        expect(messages.locator("tr").nth(1)).to_contain_text("Great, then the release is planned for next Friday")
        expect(messages).to_contain_text("Li Si")
        expect(messages).to_contain_text("processed")
        expect(page.locator("h2#episode + table")).to_contain_text("I will share the search page mockups tomorrow")
        expect(page.locator("h2#event_log + table tr")).to_have_count(6)
        expect(page.locator("h2#profiles + table")).to_contain_text('"role": "designer"')

        # The search box (group_123 prefilled): results with why each was recalled.
        page.fill("input[name=q]", "search page mockups")
        page.select_option("select[name=data_source]", "event_log")
        page.click("button:has-text('Search')")
        page.wait_for_url(re.compile(r".*/inspect/search\?q=search\+page\+mockups.*"))
        expect(page.locator("h1")).to_contain_text("event_log memories for “search page mockups”")
        results = page.locator("#results tr")
        expect(results).to_have_count(6)
        top = results.nth(1)
        expect(top).to_contain_text("I will share the search page mockups tomorrow")
        vector_leg = re.compile(r"rank \d · RRF 0\.0\d{4} cos 0\.\d{4} · dist 0\.\d{4}")
        expect(top.locator("td.vector")).to_have_text(vector_leg)
        expect(top.locator("td.bm25")).to_have_text(re.compile(r"rank 1 · RRF 0\.01639 score \d\.\d{4}"))  # 1/(60+1)
        expect(top).to_contain_text("(k 60; best 0.03279)")
        page.screenshot(path=str(tmp_path / "inspector.png"), full_page=True)
        if os.environ.get("MEMSYS_INSPECTOR_SCREENSHOT"):
            page.screenshot(path=os.environ["MEMSYS_INSPECTOR_SCREENSHOT"], full_page=True)

        # The other tenant's words are nowhere: not found by search, its group unknown here.
        page.goto(f"{base}/inspect/search?q=vault+code+secret")
        assert SECRET not in page.inner_text("body")
        answer = page.goto(f"{base}/inspect/groups/other_group")
        assert answer is not None and answer.status == 404
        expect(page.get_by_role("alert")).to_have_text("No group 'other_group' in tenant acme")

        # Log out (a POST with the page's CSRF token): the cookie goes, the page asks for a key again.
        page.goto(f"{base}/inspect")
        session = page.context.cookies()[0]["value"]
        page.get_by_role("button", name="log out").click()
        page.wait_for_url(f"{base}/inspect/login")
        assert page.context.cookies() == []
        page.goto(f"{base}/inspect/groups/group_123")
        assert urlparse(page.url).path == "/inspect/login"
        browser.close()

    # The cookie names a session only under /inspect, and the key itself is no cookie; elsewhere, and for clients,
    # the JSON 401 stays. The session ended at logout: its id opens nothing now.
    refused = httpx.get(f"{base}/api/v3/agentic/memories", cookies={"memsys_session": session, "memsys_key": acme})
    assert refused.status_code == 401 and refused.json()["code"] == "UNAUTHORIZED"
    assert httpx.get(f"{base}/inspect", cookies={"memsys_key": acme}).status_code == 303
    assert httpx.get(f"{base}/inspect", cookies={"memsys_session": session}).status_code == 303
    redirected = httpx.get(f"{base}/inspect")
    assert redirected.status_code == 303 and redirected.headers["location"] == "/inspect/login"
