"""Sessions for agent frameworks, on the same event log as everything else.

- `asyncsession.integrations.openai_agents`: a `Session` for the OpenAI Agents SDK
  (the ``[agents]`` extra: ``pip install '.[agents]'``).
- `asyncsession.integrations.langchain`: a LangChain chat message history (``[langchain]``).
- `asyncsession.integrations.pydantic_ai`: a Pydantic AI message history (``[pydantic-ai]``).
- `asyncsession.integrations.google_adk`: a Google ADK session service (``[google-adk]``).

Every adapter given a user id refuses another user's session, and runs its calls, sync or
async, on the event loop its store belongs to.

Nothing here is imported by ``import asyncsession``; each integration imports its framework
when you import it.
"""

__all__: list[str] = []
