"""Fixtures of the advisor tests: the scripted server, a real OpenAI client, a counting store."""

from chat_support import openai_client, repository, server, service

__all__ = ["openai_client", "repository", "server", "service"]
