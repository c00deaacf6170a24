"""Issue 27: one tenant cannot take another's capacity. A real ``memsys serve`` on a real socket, two tenants with
their own keys, small limits: slow bodies and heads, fan-out, a key over its share, a client that disconnects,
a request over its deadline, and the browser checks (Host, Origin, Content-Type)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ServerProcess, empty_tables, process_env
from tests.tenancy_support import bearer, create_key

SEARCH = "/api/v1/memories/search"
RETRIEVE = "/api/v3/agentic/retrieve_lightweight"
GROUPS = [f"g{n}" for n in range(50)]
# The heaviest search the caps allow: three memory types and profiles in each of 50 groups.
FAN_OUT = {
    "query": "what did we decide about the launch",
    "memory_types": ["episodic_memory", "event_log", "foresight", "profile"],
    "filters": {"user_id": "u1", "group_id": {"in": GROUPS}},
}
LIMITS = {
    "MEMSYS_MAX_CONCURRENT_REQUESTS": "8",
    "MEMSYS_TENANT_SHARE": "0.25",  # two requests of one key at a time
    "MEMSYS_BODY_TIMEOUT_SECONDS": "2",
    "MEMSYS_HEADER_TIMEOUT_SECONDS": "2",
    "MEMSYS_REQUEST_TIMEOUT_SECONDS": "30",
}


@pytest.fixture(scope="module")
def keys(database_url: str) -> Iterator[dict[str, str]]:
    yield {"noisy": create_key(database_url, "noisy"), "good": create_key(database_url, "good")}
    empty_tables(database_url)


@pytest.fixture(scope="module")
def server(database_url: str, keys: dict[str, str]) -> Iterator[ServerProcess]:
    from pathlib import Path

    process = ServerProcess({**process_env(database_url), **LIMITS}, cwd=Path(__file__).resolve().parent.parent)
    process.start(timeout=120)
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _empty_tables() -> Iterator[None]:
    """The keys live for the module: the tables are not emptied between these tests."""
    yield


def good_retrieve(server: ServerProcess, key: str) -> httpx.Response:
    body = {"query": "launch", "group_id": "g1", "top_k": 3}
    return httpx.post(server.base_url + RETRIEVE, json=body, headers=bearer(key), timeout=30)


def rejected(server: ServerProcess, reason: str) -> float:
    for line in httpx.get(server.base_url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(f'memsys_requests_rejected_total{{reason="{reason}"}}'):
            return float(line.split()[-1])
    return 0.0


def searches_made(server: ServerProcess) -> float:
    """Hybrid searches the server has run (each one statement), every retrieval mode together."""
    lines = httpx.get(server.base_url + "/metrics", timeout=30).text.splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith("memsys_retrieval_duration_seconds_count"))


def raw_connection(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def read_answer(sock: socket.socket, within_s: float) -> bytes:
    sock.settimeout(within_s)
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except TimeoutError:
        pass
    return answer


def test_fan_out_is_capped_and_repeats_are_searched_once(server, keys):
    headers = bearer(keys["noisy"])
    too_many_groups = {**FAN_OUT, "filters": {"user_id": "u1", "group_id": {"in": [f"g{n}" for n in range(51)]}}}
    answer = httpx.post(server.base_url + SEARCH, json=too_many_groups, headers=headers, timeout=30)
    assert answer.status_code == 400 and "group_id" in answer.json()["message"]
    too_many_types = {**FAN_OUT, "memory_types": [f"type{n}" for n in range(9)]}
    answer = httpx.post(server.base_url + SEARCH, json=too_many_types, headers=headers, timeout=30)
    assert answer.status_code == 400 and "memory_types" in answer.json()["message"]
    # 1,000 repeats of one type in one group: one search, not a thousand.
    repeats = {"query": "launch", "memory_types": ["event_log"] * 1000, "filters": {"group_id": "g1"}}
    before = searches_made(server)
    answer = httpx.post(server.base_url + SEARCH, json=repeats, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert searches_made(server) == before + 1
    huge_page = {"memory_type": "event_log", "page": 10**30, "filters": {"group_id": "g1"}}
    answer = httpx.post(server.base_url + "/api/v1/memories/get", json=huge_page, headers=headers, timeout=30)
    assert answer.status_code == 400 and "page" in answer.json()["message"]


def test_a_key_over_its_share_gets_429_and_the_other_tenant_is_served(server, keys):
    noisy = bearer(keys["noisy"])
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        floods = [
            pool.submit(httpx.post, server.base_url + SEARCH, json=FAN_OUT, headers=noisy, timeout=60) for _ in range(6)
        ]
        time.sleep(0.3)
        good = good_retrieve(server, keys["good"])
        answers = [flood.result() for flood in floods]
    assert good.status_code == 200, good.text
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses.count(200) >= 2 and 429 in statuses and set(statuses) <= {200, 429}, statuses
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["retry-after"] == "2"
    assert refused.json()["code"] == "TOO_MANY_REQUESTS" and "MEMSYS_TENANT_SHARE" in refused.json()["message"]


def test_a_key_using_exactly_its_share_is_never_refused(server, keys):
    """Two clients of one key (its share), each sending its next request as soon as it has the answer: the slot is
    free by the time the answer arrives, so neither ever meets a 429."""
    headers = bearer(keys["good"])

    def one_after_another(n: int) -> list[int]:
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as http:
            body = {"query": "launch", "group_id": "g1", "top_k": 1, "retrieval_mode": "bm25"}
            return [http.post(RETRIEVE, json=body).status_code for _ in range(n)]

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        statuses = [status for run in pool.map(one_after_another, [60, 60]) for status in run]
    assert statuses == [200] * 120, sorted(set(statuses))


def test_slow_bodies_hold_no_slot_and_are_cut_off(server, keys):
    head = (
        f"POST {RETRIEVE} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {keys['noisy']}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    ).encode()
    trickling = []
    for _ in range(12):  # more than the 8 request slots
        sock = raw_connection(server)
        sock.sendall(head)
        trickling.append(sock)
    try:
        time.sleep(0.5)
        started = time.monotonic()
        good = good_retrieve(server, keys["good"])
        assert good.status_code == 200, good.text
        assert time.monotonic() - started < 5  # it did not wait for a slot the tricklers hold
        answers = [read_answer(sock, within_s=6) for sock in trickling]
    finally:
        for sock in trickling:
            sock.close()
    assert all(answer.startswith(b"HTTP/1.1 408") and b"MEMSYS_BODY_TIMEOUT_SECONDS" in answer for answer in answers)


def test_an_incomplete_request_head_is_closed(server):
    sock = raw_connection(server)
    try:
        sock.sendall(b"POST /api/v3/agentic/memorize HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        assert read_answer(sock, within_s=8) == b""  # closed without an answer
        assert time.monotonic() - started < 7
    finally:
        sock.close()


def test_a_client_that_disconnects_stops_its_request(server, keys):
    before = rejected(server, "client_gone")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.base_url + SEARCH, json=FAN_OUT, headers=bearer(keys["noisy"]), timeout=0.3)
    deadline = time.monotonic() + 10
    while rejected(server, "client_gone") == before:
        assert time.monotonic() < deadline, "the request went on after its client left"
        time.sleep(0.1)


def test_browser_checks(server, keys):
    headers = bearer(keys["good"])
    body = {"query": "launch", "group_id": "g1"}
    # DNS rebinding: a request without a key under a foreign Host name.
    answer = httpx.post(server.base_url + RETRIEVE, json=body, headers={"Host": "evil.example"}, timeout=30)
    assert answer.status_code == 403 and answer.json()["code"] == "FORBIDDEN" and "Host" in answer.json()["message"]
    # A page of another origin.
    answer = httpx.post(
        server.base_url + RETRIEVE, json=body, headers={**headers, "Origin": "http://evil.example"}, timeout=30
    )
    assert answer.status_code == 403 and "Origin" in answer.json()["message"]
    same_origin = {**headers, "Origin": server.base_url}
    assert httpx.post(server.base_url + RETRIEVE, json=body, headers=same_origin, timeout=30).status_code == 200
    # A form or text/plain post (what a page may send anywhere without asking) is not read as JSON.
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        answer = httpx.post(
            server.base_url + RETRIEVE,
            content=b'{"query": "launch", "group_id": "g1"}',
            headers={**headers, "Content-Type": content_type},
            timeout=30,
        )
        assert answer.status_code == 415 and "Content-Type" in answer.json()["message"], answer.text


def test_a_request_over_its_deadline_is_stopped(database_url, keys, server_process_factory, fake_llm):
    """An agentic call whose LLM answers after 10 s is stopped at the 2 s deadline; a quick search is not."""
    from benchmarks.fake_llm import Reply

    env = {**process_env(database_url), **LIMITS, "MEMSYS_REQUEST_TIMEOUT_SECONDS": "2"}
    quick = server_process_factory({**env, "MEMSYS_LLM_ALLOW_PRIVATE_URLS": "true"})
    quick.start(timeout=120)
    fake_llm.handler = lambda body: Reply(content={"is_sufficient": True, "refined_queries": []}, delay=10)
    slow = {
        "query": "launch",
        "group_id": "g1",
        "llm_config": {"api_key": "k", "base_url": fake_llm.base_url, "model": "m"},
    }
    answer = httpx.post(
        quick.base_url + "/api/v3/agentic/retrieve_agentic", json=slow, headers=bearer(keys["noisy"]), timeout=30
    )
    assert answer.status_code == 504, answer.text
    assert answer.json()["code"] == "REQUEST_TIMEOUT" and "MEMSYS_REQUEST_TIMEOUT_SECONDS" in answer.json()["message"]
    quick_one = {"query": "launch", "group_id": "g1", "retrieval_mode": "bm25"}  # no model to wait for
    answer = httpx.post(quick.base_url + RETRIEVE, json=quick_one, headers=bearer(keys["good"]), timeout=30)
    assert answer.status_code == 200, answer.text  # a quick request is not cut


def test_mcp_refusals_are_the_error_envelope(server, keys):
    accept = {"Accept": "application/json, text/event-stream"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    answer = httpx.post(server.base_url + "/mcp", json=hello, headers=accept, timeout=30)
    assert answer.status_code == 401 and answer.json()["code"] == "UNAUTHORIZED", answer.text
    too_big = b'{"x": "' + b"a" * (1024 * 1024 + 10) + b'"}'
    headers = {**accept, **bearer(keys["good"]), "Content-Type": "application/json"}
    answer = httpx.post(server.base_url + "/mcp", content=too_big, headers=headers, timeout=30)
    assert answer.status_code == 413 and answer.json()["code"] == "PAYLOAD_TOO_LARGE", answer.text


def test_a_refusal_in_front_of_the_inspector_carries_its_security_headers(server):
    answer = httpx.get(server.base_url + "/inspect", headers={"Host": "evil.example"}, timeout=30)
    assert answer.status_code == 403
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["x-frame-options"] == "DENY" and answer.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(("size", "share"), [(1, 1.0), (2, 0.5)])
def test_a_request_cancelled_while_its_slot_frees_does_not_go_on(size, share):
    """The deadline (or a client gone) cancels a request while it waits for a slot (an LLM call's, a search's):
    a call cancelled before it ran does not run, in whichever turn of the loop after the slot frees the
    cancellation comes (``asyncio.wait_for`` of Python 3.11 returned the slot and dropped a cancellation that came
    as it was granted: the LLM call ran to its end, a 200 after 12 s where the deadline said 504 at 2 s)."""
    import asyncio

    from app.concurrency import PRINCIPAL, Slots

    async def scenario(turns: int) -> tuple[bool, bool]:
        PRINCIPAL.set("key")  # one key: with a share of 0.5 it holds one of the two slots at a time
        slots = Slots(size, share)
        gate = asyncio.Event()
        went_on = False

        async def holder() -> None:
            async with slots.slot(5, lambda: RuntimeError("refused")):
                await gate.wait()

        async def call() -> None:
            nonlocal went_on
            async with slots.slot(5, lambda: RuntimeError("refused")):
                went_on = True

        holding = asyncio.create_task(holder())
        await asyncio.sleep(0)
        task = asyncio.create_task(call())
        await asyncio.sleep(0)  # the call waits for the slot the holder has
        gate.set()
        for _ in range(turns):  # the holder gives its slot to the call; the call's deadline comes this many turns on
            await asyncio.sleep(0)
        cancelled = task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await holding
        PRINCIPAL.set(None)  # every slot is free again: as many calls as slots hold them at once
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(size):
                await stack.enter_async_context(slots.slot(0.1, lambda: RuntimeError("a slot was kept")))
        return cancelled, went_on

    outcomes = [asyncio.run(scenario(turns)) for turns in range(6)]
    assert [went_on for cancelled, went_on in outcomes] == [not cancelled for cancelled, went_on in outcomes]
    assert {went_on for _, went_on in outcomes} == {True, False}  # both: cancelled in time, and finished first
