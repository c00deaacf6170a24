"""A tenant's extraction instructions: set through the API and the CLI, kept per tenant by row-level security,
carried (fenced) into the LLM's formation prompts for the app and project they name, with profile fields of the
tenant's own; the answers are still read against memsys's own schemas. With an LLM an agent case is the LLM's
reading of the session (schema-constrained), the rules' when the answer does not fit."""

from __future__ import annotations

import json

import pytest
from litestar.testing import TestClient

from app.settings import Settings
from benchmarks.fake_llm import FakeLLM
from tests.conftest import run_memsys
from tests.formation_helpers import FLUSH, MEMORIZE, app_client, conversation
from tests.tenancy_support import create_key
from tests.test_formation_llm import EXTRACTED, SAME_EPISODE

URL = "/api/v3/agentic/instructions"


def test_set_list_and_remove_through_the_api(client: TestClient) -> None:
    saved = client.put(URL, json={"instructions": "Note every deadline.", "profile_fields": ["deadline_style"]})
    assert saved.status_code == 200, saved.text
    assert saved.json()["result"] | {"updated_at": None} == {
        "app_id": "*",
        "project_id": "*",
        "instructions": "Note every deadline.",
        "profile_fields": ["deadline_style"],
        "updated_at": None,
    }
    client.put(URL, json={"app_id": "shop", "instructions": "Shop: note orders."})
    listed = client.get(URL).json()["result"]["instructions"]
    assert [(row["app_id"], row["project_id"]) for row in listed] == [("*", "*"), ("shop", "*")]
    for body, field in [
        ({"instructions": "x" * 4001}, "instructions"),
        ({"profile_fields": ["Not A Field"]}, "profile_fields"),
        ({"profile_fields": ["f"] * 21}, "profile_fields"),
        ({"instructions": "x", "schema": {"type": "xml"}}, "schema"),
    ]:
        refused = client.put(URL, json=body)
        assert refused.status_code == 400 and field in refused.json()["message"], refused.text
    assert client.delete(URL, params={"app_id": "shop"}).status_code == 200
    assert client.delete(URL, params={"app_id": "shop"}).status_code == 404
    assert len(client.get(URL).json()["result"]["instructions"]) == 1


def test_instructions_are_the_tenants_own(database_url: str, settings: Settings) -> None:
    first, second = create_key(database_url, "tenant_a"), create_key(database_url, "tenant_b")
    with app_client(settings) as client:
        put = client.put(URL, json={"instructions": "A's secret style"}, headers={"Authorization": f"Bearer {first}"})
        assert put.status_code == 200
        seen = client.get(URL, headers={"Authorization": f"Bearer {second}"}).json()["result"]["instructions"]
        assert seen == []


PROFILE_WITH_OWN_FIELD = {
    "profiles": [{"user_id": "user_001", "profile": {"name": "Zhang San", "favourite_food": "ramen"}}]
}


@pytest.mark.parametrize("app_id", ["default", "shop"])
def test_the_llm_prompts_carry_the_most_specific_instructions(
    settings: Settings, fake_llm: FakeLLM, database_url: str, app_id: str
) -> None:
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', EXTRACTED).on('"profiles"', PROFILE_WITH_OWN_FIELD)
    llm = {"llm_api_key": "k", "llm_base_url": fake_llm.base_url, "llm_timeout_s": 5.0, "llm_max_retries": 0}
    with app_client(settings, **llm) as client:
        client.put(
            URL, json={"instructions": "TENANT-WIDE: write titles in capitals.", "profile_fields": ["favourite_food"]}
        )
        client.put(URL, json={"app_id": "shop", "instructions": "SHOP: mention the order number."})
        for body in conversation()[:3]:
            assert client.post(MEMORIZE, json={**body, "app_id": app_id}).status_code == 200
        assert client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]["status_info"] == "extracted"
        profiles = client.post(
            "/api/v3/agentic/retrieve_lightweight",
            json={"user_id": "user_001", "group_id": "group_123", "data_source": "profile"},
        ).json()["result"]["memories"]
    extraction = next(p for p in fake_llm.prompts() if '"event_log"' in p)
    profile_prompt = next(p for p in fake_llm.prompts() if '"profiles"' in p)
    expected = "SHOP: mention the order number." if app_id == "shop" else "TENANT-WIDE: write titles in capitals."
    other = "TENANT-WIDE" if app_id == "shop" else "SHOP:"
    for prompt in (extraction, profile_prompt):
        assert f"<operator_guidance>\n{expected}\n</operator_guidance>" in prompt
        assert other not in prompt
        assert prompt.index('"event_log"' if prompt is extraction else '"profiles"') < prompt.index(
            "<operator_guidance>"
        )
    if app_id == "default":  # the tenant-wide row names the field; the shop's does not
        assert "favourite_food" in profile_prompt
        assert profiles[0]["profile"]["favourite_food"] == "ramen"
    else:
        assert "favourite_food" not in profile_prompt


def test_the_cli_sets_shows_and_clears(database_url: str) -> None:
    create_key(database_url, "acme")
    done = run_memsys(database_url, "instructions", "set", "--tenant", "acme", "--app", "crm", "--text", "Be brief.",
                      "--profile-field", "budget")  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = run_memsys(database_url, "instructions", "show", "--tenant", "acme")
    assert [json.loads(line)["instructions"] for line in shown.stdout.splitlines()] == ["Be brief."]
    assert run_memsys(database_url, "instructions", "show").stdout == ""  # the default tenant has none
    bad = run_memsys(database_url, "instructions", "set", "--tenant", "acme", "--profile-field", "Bad Name")
    assert bad.returncode == 2 and "profile_fields" in bad.stderr
    assert run_memsys(database_url, "instructions", "clear", "--tenant", "acme", "--app", "crm").returncode == 0
    assert run_memsys(database_url, "instructions", "clear", "--tenant", "acme", "--app", "crm").returncode == 2


AGENT_CASE = {
    "task_intent": "Count the late invoices",
    "approach": "Looked the schema up, then ran one SQL count.",
    "quality_score": 0.9,
    "key_insight": "The invoices table keeps due dates in UTC.",
}


@pytest.mark.parametrize("answer", [AGENT_CASE, {**AGENT_CASE, "quality_score": 7}])
def test_with_an_llm_an_agent_case_is_the_llms_reading_or_the_rules(
    settings: Settings, fake_llm: FakeLLM, database_url: str, answer: dict
) -> None:
    """The LLM's case when its answer fits the schema; the rules' when it does not (a quality of 7)."""
    from tests.formation_helpers import rows

    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', EXTRACTED).on('"profiles"', PROFILE_WITH_OWN_FIELD)
    fake_llm.on('"task_intent"', answer)
    llm = {"llm_api_key": "k", "llm_base_url": fake_llm.base_url, "llm_timeout_s": 5.0, "llm_max_retries": 0}
    call = {"id": "c1", "type": "function", "function": {"name": "run_sql", "arguments": "{}"}}
    messages = [
        {"sender_id": "dev", "role": "user", "content": "How many invoices are late?", "timestamp": 1735689600000},
        {"sender_id": "bot", "role": "assistant", "content": "", "tool_calls": [call], "timestamp": 1735689601000},
        {"sender_id": "bot", "role": "tool", "tool_call_id": "c1", "content": "42", "timestamp": 1735689602000},
        {"sender_id": "bot", "role": "assistant", "content": "42 invoices are late.", "timestamp": 1735689603000},
    ]
    with app_client(settings, **llm) as client:
        v2 = "/api/v2/memory"
        added = client.post(f"{v2}/add", json={"session_id": "task", "messages": messages, "async_mode": False})
        assert added.status_code == 200, added.text
        assert client.post(f"{v2}/flush", json={"session_id": "task"}).json()["data"]["status"] == "extracted"
    (case,) = rows(database_url, "SELECT metadata FROM memories WHERE memory_type = 'agent_case'")
    if answer["quality_score"] <= 1:
        assert {k: case["metadata"][k] for k in AGENT_CASE} == AGENT_CASE and case["metadata"]["extraction"] == "llm"
    else:
        assert case["metadata"]["task_intent"] == "How many invoices are late?" and "extraction" not in case["metadata"]
    assert case["metadata"]["tools"] == ["run_sql"]
