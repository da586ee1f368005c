"""Caller-side validation: what the caller's own API would refuse, refused here, in its words.

Each dialect package has a ``validate.py`` exporting one ``TABLE`` (a ``Table``): its ``RULES``,
the limits its provider documents (required fields, non-empty arrays, numeric ranges, roles, tool
names); its ``WORDING``, how that provider phrases each kind of refusal; and its ``checks``, the
few rules that relate two fields (a tool choice naming a tool not offered, a thinking budget not
below ``max_tokens``). ``TABLE_MODULES`` names the module per dialect, imported at the first
request of that dialect. This module is only the small interpreter of those tables.

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
import math
import re
from collections.abc import Callable
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

    kind: str  # required | range | min_items | non_empty | one_of | any_key | is_object
    path: str
    lo: float | None = None
    hi: float | None = None
    values: tuple[str, ...] = ()  # one_of: the allowed values; any_key: the keys of which one is needed
    when: Callable[[dict[str, Any]], bool] | None = None  # required: only for parents where this holds
    message: str | None = None  # this rule's own wording, instead of the table's for its kind
    tokens: tuple[str, ...] = field(default=(), compare=False)


def required(path: str, when: Callable[[dict[str, Any]], bool] | None = None) -> Rule:
    return Rule("required", path, when=when)


def in_range(path: str, lo: float | None = None, hi: float | None = None) -> Rule:
    return Rule("range", path, lo, hi)


def min_items(path: str, n: int = 1) -> Rule:
    return Rule("min_items", path, lo=n)


def non_empty(path: str) -> Rule:
    return Rule("non_empty", path)


def one_of(path: str, *values: str, message: str | None = None) -> Rule:
    return Rule("one_of", path, values=values, message=message)


def any_key(path: str, *keys: str) -> Rule:
    """The objects at ``path`` hold one of ``keys`` with a value: a null is a field not set (proto
    JSON), so ``{"text": null}`` holds none, like ``{}``."""
    return Rule("any_key", path, values=keys)


def is_object(path: str, message: str | None = None) -> Rule:
    """The value at ``path``, when present, is an object (a string where a message belongs is refused
    by the API, however a lenient parser might read it)."""
    return Rule("is_object", path, message=message)


Steps = tuple[tuple[str, ...], ...]  # each step: the key's spellings, or ("[]",) for every element
LIST = ("[]",)
Compiled = tuple[Rule, tuple[str, ...], Callable[[dict[str, Any]], bool]]


@dataclass(slots=True)
class _Node:
    """One place in the body's shape: the rules about the object there, and the places below it."""

    rules: list[Compiled] = field(default_factory=list)
    children: dict[tuple[str, ...], _Node] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Table:
    """A dialect's rules and wording, compiled once into a tree of paths, so the body is walked once
    and one pass over ``messages[]`` serves every rule about a message."""

    rules: tuple[Rule, ...]
    wording: dict[str, str]
    checks: tuple[CheckFn, ...] = ()
    snake_aliases: bool = False
    root: _Node = field(default_factory=_Node, compare=False)

    def __post_init__(self) -> None:
        for rule in self.rules:
            steps: list[tuple[str, ...]] = []
            for segment in rule.path.split("."):
                name, brackets = segment.rstrip("[]"), segment.count("[]")
                steps.append((name, _snake(name)) if self.snake_aliases and _snake(name) != name else (name,))
                steps.extend([LIST] * brackets)
            # any_key: the objects at the path themselves must hold one of the keys
            parent, last = (steps, ()) if rule.kind == "any_key" else (steps[:-1], steps[-1])
            node = self.root
            for step in parent:
                node = node.children.setdefault(step, _Node())
            node.rules.append((rule, last, _predicate(rule, last)))


def _lookup(names: tuple[str, ...]) -> Callable[[dict[str, Any]], Any]:
    if len(names) == 1:
        key = names[0]
        return lambda node: node.get(key)
    camel, snake = names
    return lambda node: node[camel] if camel in node else node.get(snake)


def _predicate(rule: Rule, last: tuple[str, ...]) -> Callable[[dict[str, Any]], bool]:
    """A fast test that is True when ``rule`` is broken at an object (details are built only then)."""
    if rule.kind == "any_key":
        keys = frozenset(rule.values)
        return lambda node: keys.isdisjoint(node) or all(node[k] is None for k in keys.intersection(node))
    get = _lookup(last)
    if rule.kind == "required":
        when = rule.when
        return lambda node: get(node) is None and (when is None or when(node))
    if rule.kind == "range":
        lo = -math.inf if rule.lo is None else rule.lo
        hi = math.inf if rule.hi is None else rule.hi

        def out_of_range(node: dict[str, Any]) -> bool:
            value = get(node)
            return type(value) in (int, float) and not lo <= value <= hi

        return out_of_range
    if rule.kind == "min_items":
        n = int(rule.lo or 0)
        return lambda node: type(v := get(node)) is list and len(v) < n
    if rule.kind == "non_empty":
        return lambda node: get(node) == ""
    if rule.kind == "is_object":
        return lambda node: (v := get(node)) is not None and type(v) is not dict
    if rule.kind == "one_of":
        values = frozenset(rule.values)
        return lambda node: type(v := get(node)) is str and v not in values
    raise ValueError(f"unknown rule kind {rule.kind!r}")


class _Broken(Exception):
    def __init__(self, rule: Rule, node: dict[str, Any], last: tuple[str, ...], path: Any) -> None:
        self.rule, self.node, self.last, self.path = rule, node, last, path


def _visit(value: Any, node: _Node, path: Any) -> None:
    """Check ``value`` against the rules at ``node``, then walk on. ``path`` is a chain of
    ``(parent_path, key)`` pairs, flattened only when a rule is broken."""
    if node.rules and type(value) is dict:
        for rule, last, broken in node.rules:
            if broken(value):
                raise _Broken(rule, value, last, path)
    for step, child in node.children.items():
        if step is LIST or step == LIST:
            if type(value) is list:
                for i, item in enumerate(value):
                    _visit(item, child, (path, i))
        elif type(value) is dict:
            for name in step:
                if name in value:
                    _visit(value[name], child, (path, name))
                    break


def _flatten(chain: Any) -> tuple[Any, ...]:
    parts: list[Any] = []
    while chain:
        chain, key = chain
        parts.append(key)
    return tuple(reversed(parts))


def _path_text(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _details(
    rule: Rule, node: dict[str, Any], last: tuple[str, ...], path: tuple[Any, ...]
) -> tuple[str, dict[str, Any]]:
    """The wording key and its format fields for a broken rule."""
    if rule.kind == "any_key":
        return "any_key", {"path": _path_text(path), "keys": ", ".join(rule.values)}
    name = next((n for n in last if n in node), last[0])
    here = _path_text((*path, name))
    value: Any = node.get(name)
    fields: dict[str, Any] = {"path": here, "value": value}
    if rule.kind == "range":
        bound = "min" if rule.lo is not None and value < rule.lo else "max"
        fields.update(lo=_fmt(rule.lo), hi=_fmt(rule.hi), num="integer" if isinstance(value, int) else "decimal")
        return f"range_{bound}", fields
    if rule.kind == "min_items":
        fields["n"] = int(rule.lo or 0)
    elif rule.kind == "one_of":
        fields["values"] = ", ".join(repr(v) for v in rule.values)
    return rule.kind, fields


def _fmt(bound: float | None) -> str:
    if bound is None:
        return ""
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def check(table: Table, body: dict[str, Any], meta: RequestMeta) -> None:
    """Raise the 400 for the first broken rule (a parent's rules before its children's)."""
    try:
        _visit(body, table.root, ())
    except _Broken as broken:
        key, fields = _details(broken.rule, broken.node, broken.last, _flatten(broken.path))
        raise invalid((broken.rule.message or table.wording[key]).format(**fields), param=fields["path"]) from None
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
