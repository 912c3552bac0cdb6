"""Fixtures of the advisor tests: the scripted model, a real OpenAI client on it, a counting
store, and each store in turn (``store_repository``, ``store``)."""

from chat_support import openai_client, repository, server, service, store, store_repository

__all__ = ["openai_client", "repository", "server", "service", "store", "store_repository"]
