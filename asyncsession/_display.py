"""How a caller's text is shown inside an error message: control characters escaped, cut short."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["CONTROL_CHARACTERS", "shown_path"]

CONTROL_CHARACTERS: Final = re.compile(r"[\x00-\x1f\x7f]")
"""ASCII control characters (NUL included): never shown raw, never allowed in a memory path."""

_SHOWN_CHARS: Final = 120


def shown_path(path: str) -> str:
    """Render a caller's path for an error message: control characters escaped, long ones cut."""
    text = CONTROL_CHARACTERS.sub(lambda m: f"\\x{ord(m.group()):02x}", path)
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + "..."
    return text
