"""The API docs offline: Swagger UI at /docs and /docs/swagger in Debian's Chromium (headless, driven by
Playwright) against a real ``memsys serve``, with every request to a host other than 127.0.0.1 aborted and
recorded; "Authorize" with a real ``msk_`` key, then an operation executed from the page. And ``GET /``.

Needs ``/usr/bin/chromium`` (``apt-get install chromium``); without it the browser test is skipped, except in CI
(``CI=true``), where it fails. ``MEMSYS_API_DOCS_SCREENSHOT=docs/api-docs-offline.png`` writes the page's
screenshot there (the one docs/api.md shows).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

from litestar.testing import TestClient

from tests.browser_support import chromium, new_key
from tests.conftest import process_env

MEMORIES = "/api/v3/agentic/memories"
ASSETS = {
    "/docs/assets/swagger-ui-bundle.js",
    "/docs/assets/swagger-ui-standalone-preset.js",
    "/docs/assets/swagger-ui.css",
}


def on_loopback(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in ("data", "blob") or parsed.hostname == "127.0.0.1"


def test_the_docs_offline_in_chromium(server_process_factory, database_url: str, tmp_path: Path):
    from playwright.sync_api import Route, expect, sync_playwright

    browser_path = chromium("the API docs' browser test")
    server = server_process_factory(process_env(database_url))
    server.start()
    base = server.base_url
    key = new_key(database_url, "acme")  # a key exists: the server is no longer anonymous, requests need one
    requested: list[str] = []
    outside: list[str] = []

    def loopback_only(route: Route) -> None:
        if on_loopback(route.request.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route("**/*", loopback_only)
        context.on("request", lambda request: requested.append(request.url))
        page = context.new_page()
        page.set_default_timeout(15_000)

        # The root: links to the docs and the inspector; the docs link leads to Swagger UI.
        page.goto(f"{base}/")
        expect(page.get_by_role("link", name="Inspector")).to_have_attribute("href", "/inspect")
        page.get_by_role("link", name="API docs", exact=True).click()
        page.wait_for_url(f"{base}/docs")

        for path in ("/docs/swagger", "/docs"):
            page.goto(f"{base}{path}")
            expect(page.locator("[id$='-retrieve_lightweight']")).to_contain_text("Hybrid retrieval")
            assert page.locator(".opblock").count() > 10
            expect(page.locator(".scheme-container button.authorize")).to_be_visible()
        page.screenshot(path=str(tmp_path / "api-docs-offline.png"))
        if os.environ.get("MEMSYS_API_DOCS_SCREENSHOT"):
            page.screenshot(path=os.environ["MEMSYS_API_DOCS_SCREENSHOT"])

        # Without a key the page's request is refused; with the key from "Authorize" it is answered.
        memories = page.locator("#operations-memories-listMemories")
        memories.locator(".opblock-summary-control").click()
        memories.get_by_role("button", name="Try it out").click()
        with page.expect_response(lambda answer: urlparse(answer.url).path == MEMORIES) as refused:
            memories.get_by_role("button", name="Execute").click()
        assert refused.value.status == 401
        assert "authorization" not in refused.value.request.all_headers()

        page.locator(".scheme-container button.authorize").click()
        dialog = page.locator(".dialog-ux")
        expect(dialog).to_contain_text("memsys_key (http, Bearer)")
        expect(dialog).to_contain_text("memsys keys create")
        dialog.locator("input#auth-bearer-value").fill(key)
        dialog.get_by_role("button", name="Apply credentials").click()
        expect(dialog).to_contain_text("Authorized")
        dialog.locator("button.btn-done").click()
        expect(dialog).to_have_count(0)

        with page.expect_response(lambda answer: urlparse(answer.url).path == MEMORIES) as answered:
            memories.get_by_role("button", name="Execute").click()
        assert answered.value.request.all_headers()["authorization"] == f"Bearer {key}"
        assert answered.value.status == 200
        assert answered.value.json()["status"] == "ok"
        expect(memories.locator(".live-responses-table td.response-col_status:not(.col_header)")).to_have_text("200")

        # A public operation (security: []) is sent without the key.
        health = page.locator("#operations-health-health")
        health.locator(".opblock-summary-control").click()
        health.get_by_role("button", name="Try it out").click()
        with page.expect_response(lambda answer: urlparse(answer.url).path == "/health") as public:
            health.get_by_role("button", name="Execute").click()
        assert public.value.status == 200
        assert "authorization" not in public.value.request.all_headers()
        browser.close()

    assert outside == [], f"the docs reached outside 127.0.0.1: {outside}"
    assert all(on_loopback(url) for url in requested), requested
    assert ASSETS <= {urlparse(url).path for url in requested}


def test_the_docs_pages_name_only_their_own_assets(client: TestClient):
    for path in ("/docs", "/docs/swagger"):
        answer = client.get(path)
        assert answer.status_code == 200
        urls = re.findall(r"""(?:src|href)=["']([^"']+)""", answer.text)
        assert sorted(urls) == sorted([*ASSETS, "/docs/assets/favicon-32x32.png"]), urls
        assert "cdn" not in answer.text and "https://" not in answer.text


def test_the_assets_are_public_and_only_the_pages(client: TestClient, database_url: str):
    new_key(database_url, "acme")  # anonymous access ends: the assets must stay open all the same
    script = client.get("/docs/assets/swagger-ui-bundle.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "SwaggerUIBundle" in script.text
    assert client.get("/docs/assets/swagger-ui.css").headers["content-type"].startswith("text/css")
    assert client.get("/docs/assets/favicon-32x32.png").content.startswith(b"\x89PNG")
    # The package's demo page (which loads an API from the internet) is not served, nor anything else.
    for name in ("index.html", "swagger-initializer.js", "..%2F__init__.py"):
        assert client.get(f"/docs/assets/{name}").status_code == 404
    assert client.get(MEMORIES).status_code == 401


def test_the_openapi_document_declares_the_bearer_keys(client: TestClient):
    document = client.get("/docs/openapi.json").json()
    scheme = document["components"]["securitySchemes"]["memsys_key"]
    assert (scheme["type"], scheme["scheme"], scheme["bearerFormat"]) == ("http", "bearer", "msk_…")
    assert "msk_" in scheme["description"] and "memsys keys create" in scheme["description"]
    assert document["security"] == [{"memsys_key": []}]
    public = {"/health", "/health/live"}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if path in public:
                assert operation["security"] == [], (method, path)
            else:
                assert "security" not in operation, (method, path)  # the document's: the bearer key
    assert {"/", "/metrics", "/docs"}.isdisjoint(document["paths"])


def test_the_root_points_to_the_docs_and_the_inspector(client: TestClient, database_url: str):
    new_key(database_url, "acme")  # the root stays open once keys exist
    page = client.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    links = set(re.findall(r'href="([^"]+)"', page.text))
    assert {"/docs", "/inspect", "/docs/openapi.json", "/health"} <= links
    assert "memsys keys create" in page.text

    body = client.get("/", headers={"Accept": "application/json"})
    assert body.status_code == 200 and body.headers["content-type"].startswith("application/json")
    assert body.json() == {
        "status": "ok",
        "message": "memsys",
        "result": {"docs": "/docs", "openapi": "/docs/openapi.json", "inspector": "/inspect", "health": "/health"},
    }
    assert client.get("/", headers={"Accept": "*/*"}).headers["content-type"].startswith("text/html")
