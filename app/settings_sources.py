"""Where settings come from besides plain variables, and which ``MEMSYS_`` variables are refused.

``MEMSYS_<NAME>_FILE`` names a file holding a secret setting's value (a Docker or Kubernetes secret, mounted as a
file), read once at start with its trailing newline stripped. A ``MEMSYS_`` variable that is neither a setting nor
one of ``NOT_SETTINGS`` stops memsys at start, with the setting it was probably meant to be: a typo
(``MEMSYS_PROT``) otherwise leaves the default silently in place.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsError

PREFIX = "MEMSYS_"

SECRET_SETTINGS = (
    "database_url",
    "service_database_url",
    "llm_api_key",
    "embedding_api_key",
    "rerank_api_key",
    "metrics_token",
)
"""The settings that hold a password or a key: each may come from a file, ``MEMSYS_<NAME>_FILE``."""

NOT_SETTINGS = frozenset(
    {
        "MEMSYS_BASE_URL",  # the Python client's server (clients/python)
        "MEMSYS_API_KEY",  # the Python client's key
        "MEMSYS_URL",  # the TypeScript client's tests (clients/typescript/test)
        "MEMSYS_KEY",
        "MEMSYS_OTHER_KEY",
        "MEMSYS_SEEDED_USER",
        "MEMSYS_WORKER_CONCURRENCY",  # docker-compose.yml's interpolation, when kept in the shell rather than .env
        "MEMSYS_OWNER_PASSWORD_FILE",  # deploy/compose/initdb.sql, in the database's container
        "MEMSYS_APP_PASSWORD_FILE",
        "MEMSYS_CITUS_PORT",  # deploy/citus and .ci/run
        "MEMSYS_VENDOR_DIR",
        "MEMSYS_API_DOCS_SCREENSHOT",  # tests that renew the docs' pictures
        "MEMSYS_INSPECTOR_SCREENSHOT",
    }
)
"""``MEMSYS_`` variables read by memsys's clients, tests, benchmarks and deployment files, not by memsys: allowed in
memsys's environment. So is every ``MEMSYS_TEST_…`` (the tests') and ``MEMSYS_BENCH_…`` (the benchmarks')."""

NOT_SETTINGS_PREFIXES = ("MEMSYS_TEST_", "MEMSYS_BENCH_")


def file_variable(name: str) -> str:
    """The variable naming the file that holds the secret setting ``name``."""
    return f"{PREFIX}{name.upper()}_FILE"


def setting_variables(settings_cls: type[BaseSettings]) -> set[str]:
    """Every ``MEMSYS_`` variable memsys reads as a setting: the fields' names, their aliases, the secrets' files."""
    known = set()
    for name, field in settings_cls.model_fields.items():
        known.update(choice.upper() for choice in _aliases(field) or [PREFIX + name])
    known.update(file_variable(name) for name in SECRET_SETTINGS)
    return {variable for variable in known if variable.startswith(PREFIX)}


def unknown_variables(environ: Iterable[str], known: set[str]) -> list[str]:
    """The ``MEMSYS_`` variables of ``environ`` that memsys does not know, each with the nearest known name."""
    said = []
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith(PREFIX) or upper in known or upper in NOT_SETTINGS:
            continue
        if upper.startswith(NOT_SETTINGS_PREFIXES):
            continue
        nearest = difflib.get_close_matches(upper, known, n=1, cutoff=0.6)
        said.append(f"{variable} (did you mean {nearest[0]}?)" if nearest else variable)
    return said


class KnownVariablesOnly(PydanticBaseSettingsSource):
    """Gives no value: refuses an environment holding a ``MEMSYS_`` variable that is no setting."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        unknown = unknown_variables(os.environ, setting_variables(self.settings_cls))
        if unknown:
            plural = "s" if len(unknown) > 1 else ""
            raise SettingsError(
                f"unknown setting{plural} {', '.join(unknown)}: docs/settings.md lists memsys's settings"
            )
        return {}


class SecretFiles(PydanticBaseSettingsSource):
    """A secret setting's value from the file ``MEMSYS_<NAME>_FILE`` names, its trailing newline stripped."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values = read_secret_files({name.upper(): value for name, value in os.environ.items()})
        return {_input_key(self.settings_cls.model_fields[name], name): value for name, value in values.items()}


def _input_key(field: FieldInfo, name: str) -> str:
    """The key the environment's source gives a field's value under (its first alias, if it has any), so that a
    file's value takes the place of the environment's rather than sitting beside it."""
    return next(iter(_aliases(field)), name)


def _aliases(field: FieldInfo) -> list[str]:
    """The names a field's ``validation_alias`` gives it (one, or its ``AliasChoices``), in order; none without one."""
    alias = field.validation_alias
    if isinstance(alias, str):
        return [alias]
    return [str(choice) for choice in getattr(alias, "choices", None) or ()]


def read_secret_files(environ: Mapping[str, str]) -> dict[str, str]:
    """The secret settings whose ``_FILE`` variable is set in ``environ`` (names in capitals), read from their
    files; a setting given both ways, or a file that cannot be read, is refused."""
    values = {}
    for name in SECRET_SETTINGS:
        variable, path = file_variable(name), environ.get(file_variable(name))
        if not path:
            continue
        if environ.get(PREFIX + name.upper()):
            raise SettingsError(f"{PREFIX}{name.upper()} and {variable} are both set: keep one of them")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise SettingsError(f"{variable}: cannot read {path} ({reason})") from exc
        values[name] = text.rstrip("\r\n")
    return values
