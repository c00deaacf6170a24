"""The batch helper (``memorize_conversation``) against a real ``memsys serve`` with an API key and the default share
of the server (64 request slots, 8 for one key): by default it stays inside the share (the old default, 8, was
refused 2 to 8 times in 419 messages, 6 once in three runs: a slot is freed a moment after its answer), and asked
for twice the share it narrows its window on the server's 429s, waits their Retry-After, and stores every message;
the progress bar counts the retries and shows the window. What the server answered is read from its own metrics."""

# ruff: noqa: F811  (test arguments name the fixtures imported from tests.integration_support)
from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime, timedelta

from tqdm import tqdm

from memsys import AsyncMemsys, Memsys, RateLimited, Unavailable
from memsys.batch import Pace
from tests.integration_support import _empty_tables, keys, server  # noqa: F401  (fixtures: the default share)
from tests.tenancy_support import refused_for_share

KEY_NAMES = ("batch",)
START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
MESSAGES = 419  # the conversation of the report: 8 of its requests were refused at the old default of 8
SHARE = 8  # of a default server: 64 slots x MEMSYS_TENANT_SHARE 0.125


def conversation(group: str, count: int = MESSAGES) -> list[dict]:
    return [
        {
            "group_id": group,
            "message_id": f"{group}-{n}",
            "create_time": START + timedelta(seconds=n),
            "sender": f"speaker{n % 4}",
            "content": f"Message {n} of the planning thread: the venue, the menu and who brings what",
        }
        for n in range(count)
    ]


def test_by_default_the_batch_stays_inside_its_keys_share(server, keys):
    before = refused_for_share(server.base_url)
    with Memsys(server.base_url, api_key=keys["batch"]) as client:
        results = client.memorize_conversation(conversation("default"), progress=False)
    assert [r.status_info for r in results] == ["accumulated"] * MESSAGES
    assert refused_for_share(server.base_url) == before


def test_asked_for_twice_its_share_it_narrows_to_the_share_and_stores_every_message(server, keys, capfd):
    before = refused_for_share(server.base_url)
    with Memsys(server.base_url, api_key=keys["batch"]) as client:
        results = client.memorize_conversation(conversation("greedy"), concurrency=2 * SHARE)
    refused = refused_for_share(server.base_url) - before
    assert [r.status_info for r in results] == ["accumulated"] * MESSAGES  # no 429 reached the caller
    assert SHARE <= refused < MESSAGES / 10, refused  # the first burst beyond the share, then a few
    bar = capfd.readouterr().err.replace("\r", "\n").splitlines()
    last = next(line for line in reversed(bar) if "in flight" in line)
    retried, window = map(int, re.search(r"(\d+) retried, at most (\d+) in flight", last).groups())
    assert f"{MESSAGES}/{MESSAGES}" in last and retried >= refused and window <= SHARE  # not the 16 asked for


def test_the_async_batch_too(server, keys):
    async def run() -> list[str]:
        async with AsyncMemsys(server.base_url, api_key=keys["batch"]) as client:
            results = await client.memorize_conversation(conversation("async", 120), concurrency=16, progress=False)
            return [r.status_info for r in results]

    before = refused_for_share(server.base_url)
    assert asyncio.run(run()) == ["accumulated"] * 120
    assert SHARE <= refused_for_share(server.base_url) - before < 30


def test_the_window_halves_once_per_retry_after_keeps_below_what_was_refused_and_grows_back_once_per_retry_after():
    pace = Pace(16, tqdm(disable=True))
    refused = RateLimited("over the share", status=429, code="TOO_MANY_REQUESTS", retry_after=0.2)
    pace.in_flight = 16
    assert not pace.may_start()
    for _ in range(8):  # a burst refused together: one signal
        pace.refused(refused)
    assert (pace.window, pace.ceiling, pace.retries) == (8, 15, 8)
    pace.in_flight = 7
    assert pace.may_start()
    pace.refused(Unavailable("busy", status=503, code="SERVICE_UNAVAILABLE"))  # counted, not a signal of the share
    for _ in range(50):  # answers within the Retry-After: its refusals may still be on their way
        pace.answered()
    assert (pace.window, pace.retries) == (8, 9)
    time.sleep(0.25)
    for _ in range(50):
        pace.answered()
    assert pace.window == 9  # one more per Retry-After without a refusal
    pace.refused(refused)  # a new signal, however soon after the window grew
    assert (pace.window, pace.ceiling) == (4, 8)
    for _ in range(8):
        time.sleep(0.21)
        pace.answered()
    assert pace.window == 8  # never again what was refused
