"""The long-lived objects a running memsys shares: settings, database engine, providers.

Built once (by the HTTP app's lifespan, the CLI or a benchmark) and passed to services explicitly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import migrate
from app.db.embedded import release_embedded
from app.db.engine import create_engine, resolve_database_url
from app.providers.embeddings import Embedder, create_embedder
from app.providers.llm import LLMClient
from app.settings import Settings
from app.text import tokenize

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    engine: AsyncEngine
    database_url: str
    embedder: Embedder
    llm: LLMClient | None = field(default=None)
    """The server's LLM client (formation uses it when ``llm.configured``; callers may override per call)."""

    async def close(self) -> None:
        if self.llm is not None:
            await self.llm.close()
        await self.engine.dispose()
        if not self.settings.database_url:
            release_embedded(self.settings.resolved_data_dir())


def build_runtime(settings: Settings) -> Runtime:
    """Connect (starting the embedded server if no URL is set), migrate if asked, check the schema."""
    database_url = resolve_database_url(settings)
    if settings.migrate_on_start:
        migrate.upgrade(database_url, settings.embedding_dimensions)
    migrate.check_embedding_dimensions(database_url, settings.embedding_dimensions)
    embedder = create_embedder(settings)
    tokenize.warm_up()
    return Runtime(
        settings=settings,
        engine=create_engine(database_url, settings),
        database_url=database_url,
        embedder=embedder,
        llm=LLMClient.from_settings(settings),
    )
