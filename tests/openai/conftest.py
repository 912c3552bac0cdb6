"""Fixtures of the ChatClient tests: the same as the advisor tests'."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "advisors"))

from chat_support import openai_client, repository, server, service, store, store_repository

__all__ = ["openai_client", "repository", "server", "service", "store", "store_repository"]
