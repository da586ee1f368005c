"""The ``webhook`` guardrail's client: the request's texts POSTed to the operator's service.

The request body: ``{"guardrail": name, "where": "request", "texts": [...]}`` (every text the
model would see, in order), or ``"where": "response"`` with the text of each answer block that
ended (gateway/guardrails/engine.py ``_hook_pass``). The answer: ``{"action": "allow"}``, ``{"action": "block", "reason":
"..."}`` or ``{"action": "redact", "texts": [...]}`` (as many texts, in the same order). No valid
answer within ``timeout_ms`` (down, slow, a non-2xx, nonsense): ``fail = "closed"`` blocks the
request, ``"open"`` lets it pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx
import orjson

log = logging.getLogger("gateway.guardrails")


@dataclass(slots=True)
class Verdict:
    action: str  # allow | block | redact
    reason: str | None = None
    texts: list[str] | None = None
    failed: bool = False  # the service did not answer (fail = "closed")


class Webhook:
    def __init__(self, url: str, timeout: float, fail_open: bool) -> None:
        self.url, self.timeout, self.fail_open = url, timeout, fail_open
        self._client: httpx.AsyncClient | None = None

    async def check(self, name: str, texts: list[str], where: str) -> Verdict:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout, trust_env=False)
        body = orjson.dumps({"guardrail": name, "where": where, "texts": texts})
        try:
            response = await self._client.post(self.url, content=body, headers={"content-type": "application/json"})
            response.raise_for_status()
            verdict = _verdict(orjson.loads(response.content), len(texts))
        except (httpx.HTTPError, orjson.JSONDecodeError, ValueError) as exc:
            log.warning(
                "guardrail %s: webhook failed (%s); failing %s",
                name,
                type(exc).__name__,
                "open" if self.fail_open else "closed",
            )
            if self.fail_open:
                return Verdict("allow")
            return Verdict("block", "the guardrail's service did not answer", failed=True)
        return verdict

    async def aclose(self) -> None:
        """The client's connections, at shutdown (a later ``check`` would open a new one)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _verdict(obj: object, count: int) -> Verdict:
    if not isinstance(obj, dict) or obj.get("action") not in ("allow", "block", "redact"):
        raise ValueError("not a verdict")
    action = obj["action"]
    reason = obj.get("reason") if isinstance(obj.get("reason"), str) else None
    texts = obj.get("texts")
    if action == "redact":
        if not isinstance(texts, list) or len(texts) != count or not all(isinstance(t, str) for t in texts):
            raise ValueError("a redact verdict needs as many texts as were sent")
        return Verdict("redact", reason, texts)
    return Verdict(action, reason)
