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
| openai-chat (``usage``) | ``prompt_tokens`` | ``completion_tokens`` | ``prompt_tokens_details.cached_tokens`` (3) | — | ``completion_tokens_details.reasoning_tokens`` |
| openai-responses (``usage``) | ``input_tokens`` | ``output_tokens`` | ``input_tokens_details.cached_tokens`` | — | ``output_tokens_details.reasoning_tokens`` |
| gemini (``usageMetadata``) | ``promptTokenCount`` | ``candidatesTokenCount`` + ``thoughtsTokenCount`` (4) | ``cachedContentTokenCount`` | — | ``thoughtsTokenCount`` |
| gemini-interactions (``usage``) | ``total_input_tokens`` | ``total_output_tokens`` + ``total_thought_tokens`` (4) | ``total_cached_tokens`` | — | ``total_thought_tokens`` |
| bedrock-converse (``usage``) | ``inputTokens`` + cache read + cache write (5) | ``outputTokens`` | ``cacheReadInputTokens`` | ``cacheWriteInputTokens`` | — |

(1) Anthropic's ``input_tokens`` leaves cache reads and writes out. (2) Thinking is counted inside
``output_tokens``; there is no separate count. (3) Else DeepSeek's ``prompt_cache_hit_tokens``.
(4) Gemini's candidate / output counts leave the thoughts out. (5) Unless ``totalTokens`` shows the
cache already inside ``inputTokens`` (``total == input + output``); then ``inputTokens`` as it is.

Not carried: Chat's and Responses' ``total_tokens`` (derived), Gemini's ``totalTokenCount`` and
``toolUsePromptTokenCount``, Interactions' ``total_tool_use_tokens`` and ``total_tokens``.

When the counts arrive: Anthropic states input on ``message_start`` and output (newer API versions:
input again) on ``message_delta``, merged field by field; Chat states usage once, on the last chunk
(``stream_options.include_usage``; vLLM on every chunk); Responses on ``response.completed`` /
``.incomplete`` / ``.failed``; Gemini repeats the running totals on every chunk (the last wins);
Interactions on ``interaction.status_update`` and ``interaction.completed``. Usage is cumulative
everywhere: the last ``Usage`` event wins, never summed.

Adding a provider: write its ``usage.py`` with ``convert_usage(wire) -> Usage | None`` (``None``
when the object is missing) and ``render_usage(Usage | None) -> dict`` (0 for unknown counts only
there, where the provider's SDK requires integers), add its column here, and its table of cases to
``tests/dialects/test_usage.py``; ``tests/dialects/test_kit.py`` fails until the package has both names.
"""
