"""HTTP routes of conversation metadata."""

from __future__ import annotations

from litestar import Controller, get, post
from litestar.di import NamedDependency, Provide
from litestar.params import FromQuery, JSONBody
from sqlalchemy.ext.asyncio import AsyncConnection

from app.conversation_meta import service
from app.conversation_meta.schemas import ConversationMeta, ConversationMetaRequest, ConversationMetaSaved
from app.http.dependencies import provide_transaction
from app.http.envelope import Envelope, ok
from app.validation import check_identifier


class ConversationMetaController(Controller):
    path = "/api/v3/agentic/conversation-meta"
    tags = ["conversation-meta"]
    dependencies = {"conn": Provide(provide_transaction)}

    @post("", status_code=200, operation_id="saveConversationMeta", summary="Save conversation metadata (upsert)")
    async def save(
        self, data: JSONBody[ConversationMetaRequest], conn: NamedDependency[AsyncConnection]
    ) -> Envelope[ConversationMetaSaved]:
        saved = await service.save(conn, data)
        return ok("Conversation metadata saved successfully", saved)

    @get("", operation_id="getConversationMeta", summary="Read the conversation metadata of a group")
    async def read(
        self, conn: NamedDependency[AsyncConnection], group_id: FromQuery[str]
    ) -> Envelope[ConversationMeta]:
        return ok("Conversation metadata found", await service.get(conn, check_identifier("group_id", group_id)))
