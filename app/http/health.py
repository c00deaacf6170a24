"""GET /health (readiness: can memsys answer a search? its database answers and its embedding model has loaded)
and GET /health/live (liveness: is the process serving?)."""

from __future__ import annotations

import asyncio
import logging
import time

from litestar import Request, get
from sqlalchemy import text

from app import queue
from app.errors import NotReady, ServiceUnavailable
from app.http.envelope import Envelope, ok
from app.memorize import service as memorize
from app.runtime import Runtime

log = logging.getLogger(__name__)

PROBE_AGAIN_S = 1.0


class Readiness:
    """Whether the embedding model answers yet: a server is not ready before it, since every search embeds its
    query (it would wait for the model, seconds on a first start). Watched once, at start-up (``watch``)."""

    def __init__(self) -> None:
        self.waiting_for: str | None = "the embedding model to load"
        self._since = time.monotonic()

    async def watch(self, runtime: Runtime) -> None:
        """Embed a query with each embedder a search uses until they answer; then ready for good. With
        ``MEMSYS_EMBEDDING_PRELOAD`` off the model loads at the first search: ready at once."""
        if not runtime.settings.embedding_preload:
            self.waiting_for = None
            return
        embedders = [runtime.embedder, *([runtime.xl_embedder] if runtime.xl_embedder is not None else [])]
        while True:
            try:
                for embedder in embedders:
                    await embedder.embed(["ready"], query=True)
            except Exception as exc:  # noqa: BLE001  said by /health until it answers
                self.waiting_for = f"the embedding model, which failed: {exc}"
                await asyncio.sleep(PROBE_AGAIN_S)
                continue
            log.debug("ready %.1fs after start-up", time.monotonic() - self._since)
            self.waiting_for = None
            return

    def check(self) -> None:
        if self.waiting_for is not None:
            raise NotReady(f"Starting: waiting for {self.waiting_for} ({time.monotonic() - self._since:.0f}s so far)")


@get("/health", operation_id="health", tags=["health"], opt={"public": True})
async def health(request: Request) -> Envelope[dict]:
    """Readiness, for a load balancer or Kubernetes: 200 when the database answers and the embedding model has
    loaded, with the formation backlog (jobs waiting, running and failed, the age of the oldest waiting one in
    seconds, messages waiting for formation and of those not yet searchable); 503 with the error envelope saying
    which is missing otherwise. No key needed."""
    runtime: Runtime = request.app.state.runtime
    request.app.state.readiness.check()
    try:
        async with runtime.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
            formation = await queue.backlog(conn)
        formation |= await memorize.waiting_messages(runtime)
    except Exception as exc:  # noqa: BLE001  any failure to answer means the database is down
        raise ServiceUnavailable(f"The database is not answering ({type(exc).__name__})") from exc
    return ok("healthy", {"database": "ok", "embedding": "ok", "formation": formation})


@get("/health/live", operation_id="health_live", tags=["health"], opt={"public": True})
async def live() -> Envelope[dict]:
    """200 while the process serves requests, whatever the database does: for an orchestrator's liveness
    probe (restart the process only when this fails), beside ``/health`` for readiness. No key needed."""
    return ok("alive", {})
