"""CPU per upstream frame of each dialect's stream decoder alone (no HTTP, no SSE framing, no encoder).

Every ``.sse`` capture of a dialect (``captures/<dialect>/`` and, when present,
``../shared/captures-public/<dialect>/``) is split into SSE frames once; then a fresh decoder is fed
all of them, ``--rounds`` times, and the best of ``--repeat`` runs is reported as CPU ns per frame
(process time, so other load on the machine counts less).
Compare runs on one machine only (a before/after figure for a decoder change)::

    .venv/bin/python bench/decode_cost.py [--rounds 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from gateway.dialects.registry import MODULES, codec_for
from gateway.framing.sse import SSEDecoder, SSEFrame

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (
    ROOT / "captures",
    ROOT.parent / "shared" / "captures-public",
    ROOT.parents[1] / "shared" / "captures-public",
)


def frames_of(dialect: str) -> list[list[SSEFrame]]:
    streams = []
    for folder in FOLDERS:
        for path in sorted((folder / dialect).glob("*.sse")) if (folder / dialect).is_dir() else []:
            sse = SSEDecoder()
            streams.append(sse.feed(path.read_bytes()))
    return streams


def cost(dialect: str, rounds: int, repeat: int) -> tuple[int, float]:
    codec = codec_for(dialect)
    streams = frames_of(dialect)
    count = sum(len(s) for s in streams)
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time_ns()
        for _ in range(rounds):
            for frames in streams:
                decoder = codec.stream_decoder()
                for frame in frames:
                    decoder.feed(frame)
                decoder.close()
        best = min(best, (time.process_time_ns() - start) / (rounds * max(count, 1)))
    return count, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)  # unknown-event warnings are logged once; keep the output clean
    print("| dialect | frames | ns/frame |\n|---|---:|---:|")
    for dialect in MODULES:
        if not frames_of(dialect):
            print(f"| {dialect} | 0 | — (no .sse captures) |")
            continue
        count, ns = cost(dialect, args.rounds, args.repeat)
        print(f"| {dialect} | {count} | {ns:.0f} |")


if __name__ == "__main__":
    main()
