"""Fixtures of the client tests: the same as the advisor tests'."""

from chat_support import openai_client, repository, server, service, store, store_repository

__all__ = ["openai_client", "repository", "server", "service", "store", "store_repository"]
