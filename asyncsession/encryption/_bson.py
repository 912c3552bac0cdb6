"""BSON decoding with the types of the result known (PyMongo's ``decode`` is partly untyped)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import bson
from bson.codec_options import CodecOptions

__all__ = ["decode"]

_decode: Callable[[bytes, CodecOptions[dict[str, Any]]], dict[str, Any]] = bson.decode  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


def decode(raw: bytes, codec_options: CodecOptions[dict[str, Any]]) -> dict[str, Any]:
    """The document ``raw`` holds, decoded with ``codec_options``."""
    return _decode(raw, codec_options)
