"""The settings reference, ``docs/settings.md``, generated from ``app/settings.py``.

``python -m app.settings_doc`` writes the page; ``python -m app.settings_doc --check`` exits 1 when the page is not
what the settings say (``tests/test_settings_doc.py`` fails then too). Each setting's description is the docstring
under its field in ``app/settings.py``, its section the ``# --- name ---`` comment above it, its variable the field's
name with the ``MEMSYS_`` prefix (or its aliases), its default the field's default.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

import annotated_types

from app.settings import Settings
from app.settings_sources import NOT_SETTINGS, NOT_SETTINGS_PREFIXES, SECRET_SETTINGS, file_variable

SOURCE = Path(__file__).with_name("settings.py")
PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
SECTION = re.compile(r"^\s*# --- (.+?) -+\s*$")


@dataclass(frozen=True)
class Setting:
    name: str
    section: str
    variables: tuple[str, ...]
    default: str
    description: str


def docstrings() -> tuple[dict[str, str], dict[str, str]]:
    """The docstring under each field of ``Settings`` and the section comment above it, read from the source."""
    source = SOURCE.read_text()
    lines = source.splitlines()
    cls = next(
        node for node in ast.parse(source).body if isinstance(node, ast.ClassDef) and node.name == Settings.__name__
    )
    docs: dict[str, str] = {}
    sections: dict[str, str] = {}
    section = ""
    read_up_to = 0
    for index, node in enumerate(cls.body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        for line in lines[read_up_to : node.lineno - 1]:
            if match := SECTION.match(line):
                section = match.group(1).strip()
        read_up_to = node.lineno - 1
        name = node.target.id
        sections[name] = section
        following = cls.body[index + 1] if index + 1 < len(cls.body) else None
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[name] = following.value.value
    return docs, sections


def settings() -> list[Setting]:
    """Every field of ``Settings``, in the order of app/settings.py."""
    docs, sections = docstrings()
    found = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if alias is None:
            variables: tuple[str, ...] = (f"{Settings.model_config.get('env_prefix', '')}{name}".upper(),)
        elif isinstance(alias, str):
            variables = (alias.upper(),)
        else:
            variables = tuple(str(choice).upper() for choice in alias.choices)
        description = _text(docs.get(name, ""))
        from_file = f"Or from a file: `{file_variable(name)}`." if name in SECRET_SETTINGS else ""
        description = " ".join(part for part in (description, _allowed(field), from_file) if part)
        section = sections.get(name) or "other"
        found.append(Setting(name, section, variables, _default(field), description))
    return found


def render() -> str:
    """The whole page, Markdown."""
    out = [
        "# Settings",
        "",
        "<!-- Generated from app/settings.py by `python -m app.settings_doc`: edit the settings' docstrings there, "
        "not this page. -->",
        "",
        "memsys reads every setting from the environment when a command starts (`memsys serve`, `memsys worker`, "
        "`memsys mcp`, the other commands): one pydantic-settings object, `Settings` in `app/settings.py`, built once "
        "and passed down. A variable that is not set takes the default below. Booleans are `true` or `false`, lists "
        "and maps are JSON (`MEMSYS_ALLOWED_ORIGINS='[\"https://app.example\"]'`). Every value is checked when the "
        "command starts: one out of its bounds, or an unknown `MEMSYS_` variable (a typo: `MEMSYS_PROT`), stops it in "
        "one line naming the variable (and the setting meant). A secret (a password in a URL, a key) may instead be "
        "read from a file, `MEMSYS_<NAME>_FILE` (a Docker or Kubernetes secret; its trailing newline is dropped); "
        "setting both stops memsys. Variables memsys's clients, tests and deployment files read are allowed beside "
        "the settings: "
        + ", ".join(f"`{name}`" for name in sorted(NOT_SETTINGS))
        + ", and any "
        + " or ".join(f"`{prefix}…`" for prefix in NOT_SETTINGS_PREFIXES)
        + ".",
        "",
        "Where a setting is explained at length: [operations](operations.md), [security and tenancy](security.md), "
        "[formation](formation.md), [retrieval](retrieval.md), [a memory's life](memories.md).",
    ]
    section = None
    for setting in settings():
        if setting.section != section:
            section = setting.section
            out += [
                "",
                f"## {section[0].upper()}{section[1:]}",
                "",
                "| variable | default | meaning |",
                "|---|---|---|",
            ]
        variables = ", ".join(f"`{variable}`" for variable in setting.variables)
        out.append(f"| {variables} | {setting.default} | {_cell(setting.description)} |")
    return "\n".join(out) + "\n"


def _text(docstring: str) -> str:
    """A docstring as one line of Markdown: reST's double backticks become single ones."""
    return re.sub(r"\s+", " ", docstring.replace("``", "`")).strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(field) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    if isinstance(value, list | dict):
        return f"`{json.dumps(value)}`"
    return f"`{value}`"


def _allowed(field) -> str:
    """The values a field accepts, when its type or constraints narrow them."""
    if typing.get_origin(field.annotation) is typing.Literal:
        return "One of " + ", ".join(f"`{value}`" for value in typing.get_args(field.annotation)) + "."
    bounds = []
    for constraint in field.metadata:
        if isinstance(constraint, annotated_types.Ge):
            bounds.append(f"at least {constraint.ge}")
        elif isinstance(constraint, annotated_types.Gt):
            bounds.append(f"above {constraint.gt}")
        elif isinstance(constraint, annotated_types.Le):
            bounds.append(f"at most {constraint.le}")
        elif isinstance(constraint, annotated_types.Lt):
            bounds.append(f"below {constraint.lt}")
    return f"Allowed: {', '.join(bounds)}." if bounds else ""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    page = render()
    if "--check" in argv:
        if PAGE.read_text() != page:
            print(f"{PAGE} is stale: run python -m app.settings_doc", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
