"""How the inspector's pages are rendered: Jinja2 templates (autoescaped) and the filters they use."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import StrictUndefined
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig

TEMPLATES = Path(__file__).parent / "templates"
MISSING = "—"


def template_config() -> TemplateConfig:
    return TemplateConfig(directory=TEMPLATES, engine=JinjaTemplateEngine, engine_callback=_configure)


def _configure(engine: JinjaTemplateEngine) -> None:
    engine.engine.undefined = StrictUndefined  # a misspelt name fails the page instead of rendering blank
    engine.engine.filters.update(num=number, when=moment, pretty=pretty_json, group_url=group_url)


def group_url(group_id: str) -> str:
    """A group's page: its id in the path, or as a query parameter when a path cannot carry it (``/``, ``.``)."""
    if "/" in group_id or group_id in (".", ".."):
        return f"/inspect/group?{urlencode({'group_id': group_id})}"
    return f"/inspect/groups/{quote(group_id, safe='')}"


def number(value: float | None, digits: int = 4) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def moment(value: datetime | date | str | None) -> str:
    """A time in UTC to the second (what the API returns as ISO 8601), or a day as it is."""
    if value is None:
        return MISSING
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        return value.isoformat()
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
