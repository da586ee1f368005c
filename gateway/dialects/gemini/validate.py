"""What the Gemini API refuses, as a table (applied by ``gateway.dialects.validation``).

From the API reference of ``models.generateContent``: ``contents`` is not empty, each content's
``parts`` is not empty, a ``role`` when given is not empty, every part holds one data field
(``text``, ``inlineData``, ``fileData``, ``functionCall``, ``functionResponse``, …: the proto's
``data`` oneof; ``thought`` and ``thoughtSignature`` alone are not data, nor is ``"text": null``),
``systemInstruction`` is a Content object (not a string: the SDKs wrap one, the wire does not)
with ``parts``; ``generationConfig.temperature`` in [0, 2], ``topP`` in [0, 1], ``topK`` ≥ 0,
``maxOutputTokens`` and ``candidateCount`` ≥ 1, ``thinkingConfig.thinkingBudget`` ≥ -1 (-1 is
"dynamic"); a function declaration has a non-empty ``name``; ``allowedFunctionNames`` needs
function declarations and names only declared functions. The REST API takes both camelCase and
snake_case field names, so the table matches both (``snake_aliases``). Wording in Google's style.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects.base import RequestMeta
from gateway.dialects.validation import Table, any_key, in_range, is_object, min_items, non_empty, required

DATA_KEYS = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "toolCall",
    "toolResponse",
    "inline_data",
    "file_data",
    "function_call",
    "function_response",
    "executable_code",
    "code_execution_result",
    "tool_call",
    "tool_response",
)

RULES = (
    required("contents"),
    min_items("contents"),
    non_empty("contents[].role"),
    required("contents[].parts"),
    min_items("contents[].parts"),
    any_key("contents[].parts[]", *DATA_KEYS),
    is_object(
        "systemInstruction",
        "Invalid value at '{path}' (type.googleapis.com/google.ai.generativelanguage.v1beta.Content), {value!r}: "
        'expected a Content object ({{"parts": [{{"text": ...}}]}})',
    ),
    required("systemInstruction.parts"),
    any_key("systemInstruction.parts[]", *DATA_KEYS),
    in_range("generationConfig.temperature", 0, 2),
    in_range("generationConfig.topP", 0, 1),
    in_range("generationConfig.topK", 0),
    in_range("generationConfig.maxOutputTokens", 1),
    in_range("generationConfig.candidateCount", 1),
    in_range("generationConfig.thinkingConfig.thinkingBudget", -1),
    non_empty("tools[].functionDeclarations[].name"),
)

WORDING = {
    "required": "* GenerateContentRequest.{path}: {path} is not specified",
    "range_min": "* GenerateContentRequest.{path}: {value} is out of range: it must be >= {lo}",
    "range_max": "* GenerateContentRequest.{path}: {value} is out of range: it must be <= {hi}",
    "min_items": "* GenerateContentRequest.{path}: must not be empty",
    "non_empty": "* GenerateContentRequest.{path}: must not be empty",
    "one_of": "* GenerateContentRequest.{path}: {value!r} is not one of {values}",
    "any_key": "* GenerateContentRequest.{path}.data: required oneof field 'data' must have one initialized field",
}


def _get(obj: Any, camel: str, snake: str) -> Any:
    if not isinstance(obj, dict):
        return None
    return obj.get(camel, obj.get(snake))


def allowed_names_declared(body: dict[str, Any], meta: RequestMeta) -> tuple[str, str] | None:
    fcc = _get(_get(body, "toolConfig", "tool_config"), "functionCallingConfig", "function_calling_config")
    allowed = _get(fcc, "allowedFunctionNames", "allowed_function_names")
    if not isinstance(allowed, list) or not allowed:
        return None
    declared: set[str] = set()
    for tool in body.get("tools") or ():
        for decl in _get(tool, "functionDeclarations", "function_declarations") or ():
            if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                declared.add(decl["name"])
    path = "toolConfig.functionCallingConfig.allowedFunctionNames"
    if not declared:
        return (
            path,
            f"* GenerateContentRequest.{path}: allowed_function_names is set but no function declarations are provided",
        )
    unknown = [n for n in allowed if isinstance(n, str) and n not in declared]
    if unknown:
        return path, f"* GenerateContentRequest.{path}: {unknown[0]!r} is not a declared function"
    return None


TABLE = Table(RULES, WORDING, checks=(allowed_names_declared,), snake_aliases=True)
