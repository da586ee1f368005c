"""How the gateway keeps OpenAI Responses on the server (gateway/relay/stateful.py follows this policy).

``store`` defaults to true: the final response and its history are kept, so a later request can
name it in ``previous_response_id``. Only ``background: true`` detaches (a generation that outlives
the caller, resumable with ``starting_after``, cancellable); a background response must be stored.
A failed generation is stored with ``status: "failed"``. ``GET /v1/responses/{id}/input_items``
lists a turn's input, each item with an id.
"""

from __future__ import annotations

import secrets
from typing import Any

from gateway.errors import GatewayError
from gateway.ir import ChatRequest

_ITEM_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


class ResponsesStore:
    kind = "response"
    previous_param = "previous_response_id"
    inputs_key = "input_items"
    failed_status: str | None = "failed"
    resume_param = "starting_after"
    delete_answer_is_empty = False

    def new_id(self) -> str:
        return "resp_" + secrets.token_urlsafe(18).replace("-", "x").replace("_", "y")

    def detaches(self, req: ChatRequest) -> bool:
        return bool(req.background)

    def persists(self, req: ChatRequest) -> bool:
        return req.store is not False

    def detach_problem(self, req: ChatRequest) -> GatewayError | None:
        if req.store is False:
            return GatewayError(
                "invalid_request", "background responses must be stored: drop store: false", 400, param="store"
            )
        return None

    def inputs(self, steps: list[Any], sid: str) -> list[Any]:
        """This turn's input as ``GET /v1/responses/{id}/input_items`` lists it (each item with an id)."""
        items = []
        for n, item in enumerate(steps):
            item = dict(item)
            kind = item.setdefault("type", "message")
            item.setdefault("id", f"{_ITEM_PREFIX.get(kind, 'item')}_{sid[5:]}_{n}")
            if kind == "message" and isinstance(item.get("content"), str):
                part = "output_text" if item.get("role") == "assistant" else "input_text"
                item["content"] = [{"type": part, "text": item["content"]}]
            item.setdefault("status", "completed")
            items.append(item)
        return items

    def resume_point(self, query: dict[str, str]) -> int | None:
        value = query.get("starting_after")
        if value is None or value == "":
            return None
        if not value.lstrip("-").isdigit():
            raise GatewayError(
                "invalid_request", "starting_after must be an integer sequence number", 400, param="starting_after"
            )
        return int(value)

    def timeline(self, obj: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
        return obj

    def can_list_inputs(self) -> bool:
        return True

    def cancel_problem(self, stored: dict[str, Any]) -> GatewayError | None:
        if not stored.get("background"):  # as OpenAI: a finished background one is returned as is
            return GatewayError("invalid_request", "Only responses created with background=true can be cancelled.", 400)
        return None

    def not_found(self, sid: str) -> GatewayError:
        """OpenAI's own 404: ``invalid_request_error``, ``param`` and ``code`` null (see errors.py)."""
        return GatewayError("not_found", f"No response found with id '{sid}'.", 404)

    def previous_not_found(self, sid: str) -> GatewayError:
        """OpenAI's own answer: a 400 with code ``previous_response_not_found``, not a 404."""
        return GatewayError(
            "invalid_request",
            f"Previous response with id '{sid}' not found.",
            400,
            raw="previous_response_not_found",
            origin="openai-responses",
            param="previous_response_id",
        )


STORED = ResponsesStore()
