"""The container and docker compose files: read as files (this machine has no container runtime that runs: the docker
client without a daemon), and the database's init script run for real on the test PostgreSQL as its superuser, after
which ``memsys migrate`` works as the owner it made, who is no superuser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
import yaml
from sqlalchemy.engine import make_url

from app import queue
from app.settings import Settings
from app.settings_sources import setting_variables

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()
INIT_SQL = ROOT / "deploy" / "compose" / "initdb.sql"
MAKE_SECRETS = ROOT / "deploy" / "compose" / "make-secrets.sh"


def seconds(duration: str) -> float:
    match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert match and duration, duration
    return int(match.group(1) or 0) * 60 + int(match.group(2) or 0)


def test_each_service_stops_after_its_drain_and_has_resource_limits() -> None:
    services = COMPOSE["services"]
    memsys, worker = services["memsys"], services["worker"]
    drain = float(memsys["environment"].get("MEMSYS_SHUTDOWN_GRACE_SECONDS", Settings().shutdown_grace_seconds))
    assert seconds(memsys["stop_grace_period"]) > drain + 5
    assert seconds(worker["stop_grace_period"]) > queue.STOP_WITHIN_S + queue.GIVE_BACK_WITHIN_S
    for name, service in services.items():
        limits = service["deploy"]["resources"]["limits"]
        assert float(limits["cpus"]) > 0 and limits["memory"], name
    assert worker["healthcheck"] == {"disable": True}  # the image's check asks HTTP, which a worker does not serve


def test_no_password_is_written_in_the_compose_file_and_every_secret_is_a_file() -> None:
    declared = COMPOSE["secrets"]
    for name, service in COMPOSE["services"].items():
        environment = service.get("environment", {})
        mounted = set(service.get("secrets", []))
        for variable, value in environment.items():
            value = str(value)
            assert "PASSWORD" not in variable or variable.endswith("_FILE"), (name, variable)
            if "://" in value:
                assert urlsplit(value).password is None, (name, variable)
            if variable.endswith("_FILE"):
                secret = value.removeprefix("/run/secrets/")
                assert secret in mounted and secret in declared, (name, variable)
        memsys_variables = {variable for variable in environment if variable.startswith("MEMSYS_")}
        assert memsys_variables <= setting_variables(Settings), (name, memsys_variables - setting_variables(Settings))
    for service in ("memsys", "worker"):
        environment = COMPOSE["services"][service]["environment"]
        assert "MEMSYS_DATABASE_URL" not in environment and "MEMSYS_SERVICE_DATABASE_URL" not in environment
        assert environment["MEMSYS_DATABASE_URL_FILE"] == "/run/secrets/memsys_database_url"
        assert environment["MEMSYS_SERVICE_DATABASE_URL_FILE"] == "/run/secrets/memsys_service_database_url"
    db = COMPOSE["services"]["db"]
    assert "POSTGRES_PASSWORD" not in db["environment"] and db["environment"]["POSTGRES_PASSWORD_FILE"]
    assert "./deploy/compose/initdb.sql:/docker-entrypoint-initdb.d/10-memsys.sql:ro" in db["volumes"]
    for secret in declared.values():
        assert secret["file"].startswith("./deploy/compose/secrets/")
    assert "deploy/compose/secrets/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_image_runs_as_memsys_with_a_health_check_and_sigterm() -> None:
    lines = [line.strip() for line in DOCKERFILE.splitlines() if line.strip() and not line.startswith("#")]
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] == "memsys"
    assert lines.index(f"USER {users[-1]}") < next(i for i, line in enumerate(lines) if line.startswith("CMD "))
    assert "useradd" in DOCKERFILE and "--create-home" in DOCKERFILE and "-o memsys" in DOCKERFILE
    assert "MEMSYS_DATA_DIR=/var/lib/memsys" in DOCKERFILE and "HOME=/home/memsys" in DOCKERFILE
    assert "STOPSIGNAL SIGTERM" in lines
    healthcheck = DOCKERFILE[DOCKERFILE.index("HEALTHCHECK") :]
    assert "urllib.request.urlopen" in healthcheck and "/health" in healthcheck


def test_the_health_check_command_asks_health_and_fails_when_nothing_answers(tmp_path: Path) -> None:
    command = re.search(r'CMD \["python", "-c", "(.*)"\]\n', DOCKERFILE[DOCKERFILE.index("HEALTHCHECK") :])
    assert command
    code = command.group(1).replace('\\"', '"')
    env = {**os.environ, "MEMSYS_PORT": "1"}  # nothing listens there
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "Connection refused" in done.stderr, done


def test_make_secrets_writes_matching_passwords_and_urls_once(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    subprocess.run(["sh", str(MAKE_SECRETS), str(folder)], check=True, capture_output=True)
    read = {path.name: path.read_text().strip() for path in folder.iterdir()}
    assert set(read) == {secret["file"].rsplit("/", 1)[1] for secret in COMPOSE["secrets"].values()}
    owner, service = make_url(read["memsys_database_url"]), make_url(read["memsys_service_database_url"])
    assert (owner.username, owner.password, owner.host, owner.database) == (
        "memsys_owner",
        read["memsys_owner_password"],
        "db",
        "memsys",
    )
    assert (service.username, service.password) == ("memsys_app", read["memsys_app_password"])
    assert len({read["postgres_password"], read["memsys_owner_password"], read["memsys_app_password"]}) == 3
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    subprocess.run(["sh", str(MAKE_SECRETS), str(folder)], check=True, capture_output=True)
    assert {path.name: path.read_text().strip() for path in folder.iterdir()} == read  # kept


@pytest.fixture
def initialised(server_url: str, on_citus: bool, tmp_path: Path):
    """The init script run by the test server's superuser as the postgres image runs it, under names of its own."""
    if on_citus or shutil.which("psql") is None:
        pytest.skip("needs psql and a server of its own (not the shared Citus cluster)")
    names = {"database": "memsys_compose", "owner": "memsys_compose_owner", "app": "memsys_compose_app"}
    drop(server_url, names)
    (tmp_path / "owner").write_text("owner-secret\n")
    (tmp_path / "app").write_text("app-secret\n")
    env = {
        **os.environ,
        "MEMSYS_OWNER_PASSWORD_FILE": str(tmp_path / "owner"),
        "MEMSYS_APP_PASSWORD_FILE": str(tmp_path / "app"),
    }
    variables = [argument for name, value in names.items() for argument in ("-v", f"{name}={value}")]
    done = subprocess.run(
        ["psql", "-X", "-q", "-d", server_url, *variables, "-f", str(INIT_SQL)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    yield names
    drop(server_url, names)


def drop(server_url: str, names: dict[str, str]) -> None:
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{names["database"]}" WITH (FORCE)')
        for role in (names["app"], names["owner"]):
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                conn.execute(f'REASSIGN OWNED BY "{role}" TO CURRENT_USER')
                conn.execute(f'DROP OWNED BY "{role}"')
                conn.execute(f'DROP ROLE "{role}"')


def test_the_init_script_makes_a_non_superuser_owner_and_a_service_role(server_url: str, initialised: dict) -> None:
    with psycopg.connect(server_url) as conn:
        roles = {
            row[0]: row[1:]
            for row in conn.execute(
                "SELECT rolname, rolcanlogin, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb,"
                " rolpassword IS NOT NULL FROM pg_authid WHERE rolname IN (%s, %s)",
                (initialised["owner"], initialised["app"]),
            )
        }
        assert roles[initialised["owner"]] == (True, False, False, True, False, True)
        assert roles[initialised["app"]] == (True, False, False, False, False, True)
        owner = conn.execute(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", (initialised["database"],)
        ).fetchone()
        assert owner == (initialised["owner"],)
        assert conn.execute(
            "SELECT pg_has_role(%s, %s, 'MEMBER')", (initialised["owner"], initialised["app"])
        ).fetchone() == (True,)
    database = make_url(server_url).set(database=initialised["database"]).render_as_string(False)
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() == (1,)


def test_memsys_migrates_as_the_owner_the_init_script_made(server_url: str, initialised: dict) -> None:
    url = make_url(server_url).set(database=initialised["database"], password=None)
    owner, service = (url.set(username=initialised[role]).render_as_string(False) for role in ("owner", "app"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSYS_") or k.startswith("MEMSYS_TEST_")},
        "MEMSYS_DATABASE_URL": owner,
        "MEMSYS_SERVICE_DATABASE_URL": service,
        "MEMSYS_LOG_LEVEL": "WARNING",
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "migrate"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    with psycopg.connect(service) as conn:  # the service's login, held by row-level security
        assert conn.execute("SELECT count(*) FROM memcells").fetchone() == (0,)
        unsafe = "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        assert conn.execute(unsafe).fetchone() == (False,)
