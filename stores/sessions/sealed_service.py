"""``SealedSessionService``: google-adk's ``DatabaseSessionService`` whose rows hold user content sealed.

Agents use it unchanged (same tables, same schema, same API). What is sealed, its form and what each
ciphertext is bound to are in ``stores.sessions.sealing``: ``events.event_data`` whole, and the *values* of
``sessions.state`` and ``user_states.state`` under the user's data key; ids, app names, user ids, session
ids, timestamps, invocation ids and state keys stay readable, since google-adk queries them (and splits
and merges state by key). ``app_states`` is app-wide, not any user's: it stays plain.

Mechanism: SQLAlchemy ORM events on this service's own ORM session class (``SealingOrmSession``, the
``sync_session_class`` of both its session factories), so a plain ``DatabaseSessionService`` in the same
process is never affected:

- ``before_flush`` seals, in place, the content of every new or changed row (an event's dump, a state
  dict's values) and remembers the plain content; ``after_flush_postexec`` puts the plain content back
  (google-adk reads its ORM objects again after commit, e.g. ``create_session``), as does a rollback.
  In-place, through ``dict``'s own methods, so SQLAlchemy's mutation tracking sees no change: the flush
  writes the sealed form, the objects in memory keep the plain one.
- ``loaded_as_persistent`` (and the mapper's ``refresh``, for reloads) opens what a query read.

The ``DataKeyStore`` is synchronous (Postgres through psycopg, KMS through boto3): its calls run inside
SQLAlchemy's synchronous flush and load, i.e. in the greenlet on the event loop's thread, and block the
loop for their duration. The keys are cached (``key_cache_ttl``) and looked up once per subject per flush,
so that is one short call per flush in steady state.

Reading an erased user's rows fails closed: a ciphertext whose data key was shredded raises
``DataKeyShredded`` out of ``get_session``, ``list_sessions`` and ``get_user_state``; a moved or tampered
one raises ``CiphertextInvalid``. A conversation with silent holes would be worse than an error, and such
rows only exist where something bypassed the erasure (its sessions step deletes the rows before its keys
step shreds the key): a late writer, which the second sweep removes, or a restored backup, which
``erasure replay-tombstones`` cleans before it goes live. Until then an app-wide ``list_sessions`` (no
user id) that meets such a row fails too. Writing a row whose app or user id no subject key can be made
of (``InvalidIdentifier``), or a row of google-adk's legacy schema (``UnknownSchema``), is refused rather
than written in plain text.

An erased session stays erased (issue 28, item 15): ``create_session`` refuses its old id (``SessionErased``,
read from the session tombstones by the keyed digest, in the same database) and ``get_session`` returns
``None`` for it, so no agent is ever served, or writes into, a session that was forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions import DatabaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from google.adk.sessions.schemas import v0, v1
from sqlalchemy import event, inspect, text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.orm import SessionTransaction, UOWTransaction
from sqlalchemy.orm.attributes import get_history
from sqlalchemy.orm.base import PASSIVE_NO_INITIALIZE

from stores.infra.errors import InvalidIdentifier, UnknownSchema
from stores.privacy.identity import is_subject_key, session_digest, subject_key
from stores.privacy.keys import DataKeyStore
from stores.sessions.sealing import RowSealer

_SEALING = "erasure.adk_sealing"  # Session.info: the service's keys
_PENDING = "erasure.adk_plain_pending"  # Session.info: (dict sealed in place, its plain content) per flush
_READER = "erasure.adk_reader"  # Session.info: the RowSealer of the session's loads
_LEGACY = (v0.StorageEvent, v0.StorageSession, v0.StorageUserState)
_SEALED_CLASSES = (v1.StorageEvent, v1.StorageSession, v1.StorageUserState)
#: google-adk's session factories this service replaces (both must exist, or nothing would seal)
_FACTORIES = ("database_session_factory", "_read_only_database_session_factory")


class SessionErased(ValueError):
    """The session id names a session of this user that was erased: it can never be used again."""


@dataclass(frozen=True)
class _Sealing:
    keys: DataKeyStore
    subject_secret: bytes

    def unit(self) -> RowSealer:
        return RowSealer(self.keys, self.subject_secret)


class SealingOrmSession(OrmSession):
    """The synchronous ORM session under ``SealedSessionService``'s async sessions: its events seal and open."""


class SealedSessionService(DatabaseSessionService):
    """google-adk's database session service, with user content sealed under the user's data key."""

    def __init__(self, db_url: str, *, keys: DataKeyStore, subject_secret: bytes, **kwargs: Any) -> None:
        super().__init__(db_url=db_url, **kwargs)
        self._subject_secret = subject_secret
        info = {_SEALING: _Sealing(keys, subject_secret)}
        engines = {
            "database_session_factory": self.db_engine,
            "_read_only_database_session_factory": self.db_engine.execution_options(read_only=True),
        }
        for name in _FACTORIES:
            if not hasattr(self, name):  # google-adk changed: refuse rather than write plain text
                raise UnknownSchema(f"google-adk's session service has no {name}: sealing cannot be installed")
            setattr(
                self,
                name,
                async_sessionmaker(
                    bind=engines[name], expire_on_commit=False, sync_session_class=SealingOrmSession, info=info
                ),
            )

    # ----- the user id: filed under the subject key, the raw id only at this API -----------------------

    def stored_user_id(self, app_name: str, user_id: str) -> str:
        """The ``user_id`` the tables hold for this user: the subject key (``InvalidIdentifier`` for ids no
        erasure could name)."""
        return subject_key(self._subject_secret, app_name, user_id)

    async def session_erased(self, app_name: str, stored: str, session_id: str) -> bool:
        """Whether the user's session of that id was erased (its permanent tombstone, by keyed digest)."""
        digest = session_digest(self._subject_secret, stored, session_id)
        async with self.db_engine.connect() as conn:
            found = await conn.execute(
                text("SELECT 1 FROM session_tombstones WHERE subject_key = :sk AND session_digest = :digest"),
                {"sk": stored, "digest": digest},
            )
            return found.first() is not None

    async def create_session(
        self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None, session_id: str | None = None
    ) -> Session:
        stored = self.stored_user_id(app_name, user_id)
        if session_id is not None and await self.session_erased(app_name, stored, session_id):
            raise SessionErased("this session was erased: its id cannot be used again, start a new session")
        made = await super().create_session(app_name=app_name, user_id=stored, state=state, session_id=session_id)
        return _as_raw(made, user_id)

    async def get_session(
        self, *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> Session | None:
        stored = self.stored_user_id(app_name, user_id)
        got = await super().get_session(app_name=app_name, user_id=stored, session_id=session_id, config=config)
        if got is None or await self.session_erased(app_name, stored, session_id):
            return None  # an erased session is never served again, whatever wrote it back
        return _as_raw(got, user_id)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """A user's sessions (with the raw id), or, without ``user_id``, every user's: those carry the subject
        key as their ``user_id`` (the tables hold no raw id to give back)."""
        stored = None if user_id is None else self.stored_user_id(app_name, user_id)
        listed = await super().list_sessions(app_name=app_name, user_id=stored)
        if user_id is not None:
            for one in listed.sessions:
                _as_raw(one, user_id)
        return listed

    async def delete_session(self, app_name: str, user_id: str, session_id: str) -> None:
        await super().delete_session(
            app_name=app_name, user_id=self.stored_user_id(app_name, user_id), session_id=session_id
        )

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await super().get_user_state(app_name=app_name, user_id=self.stored_user_id(app_name, user_id))

    async def append_event(self, session: Session, event: Event) -> Event:
        """google-adk's append, with the session filed under its subject key for the call's duration (the
        session object is the caller's: it gets the event and its state, and its raw id back)."""
        raw = session.user_id
        session.user_id = self.stored_user_id(session.app_name, raw)
        try:
            return await super().append_event(session, event)
        finally:
            session.user_id = raw

    async def get_filed_session(self, *, app_name: str, stored: str, session_id: str) -> Session | None:
        """A session by the ``user_id`` its rows hold (a subject key, or a raw id google-adk's plain service
        wrote): for the orchestrator's own sweeps, which read ids from the tables. Its ``user_id`` is ``stored``."""
        return await super().get_session(app_name=app_name, user_id=stored, session_id=session_id)

    async def delete_filed_session(self, *, app_name: str, stored: str, session_id: str) -> None:
        await super().delete_session(app_name=app_name, user_id=stored, session_id=session_id)


def _as_raw(session: Session, user_id: str) -> Session:
    session.user_id = user_id
    return session


# ----- writing: seal before the flush, put the plain content back after it --------------------------


def _replace(target: dict[str, Any], content: dict[str, Any]) -> None:
    """Replace a dict's content without SQLAlchemy's mutation tracking noticing (``dict``'s own methods)."""
    dict.clear(target)
    dict.update(target, content)


def _changed(obj: object, attr: str) -> bool:
    return get_history(obj, attr, passive=PASSIVE_NO_INITIALIZE).has_changes()


def _sealed_content(rows: RowSealer, obj: object) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the dict to seal in place, its sealed content), or ``None`` when the row writes no user content."""
    values = inspect(obj).dict
    if isinstance(obj, v1.StorageEvent):
        data = values.get("event_data")
        if not isinstance(data, dict) or not _changed(obj, "event_data"):
            return None
        return data, rows.seal_event(obj.app_name, obj.user_id, obj.session_id, obj.id, data)
    if isinstance(obj, v1.StorageSession | v1.StorageUserState):
        state = values.get("state")
        if not isinstance(state, dict) or not _changed(obj, "state"):
            return None
        session_id = obj.id if isinstance(obj, v1.StorageSession) else None
        return state, rows.seal_state(obj.app_name, obj.user_id, session_id, state)
    return None


@event.listens_for(SealingOrmSession, "before_flush")
def _seal_before_flush(session: OrmSession, _flush: UOWTransaction, _instances: object) -> None:
    rows = session.info[_SEALING].unit()
    pending: list[tuple[dict[str, Any], dict[str, Any]]] = session.info.setdefault(_PENDING, [])
    for obj in [*session.new, *session.dirty]:
        if isinstance(obj, _LEGACY):
            raise UnknownSchema("google-adk's legacy session schema cannot be sealed: migrate it first")
        if isinstance(obj, _SEALED_CLASSES) and not is_subject_key(str(obj.user_id)):
            raise InvalidIdentifier("a session row must be filed under the subject key, never a raw user id")
        found = _sealed_content(rows, obj)
        if found is not None:
            target, sealed = found
            pending.append((target, dict(target)))
            _replace(target, sealed)


def _restore_plain(session: OrmSession, *_args: object) -> None:
    pending: list[tuple[dict[str, Any], dict[str, Any]]] = session.info.pop(_PENDING, [])
    for target, plain in pending:
        _replace(target, plain)


event.listen(SealingOrmSession, "after_flush_postexec", _restore_plain)
event.listen(SealingOrmSession, "after_soft_rollback", _restore_plain)


@event.listens_for(SealingOrmSession, "after_transaction_end")
def _forget_keys(session: OrmSession, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_READER, None)


# ----- reading: open what a query loaded --------------------------------------------------------------


def _reader(session: OrmSession) -> RowSealer:
    rows: RowSealer | None = session.info.get(_READER)
    if rows is None:
        rows = session.info[_READER] = session.info[_SEALING].unit()
    return rows


def _open_loaded(rows: RowSealer, obj: object, attrs: set[str] | None = None) -> None:
    values = inspect(obj).dict
    if isinstance(obj, v1.StorageEvent) and (attrs is None or "event_data" in attrs):
        data = values.get("event_data")
        if isinstance(data, dict):
            _replace(data, rows.open_event(obj.app_name, obj.user_id, obj.session_id, obj.id, data))
    elif isinstance(obj, v1.StorageSession | v1.StorageUserState) and (attrs is None or "state" in attrs):
        state = values.get("state")
        if isinstance(state, dict):
            session_id = obj.id if isinstance(obj, v1.StorageSession) else None
            _replace(state, rows.open_state(obj.app_name, obj.user_id, session_id, state))


@event.listens_for(SealingOrmSession, "loaded_as_persistent")
def _open_on_load(session: OrmSession, instance: object) -> None:
    _open_loaded(_reader(session), instance)


def _open_on_refresh(target: object, context: Any, attrs: Any) -> None:
    session = getattr(context, "session", None)
    if isinstance(session, SealingOrmSession):  # a plain DatabaseSessionService's rows: nothing to do
        _open_loaded(_reader(session), target, set(attrs) if attrs is not None else None)


for _cls in _SEALED_CLASSES:
    event.listen(_cls, "refresh", _open_on_refresh)
