"""The Gemini generateContent wire and the IR's fields: what a caller calls them, what an upstream cannot carry.

``PARAMS`` names an IR field the way a Gemini caller wrote it (for a refusal in its own terms);
``LIMITS`` are the settings ``request_build`` has no place for (see ``gateway/dialects/carry.py``).
"""

from __future__ import annotations

from gateway.dialects.carry import Limit

PARAMS = {
    "stop": "generationConfig.stopSequences",
    "top_k": "generationConfig.topK",
    "temperature": "generationConfig.temperature",
    "top_p": "generationConfig.topP",
    "tool_choice.allowed": "toolConfig.functionCallingConfig.allowedFunctionNames",
    "thinking": "generationConfig.thinkingConfig",
    "thinking.disabled": "generationConfig.thinkingConfig.thinkingBudget",
    "response_format": "generationConfig.responseJsonSchema",
    "response_format.json": "generationConfig.responseMimeType",
    "messages.file_url": "contents[].parts[].fileData",
    "messages.assistant_media": "contents[].parts[]",
}

LIMITS = (
    Limit("parallel_tool_calls", "Gemini cannot be told to make one function call at a time"),
    # pydantic-ai and the OpenAI Agents SDK mark every tool strict: the schema still goes; dropped
    # and reported unless refuse_unsupported
    Limit("tools.strict", "Gemini function declarations have no strict mode", advisory=True),
    Limit("user", "Gemini takes no end-user id", advisory=True),
    Limit("metadata", "Gemini takes no request metadata", advisory=True),
    Limit("store", "a Chat caller's store (OpenAI stored completions) has no Gemini equivalent", advisory=True),
)

# Sampling hints a Gemini caller may send that the IR has no slot for (kept in extras for a Gemini
# upstream; toward another dialect dropped and reported: gateway/dialects/carry.py ``lost_hints``).
HINTS = {
    "presence_penalty": ("generationConfig", "presencePenalty"),
    "frequency_penalty": ("generationConfig", "frequencyPenalty"),
    "seed": ("generationConfig", "seed"),
    "logprobs": ("generationConfig", "responseLogprobs"),
    "top_logprobs": ("generationConfig", "logprobs"),
}
