"""JSON Schema → Gemini's OpenAPI subset (``convert_for_gemini``) and back (``to_json_schema``)."""

from __future__ import annotations

from gateway.dialects.gemini import convert_for_gemini
from gateway.dialects.gemini.schema import to_json_schema


def test_drops_unsupported_keywords():
    out = convert_for_gemini(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$id": "x",
            "title": "Args",
            "type": "object",
            "additionalProperties": False,
            "patternProperties": {"^x": {"type": "string"}},
            "properties": {"a": {"type": "string", "title": "A", "default": "z", "examples": ["q"], "format": "email"}},
        }
    )
    assert out == {"type": "object", "description": "Args", "properties": {"a": {"type": "string"}}}


def test_refs_are_inlined_and_recursion_cut():
    out = convert_for_gemini(
        {
            "type": "object",
            "properties": {
                "user": {"$ref": "#/$defs/User", "description": "the user"},
                "node": {"$ref": "#/definitions/Node"},
            },
            "$defs": {"User": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
            "definitions": {
                "Node": {
                    "type": "object",
                    "properties": {"child": {"$ref": "#/definitions/Node"}, "v": {"type": "integer"}},
                }
            },
        }
    )
    assert out["properties"]["user"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "description": "the user",
    }
    assert out["properties"]["node"] == {
        "type": "object",
        "properties": {"child": {"type": "object"}, "v": {"type": "integer"}},
    }
    assert "$defs" not in out and "definitions" not in out


def test_nullable_type_arrays_and_unions():
    assert convert_for_gemini({"type": ["string", "null"]}) == {"type": "string", "nullable": True}
    assert convert_for_gemini({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == {
        "type": "integer",
        "nullable": True,
    }
    assert convert_for_gemini({"oneOf": [{"type": "integer"}, {"type": "string"}]}) == {
        "anyOf": [{"type": "integer"}, {"type": "string"}]
    }
    assert convert_for_gemini({"type": ["string", "number"]}) == {"anyOf": [{"type": "string"}, {"type": "number"}]}
    assert convert_for_gemini({"type": "null"}) == {"type": "string", "nullable": True}


def test_const_enum_and_formats():
    assert convert_for_gemini({"const": "fixed"}) == {"type": "string", "enum": ["fixed"]}
    assert convert_for_gemini({"type": "string", "enum": ["a", "b", None]}) == {
        "type": "string",
        "enum": ["a", "b"],
        "nullable": True,
    }
    assert convert_for_gemini({"type": "integer", "enum": [1, 2]}) == {
        "type": "integer",
        "description": "Allowed values: 1, 2",
    }
    assert convert_for_gemini({"type": "string", "format": "date-time"})["format"] == "date-time"
    assert "format" not in convert_for_gemini({"type": "string", "format": "uri"})
    assert convert_for_gemini({"type": "integer", "format": "int64"})["format"] == "int64"


def test_numeric_bounds():
    out = convert_for_gemini({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10, "multipleOf": 2})
    assert out == {"type": "number", "minimum": 0, "maximum": 10}
    out = convert_for_gemini({"type": "number", "minimum": 1, "exclusiveMinimum": True})  # draft-4 boolean form
    assert out == {"type": "number", "minimum": 1}


def test_allof_merge_arrays_and_implied_types():
    out = convert_for_gemini(
        {
            "allOf": [
                {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ]
        }
    )
    assert out == {
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "type": "object",
        "required": ["a", "b"],
    }
    assert convert_for_gemini({"type": "array"}) == {"type": "array", "items": {"type": "string"}}
    assert convert_for_gemini({"items": {"type": "string"}, "minItems": 1, "uniqueItems": True}) == {
        "items": {"type": "string"},
        "type": "array",
        "minItems": 1,
    }
    assert convert_for_gemini({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]})["items"] == {
        "anyOf": [{"type": "string"}, {"type": "integer"}]
    }


def test_required_filtered_and_empty_properties_dropped():
    out = convert_for_gemini(
        {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}, "required": ["a", "ghost"]}
    )
    assert out == {"type": "object", "properties": {"a": {"type": "object"}}, "required": ["a"]}


def test_pydantic_style_schema():
    schema = {
        "$defs": {"Unit": {"enum": ["c", "f"], "title": "Unit", "type": "string"}},
        "properties": {
            "city": {"title": "City", "type": "string"},
            "unit": {"anyOf": [{"$ref": "#/$defs/Unit"}, {"type": "null"}], "default": None},
            "days": {"default": 1, "maximum": 14, "minimum": 1, "title": "Days", "type": "integer"},
        },
        "required": ["city"],
        "title": "Args",
        "type": "object",
    }
    assert convert_for_gemini(schema) == {
        "type": "object",
        "description": "Args",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"], "nullable": True},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
        },
        "required": ["city"],
    }


def test_gemini_schema_to_json_schema():
    gem = {
        "type": "OBJECT",
        "properties": {
            "a": {"type": "STRING", "nullable": True, "format": "enum", "enum": ["x"]},
            "b": {"type": "ARRAY", "items": {"type": "INTEGER"}},
        },
        "required": ["a"],
        "propertyOrdering": ["a", "b"],
    }
    assert to_json_schema(gem) == {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"], "enum": ["x", None]},
            "b": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["a"],
    }
    assert to_json_schema({"any_of": [{"type": "STRING"}], "nullable": True}) == {
        "anyOf": [{"type": "string"}, {"type": "null"}]
    }
