"""Which worker this process is, and asking the other workers for their per-process figures.

With ``--workers N`` (gateway/server/workers.py) each worker is its own process: the store (keys,
limits, budgets, spend, the request log) is shared, but the Prometheus registry, the console's
minute buckets and the inspector's ring live in each process. A caller reaching the shared port lands
on one worker, so that worker answers for all: it asks each sibling for its own part over the
sibling's private Unix socket (``<run dir>/worker-<i>.sock``, never on the network), marked with
``LOCAL_HEADER`` so the sibling answers for itself only, and merges the parts (``merge_metrics``
below; the console and inspector merge theirs in gateway/console/routes.py).

The identity comes from the environment the supervisor sets for each worker: ``GATEWAY_WORKER_INDEX``,
``GATEWAY_WORKER_COUNT`` and ``GATEWAY_WORKER_DIR``. Without them (one process) there are no
siblings and nothing here runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString as _untyped_float_to_go

log = logging.getLogger("gateway.workers")
_float_to_go: Callable[[float], str] = _untyped_float_to_go  # (prometheus_client leaves it untyped)

LOCAL_HEADER = "x-gateway-worker-local"  # a sibling's request: answer for this process only
ASK_TIMEOUT = 2.0  # a sibling that does not answer within this is left out (and named in the log)


def socket_path(run_dir: str | Path, index: int) -> Path:
    return Path(run_dir) / f"worker-{index}.sock"


@dataclass(frozen=True, slots=True)
class Worker:
    index: int
    count: int
    run_dir: str

    def siblings(self) -> list[int]:
        return [i for i in range(self.count) if i != self.index]


def current() -> Worker | None:
    """This process's place among the workers, or None when it is the only process."""
    try:
        count = int(os.environ.get("GATEWAY_WORKER_COUNT", "") or 0)
        index = int(os.environ.get("GATEWAY_WORKER_INDEX", "") or 0)
    except ValueError:
        return None
    run_dir = os.environ.get("GATEWAY_WORKER_DIR", "")
    if count <= 1 or not run_dir:
        return None
    return Worker(index, count, run_dir)


def wants_local(scope: Mapping[str, Any]) -> bool:
    """A sibling asked: answer with this process's own figures, do not fan out again."""
    name = LOCAL_HEADER.encode()
    return any(k == name for k, _ in scope.get("headers", ()))


async def ask_siblings(worker: Worker, path: str, headers: dict[str, str] | None = None) -> dict[int, httpx.Response]:
    """GET ``path`` from every sibling at once; the answers by worker index (a sibling that fails
    or is slow is left out, logged: a partial figure is better than none, and it says so)."""
    sent = {**(headers or {}), LOCAL_HEADER: "1"}

    async def one(index: int) -> httpx.Response | None:
        transport = httpx.AsyncHTTPTransport(uds=str(socket_path(worker.run_dir, index)))
        try:
            async with httpx.AsyncClient(transport=transport, timeout=ASK_TIMEOUT) as client:
                return await client.get("http://worker" + path, headers=sent)
        except (httpx.HTTPError, OSError) as exc:
            log.warning(
                "worker %d: no answer from worker %d for %s (%s)", worker.index, index, path, type(exc).__name__
            )
            return None

    siblings = worker.siblings()
    answers = await asyncio.gather(*(one(i) for i in siblings))
    return {i: r for i, r in zip(siblings, answers, strict=True) if r is not None}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _help(doc: str) -> str:
    return doc.replace("\\", "\\\\").replace("\n", "\\n")  # HELP escapes these two only


def merge_metrics(parts: dict[int, bytes]) -> bytes:
    """Several workers' Prometheus text as one exposition: every series gains a ``worker`` label
    (so ``sum without (worker)`` is the gateway's figure), each family's HELP and TYPE once."""
    families: dict[str, tuple[str, str, list[str]]] = {}
    for index in sorted(parts):
        for family in text_string_to_metric_families(parts[index].decode()):
            entry = families.setdefault(family.name, (family.documentation, family.type, []))
            for sample in family.samples:
                labels: dict[str, Any] = {"worker": str(index), **sample.labels}
                rendered = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
                entry[2].append(f"{sample.name}{{{rendered}}} {_float_to_go(sample.value)}")
    out: list[str] = []
    for family_name, (doc, kind, lines) in families.items():
        name = family_name + "_total" if kind == "counter" else family_name  # as generate_latest names it
        out.append(f"# HELP {name} {_help(doc)}")
        out.append(f"# TYPE {name} {kind}")
        out += lines
    return ("\n".join(out) + "\n").encode()


async def all_metrics(worker: Worker | None, scope: Mapping[str, Any], own: bytes) -> bytes:
    """``/metrics``: this process's text alone (one process, or a sibling asking), else every
    worker's, merged with a ``worker`` label."""
    if worker is None or wants_local(scope):
        return own
    answers = await ask_siblings(worker, "/metrics")
    parts = {i: r.content for i, r in answers.items() if r.status_code == 200}
    parts[worker.index] = own
    return merge_metrics(parts)
