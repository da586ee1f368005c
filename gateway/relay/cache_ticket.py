"""``Ticket``: one request's dealings with the response cache (gateway/relay/cache.py).

Its own module so ``Exchange`` can carry it without importing the cache (which imports the
attempts, which import the exchange).
"""

from __future__ import annotations

from gateway.events import Event


class Ticket:
    """One request's dealings with the cache: its key, what the caller allowed, what it got."""

    __slots__ = ("key", "lookup", "store", "result", "events", "route")

    def __init__(self, key: str, route: str, lookup: bool, store: bool) -> None:
        self.key, self.route, self.lookup, self.store = key, route, lookup, store
        self.result = "bypass" if not lookup else "miss"
        self.events: list[Event] = []  # the answer's events, as they pass (only while ``store``)
