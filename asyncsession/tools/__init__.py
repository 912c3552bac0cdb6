"""Tools the model can call: recall over the session log."""

from .recall import ConversationSearch, CrossSessionSearch

__all__ = ["ConversationSearch", "CrossSessionSearch"]
