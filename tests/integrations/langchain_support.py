"""Shared helpers of the LangChain history tests: the factory type."""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.chat_history import BaseChatMessageHistory

__all__ = ["ChatHistoryFactory"]

ChatHistoryFactory = Callable[[str], BaseChatMessageHistory]
"""Builds a LangChain history of one session id on the store under test."""
