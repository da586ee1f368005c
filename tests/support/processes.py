"""A gateway in its own process (``python -m gateway serve``), for tests about replicas."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def start_gateway_process(
    config: Path, port: int, timeout: float = 30.0, stdout: int = subprocess.DEVNULL
) -> tuple[subprocess.Popen[bytes], str]:
    """Start a gateway on ``config`` (which listens on ``port``) and wait until /healthz answers.

    ``GATEWAY_*`` variables of the test run are not passed on, so the file alone configures it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config)],
        cwd=ROOT,
        env=env,
        stdout=stdout,  # (the access log; subprocess.PIPE to read it)
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=0.5).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("gateway process did not start")
