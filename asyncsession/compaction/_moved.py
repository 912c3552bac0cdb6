"""Names that moved out of `asyncsession.compaction`: their old paths warn for a release.

Remove this module, and the ``__getattr__`` that calls it, with the deprecated names.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__ = ["moved_summarizer"]


def moved_summarizer(module: str, name: str) -> Any:
    """``OpenAISummarizer`` from its new home, with a `DeprecationWarning` for the old one
    (``module``'s ``__getattr__``); `AttributeError` for any other ``name``."""
    if name != "OpenAISummarizer":
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.OpenAISummarizer is deprecated; import it from asyncsession.openai",
        DeprecationWarning,
        stacklevel=3,
    )
    # The one reference from compaction up to the OpenAI boundary, by name and at call time
    # only, so that no import edge ties the layers together; it goes with the alias.
    return importlib.import_module("asyncsession.openai").OpenAISummarizer
