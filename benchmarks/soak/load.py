"""The soak benchmark's clients: tenants with keys, a mix of memorize, lightweight and agentic retrieval.

Each client belongs to one tenant and paces itself to ``rate`` requests a second. memorize sends a unique
``message_id`` per tenant and group; a 503 or a failed connection is retried with the same ``message_id`` after
a short back-off, as a client is told to (memorize is idempotent by ``message_id``). Every response is recorded
(operation, status, latency, time, whether an error had the envelope); every retrieval answer is searched for
the markers of the other tenants: each tenant's messages carry a word of their own.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

OPERATIONS = ("memorize", "retrieve_lightweight", "retrieve_agentic")
MIX = (0.70, 0.25, 0.05)
PATHS = {op: f"/api/v3/agentic/{op}" for op in OPERATIONS}
PEOPLE = {"u0": "Alice", "u1": "Bob", "u2": "Chen", "u3": "Dana", "u4": "Emeka"}
TOPICS = (
    "the release of version {n} moved to Friday because the payment tests failed",
    "wants to try the new hot pot place near the office on day {n}",
    "booked a trip to Kyoto for the autumn leaves, flying out on day {n}",
    "interviewed {n} candidates for the backend role and liked the one from Berlin",
    "shared the onboarding mock-ups; the colour palette number {n} is still open",
    "saw the database migration reach {n} percent before the rollback",
)
QUERIES = (
    "When is the release?",
    "Where is the trip to?",
    "How did the hiring go?",
    "What happened with the database migration?",
    "Which restaurant do they want to try?",
    "What is still open in the design?",
)
GIVE_UP_S = 120.0
"""A memorize still failing after this long is given up (recorded; its message may or may not be stored)."""


@dataclass(frozen=True)
class Tenant:
    name: str
    key: str
    marker: str
    """A word only this tenant's messages contain (``mrk<i>x``: no marker is part of another)."""
    groups: tuple[str, ...]


@dataclass(slots=True)
class Record:
    op: str
    tenant: str
    started: float
    """Seconds since the run's start (monotonic), as ``ended``."""
    ended: float
    status: int | None
    """HTTP status; None when no answer came (connection refused or reset, timeout)."""
    kind: str
    """``ok``, ``<status> <code>`` of an error, or the transport error's name."""
    envelope: bool
    """An error answer had the error envelope (``status: failed``, ``code``, ``message``, ``timestamp``, ``path``)."""
    mode: str | None = None
    """retrieve_agentic's ``retrieval_mode`` (``agentic`` or ``agentic_fallback``)."""

    @property
    def latency_ms(self) -> float:
        return (self.ended - self.started) * 1000


@dataclass
class Load:
    """The clients of one run and what they saw."""

    base_url: str
    tenants: list[Tenant]
    rate: float
    """Requests a second per client."""
    timeout_s: float
    seed: int = 17
    retry_429: bool = False
    """memorize retries a 429 too, after its ``Retry-After``, as the Python client does (the soak's burst counts them
    as refusals instead)."""
    t0: float = field(default_factory=time.monotonic)
    records: list[Record] = field(default_factory=list)
    attempted: set[tuple[str, str, str]] = field(default_factory=set)
    accepted: set[tuple[str, str, str]] = field(default_factory=set)
    """(tenant, group, message_id) of every message memorize answered 200 for."""
    gave_up: set[tuple[str, str, str]] = field(default_factory=set)
    leaks: list[dict] = field(default_factory=list)
    _http: httpx.AsyncClient | None = None
    _next_client: int = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def __aenter__(self) -> Load:
        limits = httpx.Limits(max_connections=2000, max_keepalive_connections=400)
        timeout = httpx.Timeout(self.timeout_s, connect=5.0)
        self._http = httpx.AsyncClient(base_url=self.base_url, limits=limits, timeout=timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    def clients(self, count: int, stop: asyncio.Event, over: list[Tenant] | None = None) -> list[asyncio.Task]:
        """``count`` more clients, spread over ``over`` (default: the tenants, evenly; a tenant listed ten times
        gets ten times the clients), running until ``stop`` is set."""
        over = over or self.tenants
        tasks = []
        for number in range(count):
            index = self._next_client
            self._next_client += 1
            tenant = over[number % len(over)]
            tasks.append(asyncio.create_task(self._client(index, tenant, stop), name=f"soak-client-{index}"))
        return tasks

    async def _client(self, index: int, tenant: Tenant, stop: asyncio.Event) -> None:
        rng = random.Random(self.seed * 100_003 + index)
        interval = 1 / self.rate
        headers = {"Authorization": f"Bearer {tenant.key}"}
        await asyncio.sleep(rng.uniform(0, interval))  # clients out of step
        sequence = 0
        while not stop.is_set():
            began = time.monotonic()
            op = rng.choices(OPERATIONS, MIX)[0]
            if op == "memorize":
                sequence += 1
                await self._memorize(rng, tenant, headers, f"c{index}-{sequence}")
            else:
                await self._retrieve(rng, op, tenant, headers)
            pause = interval - (time.monotonic() - began)
            if pause > 0:
                try:
                    await asyncio.wait_for(stop.wait(), pause)
                except TimeoutError:
                    pass

    async def _memorize(self, rng: random.Random, tenant: Tenant, headers: dict, message_id: str) -> None:
        group = rng.choice(tenant.groups)
        sender = rng.choice(list(PEOPLE))
        text = rng.choice(TOPICS).format(n=rng.randint(2, 99))
        body = {
            "group_id": group,
            "message_id": message_id,
            "create_time": datetime.now(UTC).isoformat(),
            "sender": sender,
            "sender_name": PEOPLE[sender],
            "content": f"{tenant.marker} {PEOPLE[sender]} says {text}",
        }
        key = (tenant.name, group, message_id)
        self.attempted.add(key)
        give_up = time.monotonic() + GIVE_UP_S
        backoff = 0.25
        while True:
            record, _ = await self._send("memorize", tenant, headers, body)
            if record.status == 200:
                self.accepted.add(key)
                return
            retryable = record.status is None or record.status == 503 or (self.retry_429 and record.status == 429)
            if not retryable or time.monotonic() + backoff > give_up:
                self.gave_up.add(key)
                return
            await asyncio.sleep(backoff * rng.uniform(0.5, 1.5))
            backoff = min(backoff * 2, 2.0)

    async def _retrieve(self, rng: random.Random, op: str, tenant: Tenant, headers: dict) -> None:
        body: dict = {"query": rng.choice(QUERIES), "top_k": 10}
        if op == "retrieve_lightweight":
            body |= {"data_source": rng.choice(("episode", "event_log")), "time_range_days": 100000}
            if rng.random() < 0.5:
                body["group_id"] = rng.choice(tenant.groups)
        else:
            body["group_id"] = rng.choice(tenant.groups)
        record, text = await self._send(op, tenant, headers, body)
        if record.status == 200:
            foreign = [t.name for t in self.tenants if t is not tenant and t.marker in text]
            if foreign:
                self.leaks.append({"op": op, "tenant": tenant.name, "saw": foreign, "at": round(record.started, 1)})

    async def _send(self, op: str, tenant: Tenant, headers: dict, body: dict) -> tuple[Record, str]:
        started = self.now()
        try:
            response = await self._http.post(PATHS[op], json=body, headers=headers)
        except httpx.TransportError as exc:
            record = Record(op, tenant.name, started, self.now(), None, type(exc).__name__, False)
            self.records.append(record)
            return record, ""
        record = Record(op, tenant.name, started, self.now(), response.status_code, "ok", False)
        text = response.text
        payload = _json(response)
        if response.status_code >= 400:
            record.envelope = _is_envelope(payload)
            record.kind = f"{response.status_code} {payload.get('code', '?') if isinstance(payload, dict) else '?'}"
        elif op == "retrieve_agentic" and isinstance(payload, dict):
            record.mode = ((payload.get("result") or {}).get("metadata") or {}).get("retrieval_mode")
        self.records.append(record)
        return record, text


def _json(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


def _is_envelope(payload: object) -> bool:
    return (
        isinstance(payload, dict)
        and payload.get("status") == "failed"
        and all(isinstance(payload.get(k), str) for k in ("code", "message", "timestamp", "path"))
    )
