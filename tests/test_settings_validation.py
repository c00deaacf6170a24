"""Every setting is checked when memsys starts: a value out of its bounds, an unknown ``MEMSYS_`` variable, a secret
given twice (its value and its file) stop the real ``memsys`` command in one line (exit 2); a secret's file is read
as Docker and Kubernetes mount them."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from pathlib import Path

import annotated_types
import pytest
from pydantic_settings import SettingsError

from app.settings import Settings
from app.settings_sources import SECRET_SETTINGS, file_variable
from tests.conftest import process_env

ROOT = Path(__file__).resolve().parent.parent


def memsys(*args: str, **env: str) -> subprocess.CompletedProcess:
    run_env = {**os.environ, "MEMSYS_LOG_LEVEL": "WARNING", **env}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], env=run_env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("MEMSYS_PORT", "99999", "less than or equal to 65535"),
        ("MEMSYS_REQUEST_TIMEOUT_SECONDS", "-1", "greater than 0"),
        ("MEMSYS_DB_POOL_SIZE", "-5", "greater than or equal to 1"),
        ("MEMSYS_HNSW_EF_SEARCH", "5000", "less than or equal to 1000"),
        ("MEMSYS_MEMORY_TYPE_WEIGHTS", '{"episode": -1}', "greater than or equal to 0"),
    ],
)
def test_a_value_out_of_its_bounds_stops_memsys_naming_it(variable: str, value: str, said: str) -> None:
    line = one_line(memsys("migrate", **{variable: value}))
    assert line.startswith(f"memsys migrate: Invalid setting {variable}") and said in line, line


def test_every_numeric_setting_has_its_bounds() -> None:
    unbounded = []
    for name, field in Settings.model_fields.items():
        kinds = {kind for kind in typing.get_args(field.annotation) or (field.annotation,)}
        if not kinds & {int, float}:
            continue
        if not any(isinstance(rule, annotated_types.Ge | annotated_types.Gt) for rule in field.metadata):
            unbounded.append(name)
    assert unbounded == []


def test_an_unknown_memsys_variable_stops_memsys_with_the_name_meant() -> None:
    line = one_line(memsys("migrate", MEMSYS_PROT="8000"))
    assert "unknown setting MEMSYS_PROT (did you mean MEMSYS_PORT?)" in line, line
    line = one_line(memsys("serve", MEMSYS_EMBEDING_MODEL="x", MEMSYS_QQQQ="1"))
    assert "MEMSYS_EMBEDING_MODEL (did you mean MEMSYS_EMBEDDING_MODEL?)" in line and "MEMSYS_QQQQ" in line, line


def test_the_tests_clients_and_deployments_variables_are_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("MEMSYS_TEST_ANYTHING", "MEMSYS_BENCH_CACHE", "MEMSYS_CITUS_PORT", "MEMSYS_BASE_URL"):
        monkeypatch.setenv(variable, "1")
    monkeypatch.setenv("MEMSYS_LLM_TIMEOUT_S", "7")  # an alias is a setting's name too
    monkeypatch.setenv("memsys_port", "2001")  # as pydantic-settings reads them: whatever the case
    settings = Settings()
    assert settings.llm_timeout_s == 7 and settings.port == 2001
    monkeypatch.setenv("MEMSYS_PORTT", "1")
    with pytest.raises(SettingsError, match="MEMSYS_PORTT"):
        Settings()


def test_a_secret_is_read_from_its_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "llm_api_key"
    secret.write_text("sk-from-a-file\n")
    monkeypatch.delenv("MEMSYS_LLM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")  # the file, named for memsys, comes first
    monkeypatch.setenv("MEMSYS_LLM_API_KEY_FILE", str(secret))
    assert Settings().llm_api_key == "sk-from-a-file"
    assert Settings(llm_api_key="given").llm_api_key == "given"
    assert {file_variable(name) for name in SECRET_SETTINGS} >= {
        "MEMSYS_DATABASE_URL_FILE",
        "MEMSYS_SERVICE_DATABASE_URL_FILE",
        "MEMSYS_EMBEDDING_API_KEY_FILE",
        "MEMSYS_METRICS_TOKEN_FILE",
    }


KEYS_LIST = [sys.executable, "-m", "app.cli", "keys", "list"]


def test_memsys_logs_in_with_the_database_url_of_a_file(database_url: str, tmp_path: Path) -> None:
    secret = tmp_path / "database_url"
    secret.write_text(database_url + "\n")
    env = {k: v for k, v in {**os.environ, **process_env(database_url)}.items() if k != "MEMSYS_DATABASE_URL"}
    env["MEMSYS_DATABASE_URL_FILE"] = str(secret)
    done = subprocess.run(KEYS_LIST, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    secret.write_text("postgresql://nobody@127.0.0.1:1/none\n")
    done = subprocess.run(KEYS_LIST, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Cannot connect to PostgreSQL" in done.stderr, done.stderr


def test_a_secret_given_twice_or_an_unreadable_file_stops_memsys(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("sk")
    line = one_line(memsys("migrate", MEMSYS_EMBEDDING_API_KEY="sk", MEMSYS_EMBEDDING_API_KEY_FILE=str(secret)))
    assert "MEMSYS_EMBEDDING_API_KEY and MEMSYS_EMBEDDING_API_KEY_FILE are both set" in line, line
    line = one_line(memsys("migrate", MEMSYS_METRICS_TOKEN_FILE=str(tmp_path / "missing")))
    assert "MEMSYS_METRICS_TOKEN_FILE: cannot read" in line and "No such file" in line, line


def test_a_list_that_is_not_json_is_named() -> None:
    line = one_line(memsys("migrate", MEMSYS_ALLOWED_HOSTS="example.com"))
    assert "Invalid setting MEMSYS_ALLOWED_HOSTS: not JSON" in line, line
