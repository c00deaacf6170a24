"""SQL of tenants and API keys. Keys are found by their SHA-256 (the service's role may read ``api_keys``);
they are created and revoked with the owner's connection (``memsys keys``)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import exists, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import api_keys, memories, messages, tenants


async def key_lookup(conn: AsyncConnection, key_hash: str | None) -> tuple[str | None, bool]:
    """(the tenant of the active key with this hash or None, whether any active key exists), in one trip."""
    active = api_keys.c.revoked_at.is_(None)
    tenant = select(api_keys.c.tenant_id).where(api_keys.c.key_hash == key_hash, active).scalar_subquery()
    row = (await conn.execute(select(tenant, exists().where(active)))).one()
    return row[0], bool(row[1])


async def tenant_ids(conn: AsyncConnection) -> list[str]:
    return list((await conn.execute(select(tenants.c.tenant_id).order_by(tenants.c.tenant_id))).scalars())


async def ensure_tenant(conn: AsyncConnection, tenant: str) -> None:
    await conn.execute(insert(tenants).values(tenant_id=tenant).on_conflict_do_nothing())


async def insert_key(conn: AsyncConnection, tenant: str, name: str | None, key_hash: str, prefix: str) -> dict:
    statement = (
        api_keys.insert()
        .values(tenant_id=tenant, name=name, key_hash=key_hash, key_prefix=prefix)
        .returning(*api_keys.c)
    )
    return dict((await conn.execute(statement)).mappings().one())


async def all_keys(conn: AsyncConnection) -> list[dict[str, Any]]:
    statement = select(api_keys).order_by(api_keys.c.tenant_id, api_keys.c.created_at)
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def revoke(conn: AsyncConnection, key_id: UUID) -> bool:
    statement = (
        update(api_keys).where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None)).values(revoked_at=func.now())
    )
    return (await conn.execute(statement)).rowcount == 1


async def data_counts(conn: AsyncConnection, tenant: str) -> dict[str, int]:
    """How many messages and memories the tenant holds (the transaction must be in that tenant, app.tenancy.scope:
    row-level security may hold the owner too)."""
    counts = {}
    for name, table in (("messages", messages), ("memories", memories)):
        statement = select(func.count()).select_from(table).where(table.c.tenant_id == tenant)
        counts[name] = (await conn.execute(statement)).scalar_one()
    return counts
