"""API keys: made, listed and revoked (the CLI), and turned into a tenant on every request (the HTTP guard).

A key is ``msk_`` + 43 characters of ``secrets.token_urlsafe(32)`` (256 random bits), shown once and
stored only as its SHA-256: a fast hash is right for a high-entropy secret. With no active key the
service is anonymous on the tenant ``default``, where anonymity is allowed (``anonymous_allowed``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.errors import ConfigurationError, InvalidParameter, NotFound, Unauthorized
from app.tenancy import repository, scope
from app.tenancy.scope import DEFAULT_TENANT, check_tenant_id

KEY_PREFIX = "msk_"


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_prefix(key: str) -> str:
    """What a key is known by once made (``memsys keys list``, a memory's history): its first characters."""
    return key[: len(KEY_PREFIX) + 6]


def key_actor(key: str | None) -> str:
    """Who a memory's history says made a change with ``key``."""
    return f"key:{key_prefix(key)}" if key else "anonymous"


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def anonymous_allowed(host: str, allow_anonymous: bool) -> bool:
    """Anonymous access (no key in the database) only on a loopback address, unless allowed outright."""
    return allow_anonymous or is_loopback(host)


async def create_key(conn: AsyncConnection, tenant: str, name: str | None = None) -> tuple[dict[str, Any], str]:
    """Create the tenant if new and a key for it; returns the stored row and the key (shown only now)."""
    check_tenant_id(tenant)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    await repository.ensure_tenant(conn, tenant)
    row = await repository.insert_key(conn, tenant, name, key_hash(key), key_prefix(key))
    return row, key


async def left_in_default(conn: AsyncConnection, tenant: str) -> dict[str, int] | None:
    """Before creating a key for ``tenant``: when it would be the first active key (which ends anonymous access)
    for a tenant other than ``default`` while ``default`` holds data, how many messages and memories it holds
    (which no request reaches any more without a key of ``default``); else None. Moves the rest of the
    transaction into ``default``."""
    check_tenant_id(tenant)
    if tenant == DEFAULT_TENANT or (await repository.key_lookup(conn, None))[1]:
        return None
    await scope.enter(conn, DEFAULT_TENANT)
    counts = await repository.data_counts(conn, DEFAULT_TENANT)
    return counts if any(counts.values()) else None


def left_in_default_warning(tenant: str, counts: dict[str, int], key_id: Any) -> str:
    """What ``left_in_default`` found, and the commands that reach that data again."""
    held = " and ".join(f"{count} {name}" for name, count in counts.items())
    return (
        f"Warning: this is the first API key, so anonymous access ends now. The tenant '{DEFAULT_TENANT}', which "
        f"every anonymous request used, holds {held}; requests with this key see the tenant '{tenant}' only. "
        f"To keep reaching that data, create a key for it and send that key with the requests meant for it:\n"
        f"  memsys keys create --tenant {DEFAULT_TENANT}\n"
        f"Or revoke this key to serve anonymously again:\n"
        f"  memsys keys revoke {key_id}"
    )


async def list_keys(conn: AsyncConnection) -> list[dict[str, Any]]:
    return await repository.all_keys(conn)


def keys_table(keys: list[dict[str, Any]]) -> str:
    """The keys as ``memsys keys list`` shows them: a table with a header row (never the keys), or "no keys"."""
    if not keys:
        return "no keys"
    header = ("ID", "TENANT", "PREFIX", "NAME", "CREATED", "STATE")
    lines = [
        (
            str(row["id"]),
            row["tenant_id"],
            row["key_prefix"] + "…",
            row["name"] or "-",
            f"{row['created_at']:%Y-%m-%d %H:%M}",
            f"revoked {row['revoked_at']:%Y-%m-%d %H:%M}" if row["revoked_at"] else "active",
        )
        for row in keys
    ]
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *lines]
    )


async def revoke_key(conn: AsyncConnection, key_id: str) -> None:
    try:
        parsed = UUID(key_id)
    except ValueError as exc:
        raise InvalidParameter(f"Invalid key id {key_id!r}: a key id is a UUID (see memsys keys list)") from exc
    if not await repository.revoke(conn, parsed):
        raise NotFound(f"No active key with id {key_id}")


async def refuse_open_anonymous(conn: AsyncConnection, host: str, allow_anonymous: bool) -> None:
    """At start-up: no key in the database on a non-loopback address means anyone could read everything."""
    if anonymous_allowed(host, allow_anonymous):
        return
    _, any_key = await repository.key_lookup(conn, None)
    if not any_key:
        raise ConfigurationError(
            f"Refusing to serve {host} without API keys: anyone reaching it would read and write every memory. "
            "Create a key (memsys keys create --tenant T), bind to 127.0.0.1, or set MEMSYS_ALLOW_ANONYMOUS=true."
        )


async def authenticate(conn: AsyncConnection, bearer: str | None, *, anonymous_ok: bool) -> tuple[str, bool]:
    """The tenant of a request and whether a valid key gave it: the key's tenant, or ``default`` when no
    active key exists and anonymity is allowed; otherwise ``Unauthorized``."""
    return await authenticate_hash(conn, key_hash(bearer) if bearer else None, anonymous_ok=anonymous_ok)


async def authenticate_hash(conn: AsyncConnection, hashed: str | None, *, anonymous_ok: bool) -> tuple[str, bool]:
    """``authenticate`` for a key known by its hash (an inspector session's)."""
    tenant, any_key = await repository.key_lookup(conn, hashed)
    if tenant is not None:
        return tenant, True
    if any_key:
        raise Unauthorized(
            "Invalid or revoked API key" if hashed else "Missing API key: send Authorization: Bearer <key>"
        )
    if anonymous_ok:
        return DEFAULT_TENANT, False
    raise Unauthorized(
        "No API key exists and anonymous access is off on this address: create one with memsys keys create"
    )
