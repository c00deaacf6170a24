"""schemathesis against a real ``memsys serve``: every operation of the OpenAPI document, with a key, and no
answer may be a 5xx. Bounded in time (``FUZZ_SECONDS``) and seeded, so a CI run is reproducible."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.formation_helpers import rows
from tests.tenancy_support import create_key

FUZZ_SECONDS = 120
pytestmark = pytest.mark.slow  # FUZZ_SECONDS by design: `pytest -m slow` (.ci/run)

SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"


def test_schemathesis_finds_no_server_error(server_process_factory, database_url: str, tmp_path: Path):
    key = create_key(database_url, "fuzz")
    server = server_process_factory(
        {"MEMSYS_DATABASE_URL": database_url, "MEMSYS_MIGRATE_ON_START": "false", "MEMSYS_LOG_LEVEL": "ERROR"}
    )
    server.start(timeout=90)
    listing = f"{server.base_url}/api/v3/agentic/memories"
    assert httpx.get(listing).status_code == 401
    assert httpx.get(listing, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    run = subprocess.run(
        [
            SCHEMATHESIS, "run", f"{server.base_url}/docs/openapi.json",
            "--checks", "not_a_server_error",
            "--header", f"Authorization: Bearer {key}",
            "--max-time", str(FUZZ_SECONDS),
            "--max-examples", "40",
            "--seed", "11",
            "--workers", "1",
            "--request-timeout", "30",
            "--suppress-health-check", "filter_too_much",
            "--report", "junit", "--report-dir", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=FUZZ_SECONDS + 120,
    )  # fmt: skip
    summary = run.stdout[-6000:]
    assert run.returncode == 0, summary + "\n--- the server's log ---\n" + server.output()[-6000:]
    # It ran: every operation of the document was tested, with many cases, all passed.
    operations = len(httpx.get(f"{server.base_url}/docs/openapi.json").json()["paths"])
    selected = re.search(r"Selected: (\d+)/(\d+)", run.stdout)
    tested = re.search(r"Tested: (\d+)", run.stdout)
    counted = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert selected and tested and counted, summary
    assert int(selected[1]) == int(selected[2]) == int(tested[1]) >= operations >= 9, summary
    assert int(counted[1]) == int(counted[2]) >= 500, summary
    # With the key, the cases reached the service: messages were stored in the key's tenant.
    assert rows(database_url, "SELECT count(*) AS n FROM messages WHERE tenant_id = 'fuzz'")[0]["n"] > 0
    server.stop()
