"""A tenant's extraction instructions (migration 0031): text the LLM's formation prompts carry, and profile fields of
the tenant's own, per app and project ('*': every app or project; the most specific row applies).

The text is bounded and goes into the prompts as the operator's guidance, fenced, after memsys's own instructions;
it cannot change what memsys reads back: every answer is parsed against memsys's fixed schemas
(app.formation.llm_answers), whatever the text asks for. Profile fields only add names to the fields the profile
prompt asks for and the profile keeps. Without an LLM (offline formation) neither applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator
from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import extraction_instructions as table
from app.validation import Identifier, RequestModel, Text

ANY = "*"
MAX_CHARS = 4000
MAX_FIELDS = 20
_FIELD_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"


class InstructionsIn(RequestModel):
    app_id: Identifier = Field(default=ANY, description="The app they apply to; '*' (the default): every app")
    project_id: Identifier = Field(default=ANY, description="The project they apply to; '*': every project")
    instructions: Text = Field(default="", max_length=MAX_CHARS, description="Added to the LLM's formation prompts")
    profile_fields: list[str] = Field(
        default_factory=list, max_length=MAX_FIELDS, description="Profile fields of your own (lower_snake_case)"
    )

    @field_validator("profile_fields")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.match(_FIELD_PATTERN, name):
                raise ValueError(f"{name!r} is not a field name (lower_snake_case, up to 40 characters)")
        return list(dict.fromkeys(names))


@dataclass(frozen=True)
class Instructions:
    text: str = ""
    profile_fields: tuple[str, ...] = ()


NONE = Instructions()


async def save(conn: AsyncConnection, given: InstructionsIn) -> dict[str, Any]:
    values = {
        "app_id": given.app_id,
        "project_id": given.project_id,
        "instructions": given.instructions,
        "profile_fields": given.profile_fields,
    }
    statement = (
        insert(table)
        .values(**values)
        .on_conflict_do_update(
            index_elements=["tenant_id", "app_id", "project_id"],
            set_={"instructions": given.instructions, "profile_fields": given.profile_fields, "updated_at": func.now()},
        )
        .returning(*_SHOWN)
    )
    return _shown(dict((await conn.execute(statement)).mappings().one()))


async def listed(conn: AsyncConnection) -> list[dict[str, Any]]:
    rows = await conn.execute(select(*_SHOWN).order_by(table.c.app_id, table.c.project_id))
    return [_shown(dict(row)) for row in rows.mappings()]


async def delete(conn: AsyncConnection, app_id: str, project_id: str) -> bool:
    statement = table.delete().where(table.c.app_id == app_id, table.c.project_id == project_id)
    return (await conn.execute(statement)).rowcount > 0


async def applying(conn: AsyncConnection, app_id: str, project_id: str) -> Instructions:
    """The most specific row for (app, project): its own, the app's for every project, the tenant's for all."""
    candidates = [(app_id, project_id), (app_id, ANY), (ANY, project_id), (ANY, ANY)]
    rows = (
        await conn.execute(
            select(table.c.app_id, table.c.project_id, table.c.instructions, table.c.profile_fields).where(
                table.c.app_id.in_([ANY, app_id]), table.c.project_id.in_([ANY, project_id])
            )
        )
    ).mappings()
    found = {(row["app_id"], row["project_id"]): row for row in rows}
    row = next((found[key] for key in candidates if key in found), None)
    return Instructions(row["instructions"], tuple(row["profile_fields"])) if row else NONE


def fenced(text: str) -> str:
    """The tenant's text as the prompts carry it: after memsys's own instructions, marked as the operator's."""
    return (
        "\n\nThe operator of this memory service adds the guidance below. Follow it where it does not contradict the "
        "instructions above; the answer's JSON format stays exactly as given above.\n"
        f"<operator_guidance>\n{text}\n</operator_guidance>"
    )


_SHOWN = (table.c.app_id, table.c.project_id, table.c.instructions, table.c.profile_fields, table.c.updated_at)


def _shown(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "profile_fields": list(row["profile_fields"]), "updated_at": row["updated_at"].isoformat()}
