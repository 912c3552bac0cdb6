"""The scripted OpenAI server, by concern; ``asyncsession.testing.openai_server`` is its face."""
