"""Log positions for the MongoDB store: gapped integers, with fractional keys as a fallback.

A position is ``(seq, minor)``, ordered as a tuple. Appends take ``seq`` values
`GAP` apart and an empty ``minor``. Compaction puts new events *between* existing ones
without moving anything: a group before anchor ``A`` whose predecessor is ``P`` takes integers in
``(P.seq, A.seq)``, packed near ``P`` so that the rest of the gap stays free for later inserts
before ``A``. Only when no integer is left in the gap does a group take ``P.seq`` with fractional
``minor`` keys between ``P``'s and ``A``'s, which always exist. No event is ever renumbered.

Consecutive events never differ by more than `GAP` in ``seq`` (appends step by exactly
``GAP`` and inserts only split gaps), so an event's predecessor always lies in
``[seq - GAP, seq]``: a bounded range query finds it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["GAP", "MAX_STEP", "Position", "key_between", "place_between"]

GAP: Final = 1 << 32
"""The distance between consecutively appended events."""
MAX_STEP: Final = 1 << 20
"""The largest distance between inserted events, so a gap survives many inserts at one point."""

Position = tuple[int, str]
"""``(seq, minor)``: where an event is in its session's log."""

_DIGITS: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def key_between(low: str, high: str | None) -> str:
    """A fractional key strictly between ``low`` and ``high`` (``None``: no upper bound).

    Keys are base-62 digit strings compared as plain strings; ``""`` is the smallest key and no
    key this function returns ends in ``"0"``, so there is always room below any key but ``""``.
    """
    if high is not None:
        if high <= low:
            raise ValueError(f"{low!r} is not below {high!r}")
        common = 0
        while common < len(high) and (low[common] if common < len(low) else "0") == high[common]:
            common += 1
        if common:
            return high[:common] + key_between(low[common:], high[common:])
    digit_low = _DIGITS.index(low[0]) if low else 0
    digit_high = _DIGITS.index(high[0]) if high is not None else len(_DIGITS)
    if digit_high - digit_low > 1:
        return _DIGITS[(digit_low + digit_high) // 2]
    if high is not None and len(high) > 1:
        return high[:1]
    return _DIGITS[digit_low] + key_between(low[1:], None)


def place_between(before: Position, after: Position, count: int) -> list[Position]:
    """``count`` positions in order, strictly between ``before`` and ``after``."""
    if count <= 0:
        return []
    if not before < after:
        raise ValueError(f"{before!r} is not before {after!r}")
    low_seq, low_minor = before
    high_seq, high_minor = after
    if high_seq - low_seq - 1 >= count:
        step = min((high_seq - low_seq) // (count + 1), MAX_STEP)
        return [(low_seq + step * i, "") for i in range(1, count + 1)]
    bound = high_minor if high_seq == low_seq else None
    positions: list[Position] = []
    key = low_minor
    for _ in range(count):
        key = key_between(key, bound)
        positions.append((low_seq, key))
    return positions
