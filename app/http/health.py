"""GET /health (readiness: does the database answer?) and GET /health/live (liveness: is the process serving?)."""

from __future__ import annotations

from litestar import Request, get
from sqlalchemy import text

from app import queue
from app.errors import ServiceUnavailable
from app.http.envelope import Envelope, ok
from app.memorize import service as memorize
from app.runtime import Runtime


@get("/health", operation_id="health", tags=["health"], opt={"public": True})
async def health(request: Request) -> Envelope[dict]:
    """200 when the database answers, with the formation backlog (jobs waiting, running and failed, the age of
    the oldest waiting one in seconds, messages waiting for formation and of those not yet searchable); 503
    with the error envelope when it does not. No key needed."""
    runtime: Runtime = request.app.state.runtime
    try:
        async with runtime.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
            formation = await queue.backlog(conn)
        formation |= await memorize.waiting_messages(runtime)
    except Exception as exc:  # noqa: BLE001  any failure to answer means the database is down
        raise ServiceUnavailable(f"The database is not answering ({type(exc).__name__})") from exc
    return ok("healthy", {"database": "ok", "formation": formation})


@get("/health/live", operation_id="health_live", tags=["health"], opt={"public": True})
async def live() -> Envelope[dict]:
    """200 while the process serves requests, whatever the database does: for an orchestrator's liveness
    probe (restart the process only when this fails), beside ``/health`` for readiness. No key needed."""
    return ok("alive", {})
