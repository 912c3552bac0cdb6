"""`MongoCommandCounter`: the MongoDB commands of a turn, by PyMongo command monitoring."""

from __future__ import annotations

from typing import Final

from pymongo import monitoring

from .._telemetry import current_turn

__all__ = ["MongoCommandCounter"]

_HANDSHAKES: Final = frozenset(
    {"hello", "ismaster", "isMaster", "ping", "endSessions", "saslStart", "saslContinue"}
)


class MongoCommandCounter(monitoring.CommandListener):
    """Counts the commands a client sends for each traced turn (``asyncsession.turn.db_commands``).

    Register it on the client the store uses: ``AsyncMongoClient(uri,
    event_listeners=[MongoCommandCounter()])``, or ``MongoSessionRepository.from_uri(uri, db,
    event_listeners=[MongoCommandCounter()])``. A command counts towards the turn whose
    `TracingAdvisor` span is current in the task that sends it; connection handshakes, pings and
    the client's own monitoring are not counted. It keeps no state of its own, so one counter
    serves any number of clients and concurrent turns.
    """

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        """Count the command towards the current turn."""
        if event.command_name in _HANDSHAKES:
            return
        stats = current_turn()
        if stats is not None:
            stats.db_commands += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        """Nothing to do."""

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        """Nothing to do."""
