"""The MongoDB session store: ``MongoSessionRepository``, correct under concurrency and crashes.

**Storage layout.** Three collections (names configurable). ``_layout`` names every
collection and stored field once, with its full name and meaning; no other module spells one.

``sessions``
    One document per session: ``_id`` (the session id), ``user_id``, ``created_at``,
    ``expires_at``, ``metadata`` (JSON text), ``version``, the position counter ``seq``, and the
    **tail**: the newest events, each as its id and one string packing its timestamp, flags,
    type and JSON body (bodies over 16 KiB stay in the events collection and the tail keeps a
    reference). ``rolled`` splits the log: events at ``seq <= rolled`` live in
    ``session_events``, the rest in the tail. ``live``
    counts unarchived messages below the tail, ``compacted`` marks the newest compaction,
    ``pending`` holds a compaction's changes below the tail until they are rolled forward, and
    ``fences`` lists write attempts that may no longer commit.
``session_events``
    One document per event below the tail: ``_id`` (the event id), ``session_id``, ``inc``,
    ``seq`` and ``minor`` (its position), ``ts``, ``type``, ``archived``, ``turn`` (where its
    turn started), ``data`` (JSON text, which keyword searches match), and ``synthetic`` and
    ``cv`` when they are not ``false`` and ``0``.
``session_event_ids``
    The id registry, ``{_id: event id, session_id, token}``: it makes event ids unique across
    sessions, on a sharded cluster too. It lets go of the ids the store drew once their events
    are below the tail, where a lookup by ``_id`` finds them (``_ids``).

**Event ids.** One concept, five verbs, each used in this sense only:

* *register*: insert an id into the registry under a write attempt's token, before its commit
  (``_ids``); an id another session registered is an `EventIdConflict`, one this session
  committed is a replay;
* *draw*: hand out an id of the store's own format for ``draw_event_id`` (``_drawn``);
* *register ahead*: register the next few drawn ids (a *refill* of the session's pool) or a
  turn's reply ids together with an append, so that their own appends are the commit alone;
* *adopt*: take over the registration an attempt that died left behind, after *fencing* it
  (adding its token to ``fences``, which no commit can pass);
* *let go*: delete the registration of a drawn id once its event is below the tail, where a
  lookup by ``_id`` finds it.

**Order.** Events are ordered by their position ``(seq, minor)`` in their session, never by
time or ObjectId. Appends take ``seq`` values ``2**32`` apart; compaction inserts new events into
the gap before their anchor (fractional ``minor`` keys when a gap is used up), so nothing is ever
renumbered or rewritten.

**Atomicity.** Every write commits through one atomic update of the session document
(``update_one`` when the store knows the tail has room, else ``find_one_and_update``), guarded
by what it depends on: a versioned append or a compaction commits only if the version is still
the expected one, so of concurrent writers with one version exactly one wins. An append
registers its event ids in one ``insert_many``, then commits; an id registered ahead skips the
first step. A compaction replaces the tail it read and records its changes
below the tail as ``pending``. Moving events to the events collection (*roll-forward*) is
idempotent and guarded, so any later writer finishes what a dead one started; readers merge the
tail and ``pending`` with the events collection: no half-done write shows, and no transaction is
needed. Reads and commits of different sessions may share a command (``_batch``).

**Reads.** A read fetches the session document (for a ``last_n`` window, only the newest tail
entries it needs); when its tail answers the read, that is the only command. Below the tail,
reads are aggregations whose first ``$match`` is what the index answers (the session, maybe
``archived: false``, a range of positions); windows walk the log in ranges that grow fourfold.

**Idempotency.** An event id the session already has is a replay: skipped, the version does not
move, whether the event is in the tail or long since rolled forward, and also when the first
attempt committed but its reply was lost. An id registered by an attempt that died is adopted by
the retry after that attempt is fenced off.

**Durability.** The store's collections use a journaled majority write concern
(``w="majority", j=True``) whatever the client's default: an acknowledged write survives a crash.
Writes are shielded from cancellation: a cancelled caller's write runs to its end first.

**Sharding.** Commands on ``session_events`` name a session (the user's, for reads by user),
but for a drawn id's lookup by ``_id``: shard it on ``{session_id: "hashed"}``, the others on
``{_id: "hashed"}``.

The maintainers' page, ``docs/internals/mongodb.md``, says all this at length.
"""

from __future__ import annotations

from ._repository import MongoSessionRepository

__all__ = ["MongoSessionRepository"]
