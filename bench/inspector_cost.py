"""What the inspector costs per request: capture off / errors / all, streamed requests in sequence.

The gateway in front of the test suite's fake upstream (loopback), one httpx client posting an
OpenAI chat stream answered by an Anthropic upstream (``captures/anthropic/long_500.sse``: 500
events), read to the end. Prints the median and p90 wall time per request per mode.
Run: ``.venv/bin/python bench/inspector_cost.py [requests]``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from gateway.server.app import create_app
from gateway.settings import Settings
from tests.conftest import gateway_config
from tests.support.fake_upstream import FakeUpstream, ServerThread

BODY = {
    "model": "anthropic--long_500",
    "stream": True,
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "hi"}],
}


def run(fake_port: int, capture: str, n: int) -> list[float]:
    conf = gateway_config(f"http://127.0.0.1:{fake_port}")
    conf["admin"] = {"key": "bench-admin"}
    conf["inspector"] = {"capture": capture}
    times = []
    with ServerThread(create_app(Settings(**conf))) as gw, httpx.Client(base_url=gw.url, timeout=30) as client:
        for i in range(n + 20):
            t = time.perf_counter()
            with client.stream("POST", "/v1/chat/completions", json=BODY) as r:
                for _ in r.iter_raw():
                    pass
            if i >= 20:  # warm-up excluded
                times.append((time.perf_counter() - t) * 1000)
    return times


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    fake = FakeUpstream()
    with ServerThread(fake) as up:
        for mode in ("off", "errors", "all", "off"):
            t = sorted(run(up.port, mode, n))
            print(
                f"capture={mode:6} median {statistics.median(t):6.2f} ms  p90 {t[int(len(t) * 0.9)]:6.2f} ms  (n={n})"
            )


if __name__ == "__main__":
    main()
