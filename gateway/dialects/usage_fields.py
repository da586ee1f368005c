"""Which wire fields each dialect's ``convert_usage`` reads, and what it does with them.

A documentation module (after TensorZero's ``cache.rs``): the one place that says, per provider,
where the canonical counts of ``gateway.events.Usage`` come from. Canonical meanings:
``input`` = every prompt token, cached ones included; ``output`` = every generated token, thinking
included; ``cache_read`` / ``cache_write`` / ``reasoning`` = parts of those; ``None`` = the upstream
did not say (never a silent 0). Every count goes through ``gateway.dialects.kit.count`` (integers;
integral floats and digit strings accepted; anything else is ``None``).

| canonical | anthropic (``usage``) | openai-chat (``usage``) | openai-responses (``usage``) | gemini (``usageMetadata``) | gemini-interactions (``usage``) |
|---|---|---|---|---|---|
| input | ``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens`` (Anthropic's input excludes both) | ``prompt_tokens`` | ``input_tokens`` | ``promptTokenCount`` | ``total_input_tokens`` |
| output | ``output_tokens`` | ``completion_tokens`` | ``output_tokens`` | ``candidatesTokenCount`` + ``thoughtsTokenCount`` (candidates exclude thoughts) | ``total_output_tokens`` + ``total_thought_tokens`` |
| cache_read | ``cache_read_input_tokens`` | ``prompt_tokens_details.cached_tokens``, else DeepSeek's ``prompt_cache_hit_tokens`` | ``input_tokens_details.cached_tokens`` | ``cachedContentTokenCount`` | ``total_cached_tokens`` |
| cache_write | ``cache_creation_input_tokens`` | — | — | — | — |
| reasoning | — (counted inside ``output_tokens``) | ``completion_tokens_details.reasoning_tokens`` | ``output_tokens_details.reasoning_tokens`` | ``thoughtsTokenCount`` | ``total_thought_tokens`` |

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
``tests/test_usage.py``; ``tests/test_kit.py`` fails until the package has both names.
"""
