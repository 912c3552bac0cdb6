"""``SessionService``: the front door applications and chat turns call.

[`DefaultSessionService`][asyncsession.service.DefaultSessionService] validates arguments, applies
the service's policies (the default time to live, whether system messages may be stored) and
delegates to a [`SessionRepository`][asyncsession.repository.SessionRepository]. Subclass it to
change one operation and call ``super()`` for the rest.
"""

from ._default import DefaultSessionService
from ._protocol import SessionService

__all__ = ["DefaultSessionService", "SessionService"]

# Each public name shows the path users import it from (in reprs, errors and the API docs).
for _public in (SessionService, DefaultSessionService):
    _public.__module__ = __name__
