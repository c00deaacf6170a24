"""The Litestar app factory: ``create_app(settings)``."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import asynccontextmanager

import anyio
from litestar import Litestar

from app import queue
from app.agent.endpoints import AgentController
from app.agentic.endpoints import AgenticController
from app.compat.v0 import V0Controller
from app.compat.v1 import V1Controller
from app.compat.v2 import V2MemoryController
from app.context.endpoints import ContextController
from app.conversation_meta.endpoints import ConversationMetaController
from app.db.engine import psycopg_arguments
from app.forget.endpoints import ForgetController
from app.formation.endpoints import InstructionsController
from app.http.auth import KeyCache, authenticate
from app.http.docs import ClosedModelSchemas, PublicOperations, docs_asset, index, openapi_config
from app.http.errors import EXCEPTION_HANDLERS
from app.http.health import Readiness, health, live
from app.http.json_body import MemsysRequest
from app.http.limits import RequestLimit
from app.http.metrics import Gauges, metrics
from app.inspect.browser import InspectorSessions, security_headers
from app.inspect.endpoints import InspectorController
from app.inspect.rendering import template_config
from app.logs import start_line
from app.mcp.http import build_http, mcp_endpoint
from app.memories.endpoints import MemoriesController
from app.memorize.endpoints import MemorizeController
from app.observability import tracing
from app.observability.metrics import HTTP
from app.observability.request_ids import RequestIds
from app.proxy.endpoints import ProxyController
from app.retrieval.endpoints import RetrievalController
from app.runtime import build_runtime
from app.settings import Settings
from app.tenancy.service import refuse_open_anonymous
from app.tenancy.watch import KeysWatch
from app.transfer.endpoints import ExportController

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _told(listener: Callable[[BaseException], None] | None) -> Iterator[None]:
    """Tell ``listener`` of an exception raised inside, and let it go on."""
    try:
        yield
    except Exception as exc:
        if listener is not None:
            listener(exc)
        raise


def create_app(
    settings: Settings | None = None, *, startup_failed: Callable[[BaseException], None] | None = None
) -> Litestar:
    """The app; ``startup_failed`` is told why start-up failed (``memsys serve`` says it without a traceback)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncGenerator[None, None]:
        with _told(startup_failed):
            runtime = await anyio.to_thread.run_sync(build_runtime, settings)
        # The embedding model and the libraries leave half a million long-lived objects; a full garbage
        # collection walking them stopped the whole process for 0.3-0.6 s under load. Exempt them.
        gc.collect()
        gc.freeze()
        try:
            with _told(startup_failed):
                async with runtime.engine.connect() as conn:
                    await refuse_open_anonymous(conn, settings.host, settings.allow_anonymous)
            app.state.runtime = runtime
            app.state.key_cache = KeyCache(settings.key_cache_seconds)
            app.state.keys_watch = KeysWatch(runtime.service_url, app.state.key_cache.clear)
            app.state.inspector_sessions = InspectorSessions(runtime.engine)
            app.state.gauges = Gauges(settings.metrics_refresh_seconds)
            app.state.readiness = Readiness()
            _, app.state.mcp_sessions = build_http(settings.host)
            async with (
                runtime.kept_alive(),
                queue.open_queue(runtime.service_url, connect_arguments=psycopg_arguments(settings)) as jobs_app,
                app.state.mcp_sessions.run(),
            ):
                workers = (
                    asyncio.create_task(queue.run_workers(jobs_app, runtime, settings.workers))
                    if settings.workers > 0
                    else None
                )
                runtime.warm_up()
                if log.isEnabledFor(logging.INFO):
                    log.info(await start_line(runtime))
                watches = [asyncio.create_task(app.state.readiness.watch(runtime))]
                if not settings.db_transaction_pooler:  # a pooler drops notifications: requests look the keys up
                    watches.append(asyncio.create_task(app.state.keys_watch.run()))
                try:
                    yield
                finally:
                    for watch in watches:
                        watch.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await watch
                    if workers is not None:
                        await queue.stop_workers(workers)

        finally:
            await runtime.close()
            gc.unfreeze()

    app = Litestar(
        route_handlers=[
            index,
            docs_asset,
            health,
            live,
            metrics,
            ConversationMetaController,
            MemorizeController,
            RetrievalController,
            AgenticController,
            ContextController,
            AgentController,
            MemoriesController,
            ForgetController,
            ExportController,
            V0Controller,
            V1Controller,
            V2MemoryController,
            InstructionsController,
            InspectorController,
            ProxyController,
            mcp_endpoint,
        ],
        lifespan=[lifespan],
        guards=[authenticate],
        middleware=[HTTP.middleware, RequestLimit(settings)],
        before_send=[security_headers],
        exception_handlers=EXCEPTION_HANDLERS,
        request_class=MemsysRequest,
        request_max_body_size=settings.max_body_bytes,
        template_config=template_config(),
        openapi_config=openapi_config(),
        plugins=[PublicOperations(), ClosedModelSchemas(), *tracing.litestar_plugins()],
        logging_config=None,  # memsys's commands configure logging (app.logs); tests keep pytest's
    )
    app.asgi_handler = RequestIds(app.asgi_handler)  # outermost: unknown routes' answers carry an id too
    return app
