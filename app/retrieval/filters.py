"""The caller's filter language (EverOS's v2 ``filters``, v3's ``filters``, v1's search), compiled to parameterised
SQL for every leg and count of a search, and for listings.

A node is a JSON object. ``AND`` / ``OR`` hold lists of nodes, ``NOT`` one node; every other key is a field
condition, and a node's keys all hold (an empty node: everything). A condition is a value (equality) or an object of
operators, all of which hold: ``eq``, ``ne``, ``in``, ``nin``, ``gt``, ``gte``, ``lt``, ``lte``, ``contains``,
``exists``. A field is a scope (``user_id``, ``group_id``, ``app_id``, ``project_id``, ``agent_id``, ``session_id``),
``timestamp`` (ISO 8601 or epoch milliseconds), or a key of the caller's metadata (``metadata.<key>`` or the bare
key; dots go into nested objects). See docs/filters.md for the semantics of each operator.

Values never enter the SQL's text: each is a bind parameter (``:f_<n>``); keys are checked against a pattern and
passed as a ``text[]`` parameter too. Only the filter's shape is in the text, so that the statement of one shape is
made once.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import TextClause, text

from app.errors import InvalidParameter

MAX_DEPTH = 6
MAX_CONDITIONS = 32
MAX_LIST = 100
MAX_STRING = 512
OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "exists")
LOGICAL = ("AND", "OR", "NOT")
SCOPES = ("user_id", "group_id", "app_id", "project_id", "agent_id", "session_id")
_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class Columns:
    """Where a table keeps what a filter names: its alias's columns (memories as m, pending messages as p)."""

    scopes: dict[str, str]
    timestamp: str
    metadata: str


MEMORY_COLUMNS = Columns(
    scopes={scope: f"m.{scope}" for scope in SCOPES}, timestamp="m.timestamp", metadata="m.custom_metadata"
)
TABLE_COLUMNS = Columns(
    scopes={scope: f"memories.{scope}" for scope in SCOPES},
    timestamp="memories.timestamp",
    metadata="memories.custom_metadata",
)
"""The memories table by its name: a listing's and a delete's SQLAlchemy statements (``Filter.clause``)."""
VIEW_COLUMNS = Columns(
    scopes={scope: f"v.{scope}" for scope in SCOPES}, timestamp="v.timestamp", metadata="v.custom_metadata"
)
"""``tenant_memories`` as v: where a small scope's memories are picked (sql/retrieval.sql, no_graph_order_part)."""
MESSAGE_COLUMNS = Columns(
    scopes={**{scope: f"p.{scope}" for scope in SCOPES}, "user_id": "p.sender"},
    timestamp="p.create_time",
    metadata="p.custom_metadata",
)


@dataclass(frozen=True)
class Filter:
    """A checked filter: its tree, normalised (every condition an operator object, fields resolved)."""

    tree: dict[str, Any]

    def sql(self, columns: Columns, prefix: str = "f") -> tuple[str, dict[str, Any]]:
        """The condition for ``columns``' table and its bind parameters (named ``<prefix>_<n>``)."""
        compiler = _Compiler(columns, prefix)
        return compiler.node(self.tree), compiler.parameters

    def clause(self) -> TextClause:
        """The condition on the memories table as a SQLAlchemy clause (listings, deletes)."""
        sql, parameters = self.sql(TABLE_COLUMNS, "flt")
        return text(sql).bindparams(**parameters)


NO_FILTER_SQL = "TRUE"


def parse(raw: Any, name: str = "filters") -> Filter | None:
    """The request's filter checked (a 400 naming the node that is wrong), or None when there is none."""
    if raw is None:
        return None
    counter = [0]
    tree = _node(raw, name, 1, counter)
    return Filter(tree) if tree else None


def _node(raw: Any, path: str, depth: int, counter: list[int]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InvalidParameter(f"Invalid field {path}: a filter node is a JSON object")
    if depth > MAX_DEPTH:
        raise InvalidParameter(f"Invalid field {path}: filters nest at most {MAX_DEPTH} levels")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{path}.{key}"
        if key in ("AND", "OR"):
            if value is None or value == []:
                continue  # generated clients send an absent list as null or []: no condition
            if not isinstance(value, list):
                raise InvalidParameter(f"Invalid field {where}: a list of filter nodes")
            out[key] = [_node(item, f"{where}[{i}]", depth + 1, counter) for i, item in enumerate(value)]
        elif key == "NOT":
            if value is not None:
                out[key] = _node(value, where, depth + 1, counter)
        else:
            out.setdefault("fields", []).append(_condition(key, value, where, counter))
    return out


def _condition(key: str, value: Any, where: str, counter: list[int]) -> tuple[tuple[str, ...], dict[str, Any]]:
    target = _field(key, where)
    if isinstance(value, dict):
        if not value:
            raise InvalidParameter(f"Invalid field {where}: an operator object needs at least one of {OPERATORS}")
        operators = {}
        for op, operand in value.items():
            if op not in OPERATORS:
                raise InvalidParameter(f"Invalid field {where}.{op}: unknown operator (one of {', '.join(OPERATORS)})")
            operators[op] = _operand(target, op, operand, f"{where}.{op}")
    else:
        operators = {"eq": _operand(target, "eq", value, where)}
    counter[0] += len(operators)
    if counter[0] > MAX_CONDITIONS:
        raise InvalidParameter(f"Invalid field {where}: a filter holds at most {MAX_CONDITIONS} conditions")
    return target, operators


def _field(key: str, where: str) -> tuple[str, ...]:
    """("scope", name), ("timestamp",) or ("metadata", key, subkey, ...)."""
    if key in SCOPES:
        return ("scope", key)
    if key == "timestamp":
        return ("timestamp",)
    path = key.removeprefix("metadata.").split(".")
    if len(path) > 4 or not all(_KEY.match(part) for part in path):
        raise InvalidParameter(
            f"Invalid field {where}: a field is a scope ({', '.join(SCOPES)}), timestamp, or a metadata key "
            "(letters, digits, '_' and '-', up to 64 characters; up to 4 parts joined by '.')"
        )
    return ("metadata", *path)


def _operand(target: tuple[str, ...], op: str, value: Any, where: str) -> Any:
    if op == "exists":
        if not isinstance(value, bool):
            raise InvalidParameter(f"Invalid field {where}: true or false")
        return value
    if op in ("in", "nin"):
        if not isinstance(value, list) or not value or len(value) > MAX_LIST:
            raise InvalidParameter(f"Invalid field {where}: a list of 1 to {MAX_LIST} values")
        return [_scalar(target, item, f"{where}[{i}]") for i, item in enumerate(value)]
    scalar = _scalar(target, value, where)
    if op in ("gt", "gte", "lt", "lte") and (isinstance(scalar, bool) or scalar is None):
        raise InvalidParameter(f"Invalid field {where}: compares a number or a string")
    if op == "contains" and target[0] != "metadata" and not isinstance(scalar, str):
        raise InvalidParameter(f"Invalid field {where}: a string (part of the {target[-1]})")
    if op == "contains" and scalar is None:
        raise InvalidParameter(f"Invalid field {where}: a string, a number or a boolean")
    return scalar


def _scalar(target: tuple[str, ...], value: Any, where: str) -> Any:
    if target[0] == "timestamp":
        return _time(value, where)
    if target[0] == "scope":
        if not isinstance(value, str) or len(value) > MAX_STRING:
            raise InvalidParameter(f"Invalid field {where}: a string of up to {MAX_STRING} characters")
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise InvalidParameter(f"Invalid field {where}: a string of up to {MAX_STRING} characters")
        return value
    if value is None or isinstance(value, bool | int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidParameter(f"Invalid field {where}: a finite number")
        return value
    raise InvalidParameter(f"Invalid field {where}: a string, a number, a boolean or null")


def _time(value: Any, where: str) -> datetime:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value / 1000, tz=UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidParameter(f"Invalid field {where}: epoch milliseconds out of range") from exc
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidParameter(f"Invalid field {where}: ISO 8601 or epoch milliseconds") from exc
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise InvalidParameter(f"Invalid field {where}: ISO 8601 or epoch milliseconds")


_COMPARISONS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


@dataclass
class _Compiler:
    columns: Columns
    prefix: str
    parameters: dict[str, Any] = field(default_factory=dict)

    def bind(self, value: Any, cast: str) -> str:
        name = f"{self.prefix}_{len(self.parameters)}"
        self.parameters[name] = value
        return f"CAST(:{name} AS {cast})"

    def node(self, tree: dict[str, Any]) -> str:
        parts = [self.condition(target, operators) for target, operators in tree.get("fields", [])]
        if "AND" in tree:
            parts.append("(" + " AND ".join(self.node(child) for child in tree["AND"]) + ")")
        if "OR" in tree:
            parts.append("(" + " OR ".join(self.node(child) for child in tree["OR"]) + ")")
        if "NOT" in tree:
            parts.append(f"({self.node(tree['NOT'])} IS NOT TRUE)")
        return "(" + " AND ".join(parts) + ")" if parts else "TRUE"

    def condition(self, target: tuple[str, ...], operators: dict[str, Any]) -> str:
        return "(" + " AND ".join(self.operator(target, op, operand) for op, operand in operators.items()) + ")"

    def operator(self, target: tuple[str, ...], op: str, operand: Any) -> str:
        if target[0] == "metadata":
            return self.metadata(list(target[1:]), op, operand)
        column = self.columns.timestamp if target[0] == "timestamp" else self.columns.scopes[target[1]]
        cast = "timestamptz" if target[0] == "timestamp" else "text"
        match op:
            case "eq":
                return f"{column} = {self.bind(operand, cast)}"
            case "ne":
                return f"{column} IS DISTINCT FROM {self.bind(operand, cast)}"
            case "in":
                return f"{column} = ANY({self.bind(operand, cast + '[]')})"
            case "nin":
                return f"({column} IS NULL OR {column} <> ALL({self.bind(operand, cast + '[]')}))"
            case "exists":
                return f"{column} IS {'NOT ' if operand else ''}NULL"
            case "contains":
                return f"strpos({column}, {self.bind(operand, 'text')}) > 0"
        return f"{column} {_COMPARISONS[op]} {self.bind(operand, cast)}"

    def metadata(self, path: list[str], op: str, operand: Any) -> str:
        doc = self.columns.metadata
        value = f"({doc} #> {self.bind(path, 'text[]')})"
        match op:
            case "eq":
                return self.equal(doc, path, value, operand)
            case "ne":
                return f"({self.equal(doc, path, value, operand)} IS NOT TRUE)"
            case "in":
                return "(" + " OR ".join(self.equal(doc, path, value, item) for item in operand) + ")"
            case "nin":
                return "((" + " OR ".join(self.equal(doc, path, value, item) for item in operand) + ") IS NOT TRUE)"
            case "exists":
                return f"{value} IS {'NOT ' if operand else ''}NULL"
            case "contains":
                element = self.bind(json.dumps([operand]), "jsonb")
                if isinstance(operand, str):
                    text = self.bind(operand, "text")
                    return (
                        f"(CASE jsonb_typeof({value}) WHEN 'array' THEN {value} @> {element} "
                        f"WHEN 'string' THEN strpos({value} #>> '{{}}', {text}) > 0 ELSE false END)"
                    )
                return f"(jsonb_typeof({value}) = 'array' AND {value} @> {element})"
        bound = self.bind(json.dumps(operand), "jsonb")
        return f"(jsonb_typeof({value}) = jsonb_typeof({bound}) AND {value} {_COMPARISONS[op]} {bound})"

    def equal(self, doc: str, path: list[str], value: str, operand: Any) -> str:
        """The key holds exactly ``operand``: the containment finds candidates through the GIN index (jsonb_path_ops);
        the equality drops an array that merely contains it.

        An atomic condition may be NULL where its field is missing: AND and OR treat that as false, and NOT is
        written ``IS NOT TRUE`` so that it does too (a condition wrapped in COALESCE could not use an index)."""
        nested: Any = operand
        for key in reversed(path):
            nested = {key: nested}
        contained = self.bind(json.dumps(nested), "jsonb")
        return f"({doc} @> {contained} AND {value} = {self.bind(json.dumps(operand), 'jsonb')})"
