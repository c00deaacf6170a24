"""schemathesis against a real ``memsys serve``: every operation of the OpenAPI document, with a key, and no
answer may be a 5xx. Bounded in time (``FUZZ_SECONDS``) and seeded, so a CI run is reproducible."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.tenancy_support import create_key

FUZZ_SECONDS = 150
SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"


def test_schemathesis_finds_no_server_error(server_process_factory, database_url: str, tmp_path: Path):
    key = create_key(database_url, "fuzz")
    server = server_process_factory(
        {"MEMSYS_DATABASE_URL": database_url, "MEMSYS_MIGRATE_ON_START": "false", "MEMSYS_LOG_LEVEL": "ERROR"}
    )
    server.start(timeout=90)
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
            "--report", "junit", "--report-dir", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=FUZZ_SECONDS + 120,
    )  # fmt: skip
    summary = run.stdout[-6000:]
    assert run.returncode == 0, summary
    # It ran: every operation was exercised, and none answered a 5xx.
    assert "not_a_server_error" in run.stdout and "passed" in run.stdout.lower(), summary
    server.stop()
