"""JSON Schema ⇄ the schema dialect Gemini accepts for function ``parameters`` / ``responseSchema``.

Gemini's ``Schema`` is an OpenAPI 3.0 *subset*: ``type`` (one value, no arrays), ``nullable``,
``format`` (only ``enum``/``date-time`` for strings, ``float``/``double``, ``int32``/``int64``),
``enum`` (strings only), ``properties``, ``required``, ``items``, ``anyOf``, min/max keywords,
``pattern``, ``description``, ``propertyOrdering``. Anything else is rejected with a 400
("Unknown name \"additionalProperties\"", "…properties: should be non-empty for OBJECT type").

Callers of other dialects send full JSON Schema (pydantic/zod output: ``$defs``/``$ref``,
``additionalProperties: false``, ``const``, ``["string", "null"]``…), so ``convert_for_gemini``
rewrites it into that subset without losing what the model needs to call the tool right. The
newer ``parametersJsonSchema`` field takes JSON Schema as-is, but only on recent models and not on
every Vertex deployment; the builder therefore defaults to ``parameters`` (see request_build.py).

``to_json_schema`` goes the other way for Gemini callers (their SDK sends ``"type": "OBJECT"`` and
``nullable``), so the IR always holds plain JSON Schema.
"""

from __future__ import annotations

from typing import Any

# Keys Gemini's Schema accepts (everything else is dropped or rewritten).
_KEEP = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "minProperties",
        "maxProperties",
        "anyOf",
        "propertyOrdering",
        "example",
    }
)
_FORMATS = {
    "string": frozenset({"enum", "date-time"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}
_MAX_DEPTH = 64


def convert_for_gemini(schema: Any) -> dict[str, Any]:
    """A JSON Schema rewritten into the OpenAPI subset Gemini's ``parameters`` accepts.

    * ``$ref`` into ``$defs``/``definitions`` (or any ``#/…`` pointer) is inlined; a recursive
      reference becomes a bare ``{"type": "object"}`` (Gemini has no references).
    * ``oneOf`` → ``anyOf``; ``allOf`` is merged; a ``null`` branch / ``"null"`` in a type array →
      ``nullable: true``; several non-null types → ``anyOf``.
    * ``const`` → a one-value ``enum`` (strings) ; non-string ``enum``/``const`` values move into
      the description (Gemini enums are strings only).
    * numeric ``exclusiveMinimum``/``exclusiveMaximum`` → ``minimum``/``maximum``.
    * dropped: ``$schema``, ``$id``, ``additionalProperties``, ``patternProperties``, ``default``,
      ``examples``, ``title`` (below the root), unsupported ``format`` values, empty ``properties``.
    """
    if not isinstance(schema, dict):
        return {"type": "object"}
    out = _convert(schema, schema, (), 0)
    if "title" in schema and isinstance(schema["title"], str) and "description" not in out:
        out["description"] = schema["title"]
    return out


def _resolve(root: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        return None
    node: Any = root
    for token in ref[1:].split("/"):
        if not token:
            continue
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def _is_null(node: Any) -> bool:
    return isinstance(node, dict) and (node.get("type") == "null" or node.get("type") == ["null"]) and len(node) == 1


def _convert(node: Any, root: dict[str, Any], stack: tuple[str, ...], depth: int) -> dict[str, Any]:
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return {}  # `true` / unknown: any value
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in stack:
            out: dict[str, Any] = {"type": "object"}
        else:
            target = _resolve(root, ref)
            out = _convert(target, root, stack + (ref,), depth + 1) if isinstance(target, dict) else {"type": "object"}
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        return out

    node = dict(node)
    all_of = node.pop("allOf", None)
    if isinstance(all_of, list):
        for sub in all_of:
            merged = _convert(sub, root, stack, depth + 1)
            for key, value in merged.items():
                if key == "properties" and isinstance(node.get("properties"), dict):
                    node["properties"] = {**node["properties"], **value}
                elif key == "required" and isinstance(node.get("required"), list):
                    node["required"] = node["required"] + [r for r in value if r not in node["required"]]
                else:
                    node.setdefault(key, value)

    out = {}
    nullable = node.get("nullable") is True

    branches = node.get("anyOf", node.get("oneOf"))
    if isinstance(branches, list):
        converted = []
        for sub in branches:
            if _is_null(sub):
                nullable = True
            else:
                converted.append(_convert(sub, root, stack, depth + 1))
        if len(converted) == 1:
            for key, value in converted[0].items():
                out.setdefault(key, value)
            nullable = nullable or converted[0].get("nullable") is True
        elif converted:
            out["anyOf"] = converted

    types = node.get("type")
    if isinstance(types, list):
        names = [t for t in types if isinstance(t, str)]
        if "null" in names:
            nullable = True
        names = [t for t in names if t != "null"]
        if len(names) == 1:
            out["type"] = names[0].lower()
        elif len(names) > 1:
            out["anyOf"] = [{"type": t.lower()} for t in names]
        elif nullable:
            out["type"] = "string"
    elif isinstance(types, str):
        if types.lower() == "null":
            out["type"] = "string"
            nullable = True
        else:
            out["type"] = types.lower()

    desc = node.get("description")
    if isinstance(desc, str):
        out["description"] = desc

    values: list[Any] | None = None
    if "const" in node:
        values = [node["const"]]
    elif isinstance(node.get("enum"), list):
        values = list(node["enum"])
    if values is not None:
        if None in values:
            nullable = True
            values = [v for v in values if v is not None]
        if values and all(isinstance(v, str) for v in values):
            out["enum"] = values
            out.setdefault("type", "string")
        elif values:
            note = "Allowed values: " + ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
            out["description"] = f"{out['description']} ({note})" if "description" in out else note

    props = node.get("properties")
    if isinstance(props, dict) and props:
        out["properties"] = {name: _convert(sub, root, stack, depth + 1) for name, sub in props.items()}
        out.setdefault("type", "object")
        required = node.get("required")
        if isinstance(required, list):
            kept = [r for r in required if isinstance(r, str) and r in props]
            if kept:
                out["required"] = kept
        ordering = node.get("propertyOrdering")
        if isinstance(ordering, list):
            out["propertyOrdering"] = [p for p in ordering if p in props]
    elif out.get("type") is None and isinstance(node.get("additionalProperties"), (dict, bool)):
        out["type"] = "object"

    items = node.get("items")
    if isinstance(items, dict):
        out["items"] = _convert(items, root, stack, depth + 1)
        out.setdefault("type", "array")
    elif isinstance(items, list) and items:  # draft-4 tuple form
        out["items"] = _tuple_items(items, root, stack, depth)
        out.setdefault("type", "array")
    elif isinstance(node.get("prefixItems"), list) and node["prefixItems"]:
        out["items"] = _tuple_items(node["prefixItems"], root, stack, depth)
        out.setdefault("type", "array")
    if out.get("type") == "array" and "items" not in out:
        out["items"] = {"type": "string"}  # Gemini requires items on ARRAY

    for key in (
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "minimum",
        "maximum",
    ):
        value = node.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value
    for key, target in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = node.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.setdefault(target, value)
    if isinstance(node.get("pattern"), str):
        out["pattern"] = node["pattern"]
    if "example" in node:
        out["example"] = node["example"]

    fmt = node.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS.get(out.get("type", ""), ()):
        out["format"] = fmt

    if nullable:
        out["nullable"] = True
    return out


def _tuple_items(items: list[Any], root: dict[str, Any], stack: tuple[str, ...], depth: int) -> dict[str, Any]:
    converted = [_convert(sub, root, stack, depth + 1) for sub in items]
    return converted[0] if len(converted) == 1 else {"anyOf": converted}


def to_json_schema(schema: Any, depth: int = 0) -> Any:
    """A Gemini ``Schema`` (``"type": "OBJECT"``, ``nullable``, ``format: enum``) as JSON Schema."""
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if "_" in key:  # the SDK may send any_of / property_ordering / min_items …
            head, *rest = key.split("_")
            key = head + "".join(w[:1].upper() + w[1:] for w in rest)
        if key == "type" and isinstance(value, str):
            out["type"] = value.lower() if value.upper() != "TYPE_UNSPECIFIED" else None
            if out["type"] is None:
                del out["type"]
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {k: to_json_schema(v, depth + 1) for k, v in value.items()}
        elif key == "items":
            out["items"] = to_json_schema(value, depth + 1)
        elif key == "anyOf" and isinstance(value, list):
            out["anyOf"] = [to_json_schema(v, depth + 1) for v in value]
        elif key in ("nullable", "propertyOrdering") or (key == "format" and value == "enum"):
            continue
        else:
            out[key] = value
    if schema.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "anyOf" in out:
            out["anyOf"] = out["anyOf"] + [{"type": "null"}]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = out["enum"] + [None]
    return out
