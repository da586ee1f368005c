"""``TurnMemory``: the recent turns one Responses WebSocket connection keeps to chain on.

Its own module so the relay (``pipeline``, ``stateful``) can name it without importing
``ws_session``, which builds on ``stateful`` (see ``ws_session``'s docstring for why it exists).
A kept turn is the conversation so far as IR objects, as the request had it plus the answer's
assistant turn: the next turn prepends it as is, with no JSON round trip per turn (the store's
record is JSON because another process reads it; this one never leaves the connection).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from gateway.ir import Message, TextPart


@dataclass(frozen=True, slots=True)
class Kept:
    messages: list[Message]  # the whole conversation up to and including this turn's answer
    system: list[TextPart]
    key_name: str | None  # the named key whose turn it is: only it may continue it


TURN_MEMORY = "gateway.turn_memory"  # the scope key of a WebSocket turn's connection memory


class TurnMemory:
    """A connection's recent turns by response id: at most ``size``, the oldest dropped first."""

    __slots__ = ("size", "turns")

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.turns: OrderedDict[str, Kept] = OrderedDict()

    def get(self, response_id: str) -> Kept | None:
        return self.turns.get(response_id)

    def put(self, response_id: str, kept: Kept) -> None:
        self.turns[response_id] = kept
        self.turns.move_to_end(response_id)
        while len(self.turns) > self.size:
            self.turns.popitem(last=False)
