"""The old home of `Tool`, `tool` and `ToolCallingAdvisor`, kept so existing imports work.

`Tool` and `tool` live in [`asyncsession.tools`][asyncsession.tools], the loop in
`asyncsession.advisors.tool_calling`; import them from there, or from `asyncsession.advisors`.
"""

from ..tools import Tool, tool
from .tool_calling import ToolCallingAdvisor

__all__ = ["Tool", "ToolCallingAdvisor", "tool"]
