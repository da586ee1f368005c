"""The ids a request mints: fresh hex every call, never repeated, not shared with a forked child."""

from __future__ import annotations

import os
import re

from gateway.dialects.common import new_id
from gateway.random_ids import random_hex


def test_hex_of_the_asked_length_never_repeated_across_refills() -> None:
    seen = {random_hex(12) for _ in range(5000)}  # ~15 refills of the 4 KiB pool
    assert len(seen) == 5000
    assert all(re.fullmatch(r"[0-9a-f]{24}", h) for h in seen)
    assert len(random_hex(5000)) == 10000  # bigger than the pool: read whole
    assert re.fullmatch(r"msg_[0-9a-f]{24}", new_id("msg_"))


def test_a_forked_child_does_not_hand_out_its_parents_next_ids() -> None:
    random_hex(12)  # the pool is filled
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.write(write, random_hex(12).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    assert child != random_hex(12)
