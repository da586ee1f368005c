"""The gateway's access log and warnings, as a test reads them: each JSON line by request id.

``capture_access_log()`` attaches a handler to ``gateway.access`` (and to ``gateway.telemetry.observe`` for
the usage warnings) before the gateway starts, so the ``Observer`` writes to it instead of stdout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.warnings: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "gateway.access":
            self.lines.append(record.getMessage())
        elif record.levelno >= logging.WARNING:
            self.warnings.append(record.getMessage())

    def line(self, request_id: str, timeout: float = 5.0) -> dict[str, Any]:
        """The access-log line of ``request_id``, waiting for it: it is written after the response."""
        return self.line_where(lambda entry: entry.get("request_id") == request_id, timeout, request_id)

    def line_where(
        self, match: Callable[[dict[str, Any]], bool], timeout: float = 5.0, what: str = "the match"
    ) -> dict[str, Any]:
        """The latest access-log line ``match`` accepts (waiting up to ``timeout`` for one)."""
        deadline = time.monotonic() + timeout
        while True:
            for text in reversed(list(self.lines)):
                entry = orjson.loads(text)
                if match(entry):
                    return entry
            if time.monotonic() > deadline:
                raise AssertionError(f"no access-log line for {what}")
            time.sleep(0.02)


@contextmanager
def capture_access_log() -> Iterator[Capture]:
    capture = Capture()
    loggers = [logging.getLogger("gateway.access"), logging.getLogger("gateway.observe")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(capture)
        lg.setLevel(logging.INFO)
    try:
        yield capture
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(capture)
            lg.setLevel(level)
