"""Keys for the tests: made through ``app.tenancy.service`` with the owner's URL, as ``memsys keys`` does; and the
429s a server answered because a key was over its share."""

from __future__ import annotations

import asyncio

import httpx

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


def refused_for_share(base_url: str) -> int:
    """The 429s the server at ``base_url`` has answered because a key was over its share, from its metrics."""
    for line in httpx.get(base_url + "/metrics", timeout=30).text.splitlines():
        if line.startswith('memsys_requests_rejected_total{reason="tenant_share"}'):
            return int(float(line.split()[-1]))
    return 0
