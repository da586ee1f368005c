"""Two gateways sharing a Redis Cluster (three masters, three replicas): a stream started on one is
resumed through the other from the caller's last event id, and a cancel sent through the other
ends the generation on the one that runs it (the cancel flag is a polled key in the stream's own
hash slot: no pub/sub, which a cluster would confine to one node). Callers are the google-genai
and openai SDKs. Key limits, budgets, spend and affinity across two gateways on the cluster are in
tests/governance/test_keys_replicas.py and tests/routing/test_routes_redis.py (parametrized)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.relay.test_detached import (
    _assert_interaction_cancelled,
    _assert_response_cancelled,
    _config,
    _take,
    in_thread,
)
from tests.relay.test_stateful import LONG_TEXT, interactions, stream_text
from tests.support.callers import openai_client
from tests.support.fake_upstream import FakeUpstream, ServerThread
from tests.support.redis_servers import RedisClusterGroup


@pytest.fixture
def pair(fake: FakeUpstream, redis_cluster: RedisClusterGroup) -> Iterator[tuple[str, str]]:
    redis_cluster.flush()
    config = _config(fake, redis_cluster.url)
    with ServerThread(create_app(Settings(**config))) as a, ServerThread(create_app(Settings(**config))) as b:
        yield a.url, b.url


def test_a_stream_resumes_through_the_other_gateway(pair: tuple[str, str]) -> None:
    url_a, url_b = pair
    seen = list(
        _take(interactions(url_a).interactions.create(model="openai-chat--slow_stream", input="hi", stream=True), 8)
    )
    rest = list(
        interactions(url_b).interactions.get(seen[0].interaction.id, stream=True, last_event_id=seen[-1].event_id)
    )
    assert stream_text(seen) + stream_text(rest) == LONG_TEXT, rest[-1].event_type
    ids = [e.event_id for e in seen + rest]
    assert len(ids) == len(set(ids)), "nothing repeated"
    # a finished one, read whole through either gateway
    again = [list(interactions(u).interactions.get(seen[0].interaction.id, stream=True)) for u in pair]
    assert stream_text(again[0]) == stream_text(again[1]) == LONG_TEXT


def test_a_cancel_through_the_other_gateway_ends_the_generation(pair: tuple[str, str]) -> None:
    url_a, url_b = pair
    first = list(
        _take(interactions(url_a).interactions.create(model="anthropic--slow_stream", input="hi", stream=True), 4)
    )
    iid = first[0].interaction.id
    follower = in_thread(
        lambda: list(interactions(url_b).interactions.get(iid, stream=True, last_event_id=first[-1].event_id))
    )
    time.sleep(0.3)
    started = time.monotonic()
    assert httpx.post(f"{url_b}/v1beta/interactions/{iid}/cancel", timeout=10).json()["status"] == "cancelled"
    assert time.monotonic() - started < 5  # the owner hears it within a heartbeat
    _assert_interaction_cancelled(first + follower())

    created = openai_client(url_a).responses.create(model="anthropic--slow_stream", input="hi", background=True)
    follower = in_thread(lambda: list(openai_client(url_b).responses.retrieve(created.id, stream=True)))
    time.sleep(0.5)
    assert openai_client(url_b).responses.cancel(created.id).status == "cancelled"
    _assert_response_cancelled(follower())
