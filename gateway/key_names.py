"""The rule for a named key's name, shared by the config file's validation and the admin API.

Its own module, under both ``settings`` and ``keys`` (which reads ``KeySettings``), so checking a
``[[keys]]`` name does not tie settings to the key ring.
"""

from __future__ import annotations

import re

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_name(name: object) -> str:
    """``name`` if it is 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("a key name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name
