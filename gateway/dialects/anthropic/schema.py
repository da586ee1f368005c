"""A caller's JSON Schema → the subset Anthropic's structured outputs take (``output_config.format``).

Anthropic's constrained decoding wants every object closed (``additionalProperties: false``) and
refuses constraints it cannot enforce (``minimum``, ``maxLength``, ``minItems`` > 1, …). This does
what the official ``anthropic`` SDK's ``transform_schema`` does for its own users: objects are
closed, and every keyword outside the subset moves into the ``description`` as text, so the model
still reads it. Unlike the SDK it never raises: a node it does not understand goes through as is
(the upstream then answers for it).
"""

from __future__ import annotations

from typing import Any

STRING_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)

# Keywords kept on every node; the type-specific ones are handled below.
_KEPT = frozenset({"type", "description", "title", "enum", "const", "default", "$ref"})


def for_anthropic(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    node = dict(schema)
    out: dict[str, Any] = {}
    defs = node.pop("$defs", None)
    if isinstance(defs, dict):
        out["$defs"] = {name: for_anthropic(d) for name, d in defs.items()}
    definitions = node.pop("definitions", None)
    if isinstance(definitions, dict):
        out["definitions"] = {name: for_anthropic(d) for name, d in definitions.items()}
    for key in ("anyOf", "oneOf", "allOf"):
        variants = node.pop(key, None)
        if isinstance(variants, list):
            out["anyOf" if key == "oneOf" else key] = [for_anthropic(v) for v in variants]
    kind = node.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node:
        props = node.pop("properties", None)
        out["properties"] = {k: for_anthropic(v) for k, v in props.items()} if isinstance(props, dict) else {}
        node.pop("additionalProperties", None)
        out["additionalProperties"] = False
        if "required" in node:
            out["required"] = node.pop("required")
    if "items" in node:
        out["items"] = for_anthropic(node.pop("items"))
    if node.get("minItems") in (0, 1):
        out["minItems"] = node.pop("minItems")
    if node.get("format") in STRING_FORMATS:
        out["format"] = node.pop("format")
    for key in _KEPT:
        if key in node:
            out[key] = node.pop(key)
    if node:  # constraints outside the subset: told to the model in words
        extra = "{" + ", ".join(f"{k}: {v}" for k, v in node.items()) + "}"
        out["description"] = f"{out['description']}\n\n{extra}" if out.get("description") else extra
    return out
