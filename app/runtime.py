"""The long-lived objects a running memsys shares: settings, database engine, providers.

Built once (by the HTTP app's lifespan, the CLI or a benchmark) and passed to services explicitly.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from app.concurrency import Slots
from app.db import migrate
from app.db.embedded import keep_running, libpq_url, release_embedded
from app.db.engine import (
    check_service_role,
    create_engine,
    limit_statements,
    resolve_database_url,
    schema_ready,
    service_database_url,
)
from app.observability import tracing
from app.providers.embeddings import Embedder, create_embedder, create_xl_embedder
from app.providers.llm import LLMClient
from app.settings import Settings
from app.tenancy import scope
from app.text import tokenize, tokens

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    engine: AsyncEngine
    """The service's engine; in ``for_tenant``'s copy, scoped to that tenant (app.tenancy.scope)."""
    database_url: str
    """The owner's URL (migrations, keys)."""
    embedder: Embedder
    xl_embedder: Embedder | None = None
    """The cross-lingual vector's (``cross_lingual``): formation gives every memory one, retrieval embeds the query
    with it too; None when off."""
    llm: LLMClient | None = field(default=None)
    """The server's LLM client (formation uses it when ``llm.configured``; callers may override per call)."""
    service_url: str = ""
    """The service's login (libpq form for the formation queue's own pool)."""
    tenant: str | None = None
    """None in the shared runtime, whose engine sees no tenant data; set in ``for_tenant``'s copies."""
    searches: Slots = field(default_factory=lambda: Slots(10))
    """Search statements running at once (one per pooled connection), of which one API key runs at most its
    ``MEMSYS_TENANT_SHARE``: a key's wide searches queue behind each other, not in front of another key's."""

    def formation_llm(self) -> LLMClient | None:
        """The LLM formation uses: the server's own, when it has one and ``MEMSYS_FORMATION_LLM`` is ``server``;
        None forms offline."""
        if self.settings.formation_llm == "offline" or self.llm is None or not self.llm.configured:
            return None
        return self.llm

    def for_tenant(self, tenant: str) -> Runtime:
        """The same runtime (pool, providers) with every transaction in ``tenant``: services take this."""
        return dataclasses.replace(self, engine=scope.scoped(self.engine, tenant), tenant=tenant)

    @contextlib.asynccontextmanager
    async def kept_alive(self) -> AsyncIterator[None]:
        """While inside, the embedded server (the default, with no database URL) is started again if it dies;
        every long-running process (serve, worker, mcp) runs its work inside this."""
        every_s = self.settings.embedded_watch_seconds
        if self.settings.database_url or every_s <= 0:
            yield
            return
        watcher = asyncio.create_task(keep_running(self.settings.resolved_data_dir(), every_s))
        try:
            yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    def warm_up(self) -> None:
        """Load in the background what the first request would wait for: the embedding model (its worker
        process; unless ``embedding_preload`` is off), jieba's dictionary, the token vocabulary. Long-running
        processes (serve, worker, mcp) call this once they answer; a command that may never embed (export,
        import, keys) does not, and loads each when first used."""
        if self.settings.embedding_preload:
            self.embedder.start_loading()
            if self.xl_embedder is not None:
                self.xl_embedder.start_loading()
        threading.Thread(target=_warm_up_text, name="memsys-warm-up", daemon=True).start()

    async def close(self) -> None:
        if self.embedder is not None:  # a runtime for SQL only (tests, benchmarks) has none
            self.embedder.close()
        if self.xl_embedder is not None:
            self.xl_embedder.close()
        if self.llm is not None:
            await self.llm.close()
        await self.engine.dispose()
        if not self.settings.database_url:
            release_embedded(self.settings.resolved_data_dir())


def build_runtime(settings: Settings) -> Runtime:
    """Connect (starting the embedded server if no URL is set), migrate if asked, check that the schema is this
    code's and that the service's login is held by row-level security."""
    tracing.configure()  # OpenTelemetry's environment may ask for traces (app.observability.tracing)
    database_url = resolve_database_url(settings)
    service_url = service_database_url(settings, database_url)
    schema_ready(settings, database_url)
    migrate.check_embedding_dimensions(database_url, settings.embedding_dimensions)
    check_service_role(service_url)
    embedder = create_embedder(settings)  # the model loads later: Runtime.warm_up, or the first embed
    return Runtime(
        settings=settings,
        engine=scope.install(limit_statements(create_engine(service_url, settings), settings)),
        database_url=database_url,
        service_url=libpq_url(service_url),
        embedder=embedder,
        xl_embedder=create_xl_embedder(settings),
        llm=LLMClient.from_settings(settings),
        searches=Slots(search_slots(settings), settings.tenant_share),
    )


def search_slots(settings: Settings) -> int:
    """Search statements running at once: two per core (a statement is CPU work in PostgreSQL), at most one per
    pooled connection."""
    return max(2, min(settings.db_pool_size, 2 * (os.cpu_count() or 1)))


def _warm_up_text() -> None:
    tokenize.warm_up()
    tokens.warm_up()
