"""Tools the model can call: the `Tool` type, and the tools that ship with the library.

- [`Tool`][asyncsession.tools.Tool] and [`tool`][asyncsession.tools.tool]: a tool is a name,
  a description, a JSON schema generated from a typed function or a pydantic model, and
  ``invoke(arguments_json) -> str``. Arguments that do not validate come back to the model as
  an ``"Error: ..."`` text, for every tool alike. A tool may be ``idempotent`` (a takeover may
  run it again) or ``needs_approval`` (a flag, or a function of the call's arguments), see the
  tools guide.
- [`AutoMemoryTools`][asyncsession.tools.AutoMemoryTools]: the six long-term memory
  tools over a [`MemoryStore`][asyncsession.memory.MemoryStore].
- [`conversation_search`][asyncsession.tools.conversation_search] and
  [`cross_session_search`][asyncsession.tools.cross_session_search]: recall over the
  session log, archived turns included.

The chat turn runs them: give them to a client (``ChatClient(..., tools=[...])``) or to one
call (``tools=[...]``); the advisors
[`AutoMemoryToolsAdvisor`][asyncsession.advisors.AutoMemoryToolsAdvisor] and
[`SessionRecallAdvisor`][asyncsession.advisors.SessionRecallAdvisor] offer these tools per call.
"""

from ._memory import AutoMemoryTools
from ._recall import conversation_search, cross_session_search
from ._tool import Tool, tool

__all__ = [
    "AutoMemoryTools",
    "Tool",
    "conversation_search",
    "cross_session_search",
    "tool",
]

# Each public name shows the path users import it from (in reprs, errors and the API docs).
for _public in (AutoMemoryTools, conversation_search, cross_session_search):
    _public.__module__ = __name__
