"""Random hex for the ids a request mints (request ids, message, tool-call and response ids).

A whole request mints three to six of them; ``os.urandom(12).hex()`` is one ``getrandom`` system
call each (~1 µs with the Python call, and 3 % of a whole request's samples under load,
bench/README.md "third pass"). The same kernel randomness read 4 KiB at a time serves ~340 ids a
call. The bytes are used once each and never shown twice; a forked child drops what its parent
read (``os.register_at_fork``), so two processes never hand out the same id. The ids are not
secrets (keys are minted with ``secrets`` in gateway/governance/keys.py), but they stay
unpredictable: they are the kernel's CSPRNG output, only fetched in bigger reads.
"""

from __future__ import annotations

import os

_CHUNK = 4096
_pool = b""
_at = 0


def random_hex(nbytes: int = 12) -> str:
    """``2 * nbytes`` hex digits of fresh kernel randomness (what ``secrets.token_hex(nbytes)`` gives)."""
    global _pool, _at
    end = _at + nbytes
    if end > len(_pool):
        _pool, _at, end = os.urandom(max(_CHUNK, nbytes)), 0, nbytes
    piece = _pool[_at:end]
    _at = end
    return piece.hex()


def _forget() -> None:
    """In a forked child: the parent's unread bytes are the parent's."""
    global _pool, _at
    _pool, _at = b"", 0


os.register_at_fork(after_in_child=_forget)
