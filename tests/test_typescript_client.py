"""Issue 30: the TypeScript client (clients/typescript), built with its own ``tsc`` and tested with Node's test
runner against a real ``memsys serve`` with two tenants' keys; and the docs page's example, run as written.

Skipped only when Node is missing outside CI; under ``CI=true`` a missing Node fails."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServerProcess, empty_tables, process_env
from tests.tenancy_support import bearer, create_key

pytestmark = pytest.mark.integrations  # pytest -m integrations (.ci/run); not in the default run

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "clients" / "typescript"
DOC = ROOT / "docs" / "integrations" / "typescript.md"
SEEDED_USER = "py-seeded"


def node_or_skip() -> str:
    """The ``node`` command; a skip outside CI when there is none, a failure in CI."""
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI is set and node is not installed: the TypeScript tests must run in CI")
        pytest.skip("node is not installed (CI must run these)")
    return node


@functools.cache
def built_client() -> Path:
    """clients/typescript with its locked devDependencies (typescript, and openai for the proxy's test) installed
    and ``tsc`` run: once per test session."""
    run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CLIENT, timeout=240)
    run(["npx", "tsc"], cwd=CLIENT, timeout=120)
    return CLIENT


def run(command: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def doc_example(doc: Path, language: str) -> str:
    """The page's first ``language`` code block: the example a reader copies."""
    match = re.search(rf"```{language}\n(.*?)```", doc.read_text(), re.DOTALL)
    assert match, f"{doc} has no {language} example"
    return match.group(1)


def run_node_example(code: str, workdir: Path, env: dict[str, str]) -> str:
    """Run ``code`` as an ES module in ``workdir``, which sees clients/typescript's node_modules and the client
    itself as ``memsys-client`` (as after ``npm install clients/typescript``)."""
    modules = workdir / "node_modules"
    modules.mkdir(exist_ok=True)
    for entry in (CLIENT / "node_modules").iterdir():
        if not (modules / entry.name).exists():
            (modules / entry.name).symlink_to(entry)
    if not (modules / "memsys-client").exists():
        (modules / "memsys-client").symlink_to(CLIENT)
    (workdir / "example.mjs").write_text(code)
    return run(["node", "example.mjs"], cwd=workdir, timeout=60, env=env)


@pytest.fixture(scope="module")
def keys(database_url: str) -> Iterator[dict[str, str]]:
    yield {"a": create_key(database_url, "ts-tenant-a"), "b": create_key(database_url, "ts-tenant-b")}
    empty_tables(database_url)


@pytest.fixture(scope="module")
def server(database_url: str, keys: dict[str, str]) -> Iterator[ServerProcess]:
    process = ServerProcess(process_env(database_url), cwd=ROOT)
    process.start(timeout=120)
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _empty_tables() -> Iterator[None]:
    """The keys live for the module: the tables are not emptied between these tests."""
    yield


def test_the_client_passes_its_node_tests_against_a_live_server(server, keys):
    node_or_skip()
    client = built_client()
    # Stored over plain HTTP: the client must find it.
    seeded = {
        "message_id": "py-1",
        "create_time": "2025-05-01T10:00:00Z",
        "sender": SEEDED_USER,
        "content": "My sourdough starter is called Bubbles",
    }
    stored = httpx.post(
        server.base_url + "/api/v3/agentic/memorize", json=seeded, headers=bearer(keys["a"]), timeout=30
    )
    assert stored.status_code == 200, stored.text
    env = {
        "MEMSYS_URL": server.base_url,
        "MEMSYS_KEY": keys["a"],
        "MEMSYS_OTHER_KEY": keys["b"],
        "MEMSYS_SEEDED_USER": SEEDED_USER,
    }
    output = run(["node", "--test", "test/"], cwd=client, timeout=120, env=env)
    assert "# fail 0" in output and "# pass 6" in output, output
    # Stored through the client: found over plain HTTP, formed by the flush the client asked for.
    body = {"query": "Lisbon marathon", "user_id": "ts-ana"}
    found = httpx.post(
        server.base_url + "/api/v3/agentic/retrieve_lightweight", json=body, headers=bearer(keys["a"]), timeout=30
    )
    assert any("Lisbon" in m["content"] for m in found.json()["result"]["memories"]), found.text


def test_the_docs_example_runs_as_written(server, keys, tmp_path):
    node_or_skip()
    built_client()
    output = run_node_example(
        doc_example(DOC, "js"), tmp_path, {"MEMSYS_URL": server.base_url, "MEMSYS_API_KEY": keys["a"]}
    )
    assert "alice: I moved to Porto last spring" in output
    assert "INVALID_PARAMETER 400" in output and "group_id" in output


def test_the_docs_typed_snippet_compiles(tmp_path):
    """The page's ``ts`` snippet (a filtered search) type-checks against the client's declarations."""
    node_or_skip()
    client = built_client()
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "memsys-client").symlink_to(client)
    snippet = 'import { MemsysClient } from "memsys-client";\nconst memsys = new MemsysClient();\n'
    (tmp_path / "snippet.ts").write_text(snippet + doc_example(DOC, "ts") + "export {};\n")
    (tmp_path / "package.json").write_text('{"type": "module"}')
    (tmp_path / "tsconfig.json").write_text(
        '{"compilerOptions": {"target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext",'
        ' "lib": ["ES2022", "DOM"], "strict": true, "noEmit": true, "skipLibCheck": true}, "files": ["snippet.ts"]}'
    )
    run([str(client / "node_modules" / ".bin" / "tsc"), "-p", str(tmp_path)], cwd=tmp_path, timeout=120)
    # A filter of the wrong shape does not.
    (tmp_path / "snippet.ts").write_text(
        snippet + "await memsys.retrieveLightweight({ filters: { OR: 3 } });\nexport {};\n"
    )
    refused = subprocess.run(
        [str(client / "node_modules" / ".bin" / "tsc"), "-p", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and "not assignable to type 'Filter[]'" in refused.stdout, refused.stdout
