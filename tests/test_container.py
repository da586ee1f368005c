"""The container recipe, checked without a container engine (none runs on the test machines):
the compose file parses and references files that exist, and the Dockerfile's install steps,
replayed in a fresh venv, give a gateway that starts and answers /healthz."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.fake_upstream import free_port

ROOT = Path(__file__).resolve().parents[1]


def test_compose_parses_and_references_existing_files() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert "gateway" in services
    assert services["gateway"]["build"] == "."
    assert (ROOT / "Dockerfile").exists()
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{source} does not exist"
    assert "redis" in services and services["redis"]["profiles"] == ["replicas"]


def test_dockerfile_steps_in_a_fresh_venv(tmp_path: Path) -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "USER gateway" in dockerfile and "HEALTHCHECK" in dockerfile
    for line in dockerfile.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"COPY source {source} missing"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], capture_output=True, text=True, timeout=600
    )
    if pip.returncode != 0:
        pytest.fail(pip.stderr[-2000:])
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("GATEWAY_")}
    proc = subprocess.Popen(
        [str(venv / "bin" / "python"), "-m", "gateway", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("the installed gateway did not become healthy")
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "demo", "messages": [{"role": "user", "content": "hi"}]},
            timeout=10,
        )
        assert reply.status_code == 200
        assert "demo" in reply.json()["choices"][0]["message"]["content"]
    finally:
        proc.terminate()
        proc.wait(timeout=15)
