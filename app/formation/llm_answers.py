"""The answers formation asks the LLM for, validated with pydantic.

Lenient where a model is sloppy and strict where the memory depends on it: extra keys are ignored, blank
strings count as absent, an item of a list that does not fit is dropped (the others are kept), but an
extraction without the episode's ``content`` or a judgement without ``should_end`` is not an answer. A
reply that fails validation is an ``LLMBadOutput``, retried like any other failed call.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)


def _text_or_none(value: Any) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    return value.strip() or None if isinstance(value, str) else None


def _ids(value: Any) -> list[str]:
    return [str(item) for item in value if isinstance(item, str | int)] if isinstance(value, list) else []


OptionalText = Annotated[str | None, BeforeValidator(_text_or_none)]
Text = Annotated[str, BeforeValidator(_text_or_none), StringConstraints(min_length=1)]
"""Required: a blank or missing string fails validation (None is not a str); ``minLength`` 1 in the schema sent."""
MessageIds = Annotated[list[str], BeforeValidator(_ids)]


def _valid_items(model: type[BaseModel]):
    def keep(value: Any) -> list[BaseModel]:
        if not isinstance(value, list):
            return []
        kept = []
        for item in value:
            try:
                kept.append(model.model_validate(item))
            except ValidationError:
                continue
        return kept

    return BeforeValidator(keep)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Judgement(_Answer):
    # The reasoning first: a model constrained to the schema writes the fields in this order.
    reasoning: OptionalText = None
    should_end: bool
    topic_summary: OptionalText = None


class PersonalEpisode(_Answer):
    user_id: Text
    title: OptionalText = None
    summary: OptionalText = None
    content: Text


class Fact(_Answer):
    fact: Text = Field(validation_alias=AliasChoices("fact", "content"))
    time: OptionalText = None
    user_id: OptionalText = None
    source_message_ids: MessageIds = []


class SemanticMemory(_Answer):
    content: Text
    valid_from: OptionalText = None
    valid_to: OptionalText = None
    user_id: OptionalText = None
    evidence: OptionalText = None
    source_message_ids: MessageIds = []


class ExtractionAnswer(_Answer):
    title: OptionalText = None
    summary: OptionalText = None
    content: Text
    personal_episodes: Annotated[list[PersonalEpisode], _valid_items(PersonalEpisode)] = []
    event_log: Annotated[list[Fact], _valid_items(Fact)] = []
    semantic_memories: Annotated[list[SemanticMemory], _valid_items(SemanticMemory)] = Field(
        default=[], validation_alias=AliasChoices("semantic_memories", "foresight")
    )


class PersonalEpisodesAnswer(_Answer):
    personal_episodes: Annotated[list[PersonalEpisode], _valid_items(PersonalEpisode)] = []


class ProfileItem(BaseModel):
    """One user's profile: under ``profile``, or as the item's own keys."""

    model_config = ConfigDict(extra="allow")
    user_id: Text
    profile: dict[str, Any] | None = None

    def fields(self) -> dict[str, Any]:
        return self.profile if self.profile is not None else dict(self.model_extra or {})


class ProfilesAnswer(_Answer):
    profiles: Annotated[list[ProfileItem], _valid_items(ProfileItem)] = []

    @model_validator(mode="before")
    @classmethod
    def _bare_list(cls, value: Any) -> Any:
        return {"profiles": value} if isinstance(value, list) else value


class Reconciliation(_Answer):
    """Whether a new fact replaces, repeats or stands beside the user's earlier memories (``reconciliation``)."""

    reasoning: OptionalText = None
    decision: Literal["keep", "supersede", "duplicate"]
    memory: int | None = Field(default=None, description="The number of the earlier memory it supersedes or repeats")


class AgentCaseAnswer(_Answer):
    """An agent's session as a case (app.formation.agent_memory): what was asked, how it was done, how well."""

    task_intent: Text
    approach: Text
    quality_score: Annotated[float, Field(ge=0, le=1)]
    key_insight: OptionalText = None
