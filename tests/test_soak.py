"""The soak benchmark's short run (issue 17): memsys serve and a worker on the embedded PostgreSQL under a mixed
load from several tenants while every fault is injected once, in about two minutes. Every invariant must
hold (read from the database afterwards) and every fault must be recovered from by memsys itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.soak import harness as soak
from benchmarks.soak.faults import FAULTS

pytestmark = pytest.mark.slow  # two minutes by design: `pytest -m slow` (.ci/run)


def test_every_fault_once_under_load(tmp_path: Path) -> None:
    config = soak.plan(True, 0, out=tmp_path / "soak_short.json", run_dir=tmp_path / "run")
    payload = soak.run(config)
    soak.report(payload)  # shown when the test fails
    results = payload["results"]

    assert sorted(f["fault"] for f in results["faults"]) == sorted(FAULTS)
    failed = {name: verdict for name, verdict in results["invariants"].items() if not verdict["ok"]}
    assert not failed, json.dumps({"failed": failed, "logs": results["figures"]["log_errors"]}, indent=1)
    assert all(fault["recovered"] for fault in results["faults"])
    messages = results["figures"]["messages"]
    assert messages["accepted"] > 1000 and messages["formed"] == messages["stored"]  # the load really ran
    assert all(served > 0 for served in results["figures"]["served_by_operation"].values())
