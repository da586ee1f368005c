"""The built-in ``pii`` recognizers: a pattern that finds a candidate, a check that confirms it.

A bare regex over-matches (every 16-digit number is not a card); each type's check (Luhn, IBAN
mod-97, the SSN ranges the SSA never issues, ``ipaddress``) keeps false positives down. Every
pattern is bounded, so a streamed answer holds back only what a match in progress needs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

Check = Callable[[str], bool]


def luhn(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def iban(text: str) -> bool:
    compact = text.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in moved)
    return int(number) % 97 == 1


def ssn(text: str) -> bool:
    area, group, serial = text.split("-")
    if area in ("000", "666") or area.startswith("9"):
        return False
    return group != "00" and serial != "0000"


def phone(text: str) -> bool:
    return 7 <= sum(c.isdigit() for c in text) <= 15


def ip(text: str) -> bool:
    # an address holds a digit ("::" and "fe::ab" are valid IPv6 but no one's address): so every
    # confirmed type holds its triggers, which the scanner's pre-filter and its subsets rely on
    if not any(c.isdigit() for c in text):
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def always(text: str) -> bool:
    return True


_D = "0123456789"
# type -> groups of characters: every match holds one of each group (gateway/guardrails/scanner.py
# scans a text only for the types whose groups it has; ``in`` on a str is C speed)
TRIGGERS: dict[str, tuple[str, ...]] = {
    "email": ("@",),
    "iban": (_D,),
    "credit_card": (_D,),
    "us_ssn": (_D, "-"),
    "ip_address": (_D, ".:"),
    "phone_number": (_D,),
}

_DIGITS = "0123456789"
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# type -> every character a match can hold (a stream holds back a trailing run of them)
CHARSETS: dict[str, str] = {
    "email": _LETTERS + _DIGITS + "._%+-@",
    "iban": _LETTERS[:26] + _DIGITS + " ",
    "credit_card": _DIGITS + " -",
    "us_ssn": _DIGITS + "-",
    "ip_address": _DIGITS + "abcdefABCDEF.:",
    "phone_number": _DIGITS + "+() .-/",
}

# type -> every character a match can hold before its first trigger (a digit; an email's "@"): in a
# stream's text without triggers, a value in progress is a trailing run of these (the scanner holds
# back only that run; card numbers and SSNs start with a digit)
LEADS: dict[str, str] = {
    "email": _LETTERS + _DIGITS + "._%+-",
    "iban": _LETTERS[:26],
    "credit_card": "",
    "us_ssn": "",
    "ip_address": "ABCDEFabcdef:",
    "phone_number": "+(",
}

# type -> a pattern every match of the type's recognizer holds (a substring of its body; read off the
# pattern below, and tests/guardrails/test_scanner.py checks it on every value and lookalike it finds):
# a stream's text with digits but none of these holds no value that could be complete yet, so it is
# released up to its trailing run without the recognizers (most numbers in prose: "in 3 of 12 runs")
SEEDS: dict[str, tuple[tuple[str, str], ...]] = {  # type -> seeds, each (its first character's class, the rest)
    "email": (("@", ""),),
    "iban": (("A-Z", r"[A-Z]\d{2}"),),
    "credit_card": ((r"\d", r"(?:[ -]?\d){12}"),),
    "us_ssn": ((r"\d", r"\d{2}-\d{2}-\d{4}"),),
    "ip_address": ((r"\d", r"\.\d"), (":", r"[0-9A-Fa-f]{0,4}:")),
    "phone_number": (
        (r"\+", r"\d"),
        (r"(", r"\d{3}\)"),
        (r"\d", r"\d{2}[ .-]\d{3}[ .-]\d{4}"),
        ("0", r"\d{1,4}[ /-]\d{3}"),
    ),
}

# type -> (pattern, check); order is priority at one position (a card before a phone number)
RECOGNIZERS: dict[str, tuple[str, Check]] = {
    "email": (r"(?<![\w.%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}(?![\w-])", always),
    "iban": (r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])", iban),
    "credit_card": (r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d])", luhn),
    "us_ssn": (r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])", ssn),
    "ip_address": (
        r"(?<![\w.:])(?:\d{1,3}(?:\.\d{1,3}){3}|(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4})(?![\w:]|\.\d)",
        ip,
    ),
    "phone_number": (
        r"(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
        r"|\(\d{3}\) ?\d{3}[ .-]\d{4}|\d{3}[ .-]\d{3}[ .-]\d{4}|0\d{1,4}[ /-]\d{3,8}(?:[ -]\d{2,4})?)(?![\w])",
        phone,
    ),
}
