"""The faults the soak benchmark injects while the load runs, each for a window, and how each is undone.

PostgreSQL faults are signals to the embedded postmaster (SIGINT: fast shutdown, SIGQUIT: immediate
shutdown, SIGKILL: ``kill -9``); starting it again is memsys's job, not ours. Processes killed with ``kill -9``
(the worker, the server) are started again by the harness when the window ends, as a supervisor would. The
LLM answers slowly (longer than memsys's LLM timeout), answers garbage, or goes away (its port closed);
the embedder answers 500; a client holds every free PostgreSQL connection, one of them with a lock that
memorize waits for (so memsys's pool fills with waiting requests); a burst of clients sends ten times the
normal rate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import psycopg

from benchmarks.fake_llm import EMBEDDINGS, FakeLLM, Reply
from benchmarks.soak.load import Load
from benchmarks.soak.memsys import Memsys, answer, garbage

FAULTS = (
    "pg_fast",
    "llm_slow",
    "worker_kill",
    "embedder_fail",
    "pg_immediate",
    "burst",
    "llm_garbage",
    "server_kill",
    "pool_full",
    "llm_away",
    "pg_kill",
)
"""Every fault, in the order a run injects them (kinds alternate, so one fault's recovery is not the next's)."""

PROBE = {name: "memorize" for name in FAULTS} | {
    "llm_slow": "retrieve_agentic",
    "llm_garbage": "retrieve_agentic",
    "llm_away": "retrieve_agentic",
    "embedder_fail": "retrieve_lightweight",
}
"""The operation whose first success after a fault says the service is back: agentic retrieval answered by
the LLM (not its fallback) after an LLM fault, lightweight retrieval (it embeds the query) after an
embedder fault, memorize after the others."""

POSTGRES_SIGNALS = {"pg_fast": signal.SIGINT, "pg_immediate": signal.SIGQUIT, "pg_kill": signal.SIGKILL}


@dataclass
class Injection:
    name: str
    injected: float
    """Seconds since the run's start, as ``cleared``."""
    cleared: float | None = None
    detail: dict = field(default_factory=dict)
    repaired: str | None = None
    """What the harness had to do because memsys did not recover by itself within the deadline."""


class Faults:
    """Injects and clears faults on one run's memsys, test servers and load."""

    def __init__(
        self,
        memsys: Memsys,
        llm: FakeLLM,
        embedder: FakeLLM,
        load: Load,
        owner_url: str,
        *,
        slow_s: float,
        burst_clients: int,
    ) -> None:
        self.memsys, self.llm, self.embedder, self.load = memsys, llm, embedder, load
        self.owner_url = owner_url
        self.slow_s = slow_s
        self.burst_clients = burst_clients
        self.background: list[asyncio.Task] = []
        """Burst clients: stopped when the burst ends, awaited with the others at the end of the run."""
        self._held: list[psycopg.Connection] = []
        self._burst_stop: asyncio.Event | None = None
        self._active: set[str] = set()

    async def inject(self, name: str) -> Injection:
        injection = Injection(name, self.load.now())
        self._active.add(name)
        injection.detail = await self._inject[name](self) or {}
        return injection

    async def clear(self, injection: Injection) -> None:
        await self._clear.get(injection.name, _nothing)(self)
        self._active.discard(injection.name)
        injection.cleared = self.load.now()

    async def repair(self, injection: Injection) -> None:
        """memsys did not come back within the deadline: make the run go on, and say what was done.
        A PostgreSQL that nobody started again is started by ``memsys db-url``; a server that died, restarted."""
        if injection.name in POSTGRES_SIGNALS and self.memsys.postmaster_pid() is None:
            await asyncio.to_thread(self.memsys.owner_url)
            injection.repaired = "PostgreSQL was still down: the harness started it (memsys db-url)"
        elif self.memsys.pid("serve") is None:
            await asyncio.to_thread(self.memsys.start, "serve")
            injection.repaired = "memsys serve had exited: the harness started it"

    async def restore_all(self) -> None:
        """Undo every fault still active (the end of a run, or an error in the middle of one)."""
        for name in list(self._active):
            await self._clear.get(name, _nothing)(self)
        self._active.clear()

    # --- PostgreSQL ---------------------------------------------------------------------------------
    async def _postgres(self, sig: signal.Signals) -> dict:
        return {"postmaster_pid": self.memsys.signal_postgres(sig), "signal": sig.name}

    async def _pg_fast(self) -> dict:
        return await self._postgres(signal.SIGINT)

    async def _pg_immediate(self) -> dict:
        return await self._postgres(signal.SIGQUIT)

    async def _pg_kill(self) -> dict:
        return await self._postgres(signal.SIGKILL)

    async def _hold_connections(self) -> dict:
        """A client takes every free PostgreSQL connection, and in one of them a lock that memorize's insert
        waits for: memsys's requests hold their pooled connections while they wait, and the pool cannot grow."""

        def hold() -> str:
            locker = psycopg.connect(self.owner_url, connect_timeout=3)
            locker.execute("LOCK TABLE messages IN SHARE MODE")  # until the transaction ends (at close)
            self._held.append(locker)
            while len(self._held) < 1000:
                try:
                    self._held.append(psycopg.connect(self.owner_url, connect_timeout=3, autocommit=True))
                except psycopg.OperationalError as exc:
                    return str(exc).strip().splitlines()[-1]
            return "stopped at 1000"

        refusal = await asyncio.to_thread(hold)
        return {"connections_held": len(self._held), "lock": "messages IN SHARE MODE", "then": refusal}

    async def _release_connections(self) -> None:
        held, self._held = self._held, []
        await asyncio.to_thread(lambda: [conn.close() for conn in held])

    # --- processes ----------------------------------------------------------------------------------
    async def _kill_worker(self) -> dict:
        return self.memsys.kill("worker")

    async def _start_worker(self) -> None:
        await asyncio.to_thread(self.memsys.start, "worker")

    async def _kill_server(self) -> dict:
        return self.memsys.kill("serve")

    async def _start_server(self) -> None:
        await asyncio.to_thread(self.memsys.start, "serve")

    # --- the LLM and the embedder -------------------------------------------------------------------
    async def _llm_slow(self) -> dict:
        self.llm.force(lambda body: dataclasses.replace(answer(body), delay=self.slow_s))
        return {"delay_s": self.slow_s}

    async def _llm_garbage(self) -> dict:
        self.llm.force(garbage)
        return {}

    async def _llm_normal(self) -> None:
        self.llm.force(None)

    async def _llm_away(self) -> dict:
        self.llm.go_away()
        return {"port": self.llm.port}

    async def _llm_back(self) -> None:
        self.llm.come_back()

    async def _embedder_fail(self) -> dict:
        self.embedder.force(Reply(status=500, json_body={"error": {"message": "soak: embedder down"}}), EMBEDDINGS)
        return {"status": 500}

    async def _embedder_normal(self) -> None:
        self.embedder.force(None, EMBEDDINGS)

    # --- load -------------------------------------------------------------------------------------
    async def _burst(self) -> dict:
        self._burst_stop = asyncio.Event()
        self.background += self.load.clients(self.burst_clients, self._burst_stop)
        return {"extra_clients": self.burst_clients}

    async def _burst_end(self) -> None:
        if self._burst_stop is not None:
            self._burst_stop.set()

    _inject: dict[str, Callable[[Faults], Awaitable[dict | None]]] = {
        "pg_fast": _pg_fast,
        "pg_immediate": _pg_immediate,
        "pg_kill": _pg_kill,
        "worker_kill": _kill_worker,
        "server_kill": _kill_server,
        "llm_slow": _llm_slow,
        "llm_garbage": _llm_garbage,
        "llm_away": _llm_away,
        "embedder_fail": _embedder_fail,
        "pool_full": _hold_connections,
        "burst": _burst,
    }
    _clear: dict[str, Callable[[Faults], Awaitable[None]]] = {
        "worker_kill": _start_worker,
        "server_kill": _start_server,
        "llm_slow": _llm_normal,
        "llm_garbage": _llm_normal,
        "llm_away": _llm_back,
        "embedder_fail": _embedder_normal,
        "pool_full": _release_connections,
        "burst": _burst_end,
    }


async def _nothing(faults: Faults) -> None:
    """Signals to PostgreSQL are not undone by the harness: memsys starts it again."""
