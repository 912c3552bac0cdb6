"""``SessionService``: the front door applications and advisors call.

[`DefaultSessionService`][asyncsession.service.DefaultSessionService] validates arguments, applies
the service's policies (the default time to live, whether system messages may be stored) and
delegates to a [`SessionRepository`][asyncsession.repository.SessionRepository].
[`DelegatingSessionService`][asyncsession.service.DelegatingSessionService] forwards every call to
another service, so a decorator (authorization, metrics) overrides only what it needs.

A service may also declare two optional capabilities, each an explicit protocol with a type
guard: [`EventIdDrawingService`][asyncsession.service.EventIdDrawingService] (it hands out
event ids, see [`new_event_id`][asyncsession.service.new_event_id]) and
[`SystemMessagePolicy`][asyncsession.service.SystemMessagePolicy] (it says whether it stores
system messages). Both services here declare both.
"""

from ._capabilities import (
    EventIdDrawingService,
    SystemMessagePolicy,
    allows_system_messages,
    new_event_id,
)
from ._default import DefaultSessionService
from ._delegating import DelegatingSessionService
from ._protocol import SessionService

__all__ = [
    "SessionService",
    "DefaultSessionService",
    "DelegatingSessionService",
    "EventIdDrawingService",
    "SystemMessagePolicy",
    "allows_system_messages",
    "new_event_id",
]

# Each public name shows the path users import it from (in reprs, errors and the API docs).
for _public in (
    SessionService,
    DefaultSessionService,
    DelegatingSessionService,
    EventIdDrawingService,
    SystemMessagePolicy,
    allows_system_messages,
    new_event_id,
):
    _public.__module__ = __name__
