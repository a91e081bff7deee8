"""Counts in words, the same way in every message: ``1 diagnosis``, ``2,048 frames``."""

from __future__ import annotations

_IRREGULAR = {"diagnosis": "diagnoses", "entry": "entries", "switch": "switches",
              "is": "are", "was": "were", "this": "these"}


def plural(singular: str) -> str:
    """The plural of an English noun of this project's vocabulary."""
    if singular in _IRREGULAR:
        return _IRREGULAR[singular]
    if singular.endswith(("s", "x", "ch", "sh")):
        return singular + "es"
    return singular + "s"


def counted(n: int, singular: str, plural_form: str | None = None) -> str:
    """``n`` with thousands separators and the noun in the number it takes."""
    noun = singular if n == 1 else (plural_form or plural(singular))
    return f"{n:,} {noun}"
