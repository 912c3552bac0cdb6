"""Fixtures of the example tests: the advisor tests' fixtures, and ``examples/`` importable."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "examples"))

from chat_support import openai_client, repository, server, service  # noqa: E402

__all__ = ["openai_client", "repository", "server", "service"]
