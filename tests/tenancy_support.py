"""Keys for the tests: made through ``app.tenancy.service`` with the owner's URL, as ``memsys keys`` does."""

from __future__ import annotations

import asyncio

from app.db.engine import create_engine
from app.settings import Settings
from app.tenancy import service


def create_key(database_url: str, tenant: str, name: str | None = None) -> str:
    async def run() -> str:
        engine = create_engine(database_url, Settings())
        try:
            async with engine.begin() as conn:
                _, key = await service.create_key(conn, tenant, name)
                return key
        finally:
            await engine.dispose()

    return asyncio.run(run())


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
