"""How the gateway keeps Gemini interactions on the server (gateway/relay/stateful.py follows this policy).

``store`` defaults to true, and a stored interaction always detaches: it runs as a generation that
outlives the caller, resumable with ``last_event_id`` and cancellable, from any replica sharing the
store. A ``GET`` answers the whole timeline: the stored input steps before the answer's own.
"""

from __future__ import annotations

import secrets
from typing import Any

from gateway.errors import GatewayError
from gateway.ir import ChatRequest

from .stream_encode import parse_event_id


class InteractionsStore:
    kind = "interaction"
    previous_param = "previous_interaction_id"
    inputs_key = "input_steps"
    failed_status: str | None = None
    resume_param = "last_event_id"
    delete_answer_is_empty = True

    def new_id(self) -> str:
        return "v1_" + secrets.token_urlsafe(18).replace("-", "x").replace("_", "y")

    def detaches(self, req: ChatRequest) -> bool:
        return req.store is not False

    def persists(self, req: ChatRequest) -> bool:
        return False  # every stored interaction detaches

    def detach_problem(self, req: ChatRequest) -> GatewayError | None:
        return None

    def inputs(self, steps: list[Any], sid: str) -> list[Any]:
        return steps

    def resume_point(self, query: dict[str, str]) -> int | None:
        value = query.get("last_event_id")
        if not value:
            return None
        seq = parse_event_id(value)
        if seq is None:
            raise GatewayError(
                "invalid_request",
                f"last_event_id {value!r} is not an event id of this gateway",
                400,
                param="last_event_id",
            )
        return seq

    def timeline(self, obj: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
        obj["steps"] = list(stored.get("input_steps") or []) + list(obj.get("steps") or [])
        return obj

    def can_list_inputs(self) -> bool:
        return False

    def cancel_problem(self, stored: dict[str, Any]) -> GatewayError | None:
        return None

    def not_found(self, sid: str) -> GatewayError:
        return GatewayError("not_found", f"interaction {sid!r} not found", 404)

    def previous_not_found(self, sid: str) -> GatewayError:
        return GatewayError(
            "not_found", f"previous_interaction_id {sid!r} is unknown or expired", 404, param="previous_interaction_id"
        )


STORED = InteractionsStore()
