"""OpenTelemetry traces (app.observability.tracing), into an in-memory exporter installed as the process's tracer
provider, as a host application would: a request's span (Litestar's middleware, honouring the caller's
``traceparent``) holds its search, its query's embedding and its LLM call with their token counts; a formation job
is a trace of its own holding its embeddings. No text of a message, query or memory is in any span."""

from __future__ import annotations

import re

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.formation_helpers import app_client, wait_for

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def _named(exporter: InMemorySpanExporter, name: str) -> list:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _ancestors(exporter: InMemorySpanExporter, span) -> list[str]:
    by_id = {s.context.span_id: s for s in exporter.get_finished_spans()}
    names = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


def _tokens(client) -> dict[str, float]:
    found = re.findall(
        r'^memsys_llm_tokens_total\{direction="(\w+)"\} ([0-9.e+]+)$',
        client.get("/metrics", headers={"Authorization": "Bearer scrape"}).text,
        re.M,
    )
    return {"input": 0.0, "output": 0.0, **{direction: float(value) for direction, value in found}}


def test_a_request_formation_and_llm_call_are_traced(spans, settings, database_url, fake_llm) -> None:
    with app_client(
        settings,
        llm_api_key="test-key",
        llm_base_url=fake_llm.base_url,
        llm_allow_private_urls=True,
        formation_llm="offline",
        metrics_token="scrape",
    ) as client:
        for i, text in enumerate(["The zeppelin tour is on Friday", "Bring the blue umbrella"]):
            message = {"group_id": "trip", "sender": "alice", "message_id": f"m{i}", "content": text}
            answer = client.post("/api/v3/agentic/memorize", json={**message, "create_time": f"2026-03-01T10:0{i}:00Z"})
            assert answer.status_code == 200, answer.text
        assert client.post("/api/v3/agentic/flush", json={"group_id": "trip"}).status_code == 200
        wait_for(database_url, "SELECT count(*) > 0 FROM memories WHERE group_id = 'trip'", True)
        spans.clear()
        found = client.post(
            "/api/v3/agentic/retrieve_lightweight",
            json={"query": "zeppelin", "group_id": "trip", "top_k": 3},
            headers={"traceparent": TRACEPARENT},
        )
        assert found.status_code == 200, found.text
        [search] = _named(spans, "memsys.retrieval.search")
        assert format(search.context.trace_id, "032x") == TRACE_ID  # the caller's trace, carried on
        assert search.attributes["mode"] == "rrf" and search.attributes["memsys.rows"] >= 1
        assert any("POST" in name for name in _ancestors(spans, search)), _ancestors(spans, search)
        [query_embedding] = [s for s in _named(spans, "memsys.embedding") if s.attributes["role"] == "query"]
        assert query_embedding.context.trace_id == search.context.trace_id

        spans.clear()
        before = _tokens(client)
        fake_llm.on("is_sufficient", {"is_sufficient": True, "reasoning": "enough", "refined_queries": []})
        agentic = client.post(
            "/api/v3/agentic/retrieve_agentic", json={"query": "What is on Friday?", "group_id": "trip", "top_k": 3}
        )
        assert agentic.status_code == 200, agentic.text
        [llm] = _named(spans, "memsys.llm.chat")
        assert llm.attributes["gen_ai.usage.input_tokens"] == 1 and llm.attributes["gen_ai.usage.output_tokens"] == 1
        assert llm.attributes["gen_ai.request.model"]
        # And as metrics: the fake LLM counts one token each way.
        assert _tokens(client) == {"input": before["input"] + 1, "output": before["output"] + 1}
        assert any("POST" in name for name in _ancestors(spans, llm))

        spans.clear()
        fake_llm.force("It is the zeppelin tour.")
        chat = client.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "What is on Friday?"}], "user": "alice"},
        )
        assert chat.status_code == 200, chat.text
        [relayed] = _named(spans, "memsys.llm.chat")
        assert relayed.attributes["gen_ai.request.model"] and relayed.attributes["memsys.proxy"] is True
        fake_llm.force(None)

        spans.clear()
        answer = client.post(
            "/api/v3/agentic/memorize",
            json={
                "group_id": "trip",
                "sender": "alice",
                "message_id": "m9",
                "content": "Dinner is at eight",
                "create_time": "2026-03-01T11:00:00Z",
            },
        )
        assert answer.status_code == 200
        assert client.post("/api/v3/agentic/flush", json={"group_id": "trip"}).status_code == 200
        wait_for(database_url, "SELECT count(*) > 0 FROM memories WHERE content LIKE '%%Dinner%%'", True)
    formed = [s for s in _named(spans, "memsys.formation.stream") if s.attributes.get("memsys.memories", 0) > 0]
    assert formed and formed[0].attributes["memsys.stream_kind"] == "group"
    memory_embeddings = [s for s in _named(spans, "memsys.embedding") if s.attributes["role"] == "memory"]
    assert memory_embeddings and all("memsys.formation.stream" in _ancestors(spans, s) for s in memory_embeddings)
    for span in spans.get_finished_spans():
        text = " ".join(str(v) for v in span.attributes.values())
        assert "Dinner" not in text and "zeppelin" not in text and "Friday" not in text, span
