"""Which wire fields each dialect's ``convert_usage`` reads, and what it does with them.

A documentation module (after TensorZero's ``cache.rs``): the one place that says, per provider,
where the canonical counts of ``gateway.events.Usage`` come from. Canonical meanings:
``input`` = every prompt token, cached ones included; ``output`` = every generated token, thinking
included; ``cache_read`` / ``cache_write`` / ``reasoning`` = parts of those; ``None`` = the upstream
did not say (never a silent 0). Every count goes through ``gateway.dialects.kit.count`` (integers;
integral floats and digit strings accepted; anything else is ``None``).

| dialect (object) | input | output | cache_read | cache_write | reasoning |
|---|---|---|---|---|---|
| anthropic (``usage``) | ``input_tokens`` + cache read + cache write (1) | ``output_tokens`` | ``cache_read_input_tokens`` | ``cache_creation_input_tokens`` | — (2) |
| openai-chat (``usage``) | ``prompt_tokens`` | ``completion_tokens`` (6) | ``prompt_tokens_details.cached_tokens`` (3) | — | ``completion_tokens_details.reasoning_tokens`` (7) |
| openai-responses (``usage``) | ``input_tokens`` | ``output_tokens`` (6) | ``input_tokens_details.cached_tokens`` | — | ``output_tokens_details.reasoning_tokens`` |
| gemini (``usageMetadata``) | ``promptTokenCount`` (8) | ``candidatesTokenCount`` + ``thoughtsTokenCount`` (4) | ``cachedContentTokenCount`` | — | ``thoughtsTokenCount`` |
| gemini-interactions (``usage``) | ``total_input_tokens`` (8) | ``total_output_tokens`` + ``total_thought_tokens`` (4) | ``total_cached_tokens`` | — | ``total_thought_tokens`` |
| bedrock-converse (``usage``) | ``inputTokens`` + cache read + cache write (5) | ``outputTokens`` | ``cacheReadInputTokens`` | ``cacheWriteInputTokens`` | — |

(1) Anthropic's ``input_tokens`` leaves cache reads and writes out. (2) Thinking is counted inside
``output_tokens``; there is no separate count. (3) Else DeepSeek's ``prompt_cache_hit_tokens``, else Moonshot's
top-level ``cached_tokens``.
(4) Gemini's candidate / output counts leave the thoughts out. (5) Unless ``totalTokens`` shows the
cache already inside ``inputTokens`` (``total == input + output``); then ``inputTokens`` as it is.
(6) xAI leaves the reasoning out of ``completion_tokens`` / ``output_tokens``: when the reported
total is ``prompt + completion + reasoning`` (and not ``prompt + completion``) it is added back.
(7) Else Perplexity's top-level ``reasoning_tokens``. (8) Tool-use tokens (Gemini's
``toolUsePromptTokenCount``, Interactions' ``total_tool_use_tokens``: Google Search results fed to
the model) are input it read, added to it: outside the prompt count (unless the total shows them inside);
they are also the canonical ``tool_use``, so a caller of a Gemini dialect sees them in its own field.

Totals check the reading: Chat's and Responses' ``total_tokens``, Gemini's ``totalTokenCount``,
Interactions' ``total_tokens`` and Bedrock's ``totalTokens`` are not carried (the canonical total is
``input + output``) but each must equal the reading's ``input + output``; a record whose parts do
not add up is logged as a warning naming the provider (``kit.usage_mismatch``), and the dialect's
own reading is kept. Why totals and not hosts: the same vendor is reached through relays (Vertex
serves Grok on an OpenAI-compatible endpoint, OpenRouter and LiteLLM proxies, a company's own
gateway), and a vendor may fix its convention any day; the numbers in each record say which
convention they follow, whoever relayed them. Per-vendor shapes: docs/vendor-conventions.md.

When the counts arrive: Anthropic states input on ``message_start`` and output (newer API versions:
input again) on ``message_delta``, merged field by field; Chat states usage once, on the last chunk
(``stream_options.include_usage``; vLLM and xAI on every chunk; Groq in ``x_groq.usage``, Moonshot
inside the last choice); Responses on ``response.completed`` /
``.incomplete`` / ``.failed``; Gemini repeats the running totals on every chunk (the last wins);
Interactions on ``interaction.status_update`` and ``interaction.completed``. Usage is cumulative
everywhere: the last ``Usage`` event wins, never summed.

Adding a provider: write its ``usage.py`` with ``convert_usage(wire) -> Usage | None`` (``None``
when the object is missing) and ``render_usage(Usage | None) -> dict`` (0 for unknown counts only
there, where the provider's SDK requires integers), add its column here, and its table of cases to
``tests/dialects/test_usage.py``; ``tests/dialects/test_kit.py`` fails until the package has both names.
"""
