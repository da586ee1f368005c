"""The access log's writer: each request's line handed over as bytes, written in batches off the loop.

Through ``logging`` a line cost ~15 µs of the request's own time (a ``LogRecord`` built, formatted
and copied by ``QueueHandler.prepare``) and a flushed write per line on the listener thread; here
the request pays one ``SimpleQueue.put`` of the bytes ``orjson`` already made, and the writer
thread wakes once for the lines of ``GATHER_SECONDS``, joins them and writes them with one write
and one flush (bench/README.md "third pass"): a line reaches stdout at most ~50 ms after its
request ended, and every queued line is written at shutdown (``stop``). Used when nothing else
listens on the ``gateway.access`` logger (``Observer``): a handler attached there (a user's
logging config, the tests' capture) gets the lines through ``logging`` as before.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import IO, Any

_STOP = b""  # (no line is empty: each is a JSON object)
GATHER_SECONDS = 0.05  # after a line arrives, the lines of the next 50 ms go with it: one wake, write and flush


class AccessWriter:
    """One thread writing lines to ``stream`` (its binary buffer when it has one); started on the first line."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._queue: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, line: bytes) -> None:
        if self._thread is None:
            self._start()
        self._queue.put(line)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gateway-access-log", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        binary: Any = getattr(self._stream, "buffer", None)
        take = self._queue.get
        more = self._queue.get_nowait
        while True:
            lines = [take()]
            if lines[0] != _STOP:
                time.sleep(GATHER_SECONDS)  # (not holding the GIL: the loop runs on meanwhile)
            try:
                while True:
                    lines.append(more())
            except queue.Empty:
                pass
            stop = _STOP in lines
            if stop:
                lines = [line for line in lines if line != _STOP]
            if lines:
                data = b"\n".join(lines) + b"\n"
                try:
                    if binary is not None:
                        binary.write(data)
                        binary.flush()
                    else:
                        self._stream.write(data.decode())
                        self._stream.flush()
                except (OSError, ValueError):  # stdout closed or gone (a pipe's reader left): lines are lost
                    pass
            if stop:
                return

    def stop(self, timeout: float = 2.0) -> None:
        """Write what is queued, then end the thread (at shutdown)."""
        thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout)
            self._thread = None
