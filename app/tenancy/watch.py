"""Whether the database holds an active API key, known in the serving process without a query per request.

A request without a key is served anonymously (tenant ``default``) only while no active key exists; the HTTP guard
used to ask the database at every such request. ``KeysWatch`` keeps the answer instead: on a connection of its own
it LISTENs on ``memsys_keys``, which a trigger on ``api_keys`` notifies at the commit of any change to it (migration
0018), then asks once; each notification closes anonymous access at once and the watch asks again. Whenever the watch
is not listening (starting, the database gone, no trigger on Citus) ``anonymous`` is False and every request without
a key looks the keys up as before: the watch can only spare a query, never open access.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg

log = logging.getLogger(__name__)

CHANNEL = "memsys_keys"
TRIGGER = "api_keys_notify"
RETRY_S = 2.0

NO_ACTIVE_KEY = "SELECT NOT EXISTS (SELECT 1 FROM api_keys WHERE revoked_at IS NULL)"
HAS_TRIGGER = "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = %s AND tgrelid = to_regclass('api_keys'))"


class KeysWatch:
    """``anonymous``: True only while the watch listens and the database held no active key at its last look.
    ``on_change`` runs at each notification (the guard empties its cache of valid keys: a revoked key stops at
    once)."""

    def __init__(self, conninfo: str, on_change: Callable[[], None] = lambda: None) -> None:
        self._conninfo = conninfo
        self._on_change = on_change
        self.anonymous = False

    async def run(self) -> None:
        """Listen until cancelled, connecting again ``RETRY_S`` after a failure; returns at once where the
        database has no trigger to listen to (Citus)."""
        try:
            while True:
                try:
                    async with await psycopg.AsyncConnection.connect(
                        self._conninfo, autocommit=True, connect_timeout=10, application_name="memsys keys watch"
                    ) as conn:
                        if not (await (await conn.execute(HAS_TRIGGER, (TRIGGER,))).fetchone())[0]:
                            log.info("api_keys has no %s trigger: requests without a key look the keys up", TRIGGER)
                            return
                        await conn.execute(f"LISTEN {CHANNEL}")
                        await self._follow(conn)
                except (psycopg.Error, OSError) as exc:
                    self.anonymous = False
                    log.debug("keys watch: %s; again in %.0f s", exc, RETRY_S)
                await asyncio.sleep(RETRY_S)
        finally:
            self.anonymous = False

    async def _follow(self, conn: psycopg.AsyncConnection) -> None:
        while True:
            no_key = (await (await conn.execute(NO_ACTIVE_KEY)).fetchone())[0]
            # A change committed while that query ran has its notification waiting: ask again rather than trust it.
            if [notification async for notification in conn.notifies(timeout=0)]:
                self._on_change()
                continue
            self.anonymous = bool(no_key)
            async for _ in conn.notifies(stop_after=1):
                self.anonymous = False
                self._on_change()
