"""Sessions for agent frameworks, on the same event log as everything else.

- `asyncsession.integrations.openai_agents`: a `Session` for the OpenAI Agents SDK
  (the ``[agents]`` extra: ``pip install '.[agents]'``).

Nothing here is imported by ``import asyncsession``; each integration imports its framework
when you import it.
"""

__all__: list[str] = []
