"""An assistant's turn weighs MEMSYS_ASSISTANT_WEIGHT (0.5) in the ranking: what the user said about their life
outranks the assistant's reply that shares the question's words, before formation (pending messages) and after
(event-log entries marked ``metadata.assistant``, by sender name or by conversation-meta role)."""

from __future__ import annotations

from datetime import timedelta

from app.retrieval.speaker import assistant_weight
from tests.formation_helpers import FLUSH, MEMORIZE, META, START, app_client, message, rows
from tests.retrieval_support import URL

USER_TURN = "We adopted a rescue pup last week, we call her Biscuit"
REPLY = (
    "What is the name of the rescue dog you adopted last week? A rescue dog adopted last week is still settling in: "
    "say the name of the dog often."
)
QUESTION = "What is the name of the rescue dog I adopted last week?"


def _ask(client, query: str = QUESTION, **extra) -> list[dict]:
    body = {"query": query, "group_id": "pets", "data_source": "event_log", "retrieval_mode": "rrf", "top_k": 5}
    response = client.post(URL, json={**body, "explain": True, **extra})
    assert response.status_code == 200, response.text
    return response.json()["result"]["memories"]


def _memorize(client, assistant: str, apart: timedelta = timedelta(hours=5)) -> None:
    """Hours apart by default: two MemCells, so that neither entry is indexed with the other's text."""
    for i, (sender, text) in enumerate([("wei", USER_TURN), (assistant, REPLY)]):
        body = message(i, text, sender=sender, group_id="pets", at=START + i * apart)
        assert client.post(MEMORIZE, json=body).status_code == 200


def test_a_pending_message_of_the_assistant_weighs_half(client):
    _memorize(client, "assistant", apart=timedelta(seconds=30))  # one open MemCell: both stay pending
    pending = _ask(client)
    assert [(m["formed"], m["user_id"], m["explain"]["speaker_weight"]) for m in pending] == [
        (False, "wei", 1.0), (False, "assistant", 0.5)
    ]  # fmt: skip


def test_the_assistants_reply_ranks_below_the_users_turn_it_would_outrank_alike(client, database_url):
    _memorize(client, "assistant")
    assert client.post(FLUSH, json={"group_id": "pets"}).status_code == 200
    # BM25 alone: the reply shares more of the question's words, and would come first weighed alike. (The question
    # names "last week", a window holding neither turn: time_aware, on by default, must leave the order as it is.)
    formed = _ask(client, retrieval_mode="bm25")
    assert [(m["memory_type"], m["user_id"]) for m in formed] == [("event_log", "wei"), ("event_log", "assistant")]
    assert [m["explain"]["speaker_weight"] for m in formed] == [1.0, 0.5]
    marked = rows(
        database_url, "SELECT user_id, metadata ->> 'assistant' AS a FROM memories WHERE memory_type = 'event_log'"
    )
    assert sorted((r["user_id"], r["a"]) for r in marked) == [("assistant", "true"), ("wei", None)]
    with app_client(client.app.state.runtime.settings, assistant_weight=1.0, workers=0) as alike:  # weighed alike
        assert [m["user_id"] for m in _ask(alike, retrieval_mode="bm25")] == ["assistant", "wei"]


def test_a_sender_whose_conversation_meta_role_is_assistant_is_weighed_as_one(client, database_url):
    meta = {
        "version": "1.0", "scene": "assistant", "scene_desc": "a user and their assistant", "name": "pets",
        "description": "Wei and a helper bot",
        "group_id": "pets", "created_at": START.isoformat(), "default_timezone": "UTC",
        "user_details": {"wei": {"full_name": "Wei", "role": "user"}, "helper_bot": {"full_name": "Helper",
                                                                                    "role": "Assistant"}},
    }  # fmt: skip
    assert client.post(META, json=meta).status_code == 200
    _memorize(client, "helper_bot")
    assert client.post(FLUSH, json={"group_id": "pets"}).status_code == 200
    formed = _ask(client)
    assert [(m["user_id"], m["explain"]["speaker_weight"]) for m in formed] == [("wei", 1.0), ("helper_bot", 0.5)]
    assert rows(database_url, "SELECT count(*) AS n FROM memories WHERE metadata ? 'assistant'")[0]["n"] == 1


def test_a_question_about_what_the_assistant_said_weighs_its_turns_as_anyones(client):
    _memorize(client, "assistant")
    assert client.post(FLUSH, json={"group_id": "pets"}).status_code == 200
    asked = _ask(
        client, retrieval_mode="bm25", query="What did you say about the name of the rescue dog I adopted last week?"
    )
    assert [(m["user_id"], m["explain"]["speaker_weight"]) for m in asked] == [("assistant", 1.0), ("wei", 1.0)]


def test_only_the_assistants_past_words_lift_the_weight():
    about = [
        "Can you remind me of the restaurant in Rome you recommended?",
        "I remember you told me about the three refineries",
        "Going back to our previous chat about the one-shot: how many mummies?",
        "What did you suggest for my back pain?",
        "Your earlier advice on tomatoes, again?",
        "你上次推荐的餐厅叫什么？",
        "我们之前聊到的那本书是哪本？",
    ]
    not_about = [
        "Can you recommend a restaurant in Rome?",  # asks for something new: the user's tastes are what to find
        "What are your recommendations for a birthday dinner?",
        "How many museums did I visit in February?",
        "What should I serve for dinner with my homegrown ingredients?",
        "你说我该怎么办？",
    ]
    assert [assistant_weight(q, 0.5) for q in about] == [1.0] * len(about)
    assert [assistant_weight(q, 0.5) for q in not_about] == [0.5] * len(not_about)
