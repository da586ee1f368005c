"""Caller-side validation: what the caller's own API would refuse, refused here, in its words.

Each dialect package has a ``validate.py`` holding one table, ``RULES``, of the limits its
provider documents (required fields, non-empty arrays, numeric ranges, roles, tool names, a tool
choice that names a tool not offered), plus ``WORDING``: how that provider phrases each kind of
refusal. This module is only the small interpreter of those tables.

Why a step of its own, before ``request_parse``: a parser is lenient on purpose (it converts what
real clients send), and an upstream of another dialect may accept what the caller's API would not
(an Anthropic ``temperature`` of 1.5 is valid at OpenAI). Without this step such a request is
silently accepted, or refused later in another dialect's words, and an upstream call is paid for
nothing. The rules run on the caller's JSON as it came (paths are the caller's own field names);
a value of the wrong type is skipped here and refused by the parser, which names the type.

Paths: ``a.b`` walks objects, ``a[]`` every element of an array (``messages[].content``). With
``snake_aliases`` (Gemini, whose REST API takes both spellings) a camelCase step also matches
its snake_case spelling. Cost: the paths are compiled once at import; a typical request is checked
in a few microseconds (``bench/README.md``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gateway.dialects.base import RequestMeta
from gateway.errors import invalid

# A cross-field rule: (body, meta) -> (param, message) or None. For what a path rule cannot say.
CheckFn = Callable[[dict[str, Any], RequestMeta], "tuple[str, str] | None"]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


@dataclass(frozen=True, slots=True)
class Rule:
    """One row: ``kind`` checked at ``path``. ``when`` narrows it to the objects holding the field."""

    kind: str  # required | range | min_items | non_empty | one_of | any_key
    path: str
    lo: float | None = None
    hi: float | None = None
    values: tuple[str, ...] = ()  # one_of: the allowed values; any_key: the keys of which one is needed
    when: Callable[[dict[str, Any]], bool] | None = None  # required: only for parents where this holds
    tokens: tuple[str, ...] = field(default=(), compare=False)


def required(path: str, when: Callable[[dict[str, Any]], bool] | None = None) -> Rule:
    return Rule("required", path, when=when)


def in_range(path: str, lo: float | None = None, hi: float | None = None) -> Rule:
    return Rule("range", path, lo, hi)


def min_items(path: str, n: int = 1) -> Rule:
    return Rule("min_items", path, lo=n)


def non_empty(path: str) -> Rule:
    return Rule("non_empty", path)


def one_of(path: str, *values: str) -> Rule:
    return Rule("one_of", path, values=values)


def any_key(path: str, *keys: str) -> Rule:
    return Rule("any_key", path, values=keys)


@dataclass(frozen=True, slots=True)
class Table:
    """A dialect's rules and wording, compiled once."""

    rules: tuple[Rule, ...]
    wording: dict[str, str]
    checks: tuple[CheckFn, ...] = ()
    snake_aliases: bool = False
    compiled: list[tuple[Rule, tuple[tuple[str, ...], ...], tuple[str, ...]]] = field(default_factory=list, compare=False)

    def __post_init__(self) -> None:
        for rule in self.rules:
            steps: list[tuple[str, ...]] = []
            for segment in rule.path.split("."):
                name, brackets = segment.rstrip("[]"), segment.count("[]")
                steps.append((name, _snake(name)) if self.snake_aliases and _snake(name) != name else (name,))
                steps.extend([("[]",)] * brackets)
            if rule.kind == "any_key":  # the objects at the path themselves must hold one of the keys
                self.compiled.append((rule, tuple(steps), ()))
            else:
                self.compiled.append((rule, tuple(steps[:-1]), steps[-1]))


def _get(node: dict[str, Any], names: tuple[str, ...]) -> tuple[str, Any] | None:
    for name in names:
        if name in node:
            return name, node[name]
    return None


def _parents(node: Any, steps: tuple[tuple[str, ...], ...], path: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Every object the rule's last step applies to, with its concrete path (``messages[2]``)."""
    if not steps:
        if isinstance(node, dict):
            yield node, path
        return
    step, rest = steps[0], steps[1:]
    if step == ("[]",):
        if isinstance(node, list):
            for i, item in enumerate(node):
                yield from _parents(item, rest, f"{path}[{i}]")
        return
    if isinstance(node, dict):
        hit = _get(node, step)
        if hit is not None:
            yield from _parents(hit[1], rest, f"{path}.{hit[0]}" if path else hit[0])


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _violation(rule: Rule, parent: dict[str, Any], last: tuple[str, ...], path: str) -> dict[str, Any] | None:
    """What is wrong at this place, as format fields for the wording, or None."""
    if rule.kind == "any_key":
        return None if any(k in parent for k in rule.values) else {"path": path, "keys": ", ".join(rule.values)}
    hit = _get(parent, last)
    name = hit[0] if hit else last[0]
    here = f"{path}.{name}" if path else name
    if rule.kind == "required":
        if (hit is None or hit[1] is None) and (rule.when is None or rule.when(parent)):
            return {"path": here}
        return None
    if hit is None:
        return None
    value = hit[1]
    if rule.kind == "range" and _number(value):
        bound = "min" if rule.lo is not None and value < rule.lo else "max" if rule.hi is not None and value > rule.hi else None
        if bound is not None:
            num = "integer" if isinstance(value, int) else "decimal"
            return {"path": here, "value": value, "lo": _fmt(rule.lo), "hi": _fmt(rule.hi), "bound": bound, "num": num}
    elif rule.kind == "min_items" and isinstance(value, list) and len(value) < (rule.lo or 0):
        return {"path": here, "n": int(rule.lo or 0)}
    elif rule.kind == "non_empty" and isinstance(value, str) and not value:
        return {"path": here}
    elif rule.kind == "one_of" and isinstance(value, str) and value not in rule.values:
        return {"path": here, "value": value, "values": ", ".join(repr(v) for v in rule.values)}
    return None


def _fmt(bound: float | None) -> str:
    if bound is None:
        return ""
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def check(table: Table, body: dict[str, Any], meta: RequestMeta) -> None:
    """Raise the 400 for the first rule the body breaks (rules run in table order)."""
    for rule, steps, last in table.compiled:
        for parent, path in _parents(body, steps, ""):
            found = _violation(rule, parent, last, path)
            if found is not None:
                key = f"{rule.kind}_{found['bound']}" if rule.kind == "range" else rule.kind
                raise invalid(table.wording[key].format(**found), param=found["path"])
    for fn in table.checks:
        problem = fn(body, meta)
        if problem is not None:
            raise invalid(problem[1], param=problem[0])


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_model_name(model: Any, param: str = "model") -> None:
    """A model name with a control character (CR, LF, NUL …) is refused in every addressing form:
    it would end up in a log line, a header or an upstream URL."""
    if isinstance(model, str) and _CONTROL.search(model):
        raise invalid(f"{param}: the model name contains a control character", param=param)


TABLE_MODULES = {
    "anthropic": "gateway.dialects.anthropic.validate",
    "openai-chat": "gateway.dialects.openai_chat.validate",
    "openai-responses": "gateway.dialects.openai_responses.validate",
    "gemini": "gateway.dialects.gemini.validate",
    "gemini-interactions": "gateway.dialects.gemini_interactions.validate",
}
_tables: dict[str, Table] = {}


def validate_request(dialect: str, body: dict[str, Any], meta: RequestMeta) -> None:
    """The caller's JSON against its dialect's table; a 400 naming the parameter, or nothing."""
    check_model_name(meta.path_model)
    check_model_name(body.get("model"))
    table = _tables.get(dialect)
    if table is None:
        module = TABLE_MODULES.get(dialect)
        if module is None:
            return
        table = _tables[dialect] = importlib.import_module(module).TABLE
    check(table, body, meta)
