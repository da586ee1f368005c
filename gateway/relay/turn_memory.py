"""``TurnMemory``: the recent turns one Responses WebSocket connection keeps to chain on.

Its own module so the relay (``pipeline``, ``stateful``) can name it without importing
``ws_session``, which builds on ``stateful`` (see ``ws_session``'s docstring for why it exists).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

TURN_MEMORY = "gateway.turn_memory"  # the scope key of a WebSocket turn's connection memory


class TurnMemory:
    """A connection's recent turns by response id (see the module docstring): at most ``size``."""

    __slots__ = ("size", "turns")

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.turns: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def get(self, response_id: str) -> dict[str, Any] | None:
        return self.turns.get(response_id)

    def put(self, response_id: str, record: dict[str, Any]) -> None:
        self.turns[response_id] = record
        self.turns.move_to_end(response_id)
        while len(self.turns) > self.size:
            self.turns.popitem(last=False)
