"""Guardrails: personal data redacted, blocked or recorded in requests and answers.

They run on the request IR after parsing and on the answer's events (``events.py``), never on a
dialect's JSON, so one mechanism serves every dialect. ``pii`` (built-in recognizers with checks),
``regex`` (the operator's patterns), ``presidio`` (the extra) and ``webhook`` (the operator's
service). Embeddings inputs go through the same request pass (``RequestGuard.check_inputs``).
"""
