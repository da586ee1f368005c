"""The rule a follower uses to give up a generation's owner (``store.base.Liveness``)."""

from __future__ import annotations

import time

from gateway.store import Liveness


def test_a_stale_heartbeat_is_only_a_suspicion_until_it_stays_unrenewed() -> None:
    live = Liveness(1.0)  # confirm = 0.25 s
    assert not live.gone(100.0, 0.5)  # fresh
    assert not live.gone(100.0, 1.5)  # stale once (a snapshot taken right after a pause): suspicion
    time.sleep(0.3)
    assert not live.gone(101.0, 1.2)  # a new heartbeat meanwhile, even if stale again: suspicion anew
    assert not live.gone(101.0, 1.3)  # the same one, but not yet watched for confirm seconds
    time.sleep(0.3)
    assert live.gone(101.0, 1.6)  # the same heartbeat, still stale, watched for 0.3 s: gone


def test_a_fresh_look_clears_the_suspicion() -> None:
    live = Liveness(1.0)
    assert not live.gone(100.0, 1.5)
    assert not live.gone(100.0, 0.2)  # an event arrived (the age is the younger of the two)
    time.sleep(0.3)
    assert not live.gone(100.0, 1.5)  # a new suspicion starts here
    time.sleep(0.3)
    assert live.gone(100.0, 1.8)


def test_an_owner_known_alive_is_never_gone() -> None:
    running = True
    live = Liveness(0.1, owner_alive=lambda: running)
    for _ in range(3):
        assert not live.gone(1.0, 3600.0)
        time.sleep(0.05)
    running = False  # the task ended without finishing its log: judged by the heartbeat again
    assert not live.gone(1.0, 3600.0)
    time.sleep(0.05)
    assert live.gone(1.0, 3600.0)
