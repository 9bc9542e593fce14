"""Forget one thing: preview what a description resolves to, then file a forget at a strength.

Used by the CLI (``erasure forget``) and, through the same two calls, by the agent's tools and the console.
``preview`` changes nothing. ``file_forget`` validates the ids, seals what is personal in the forget
request store and starts ``ForgetWorkflow`` with ids, keys and counts only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from stores.books.approvals import Path as ApprovalPath
from stores.books.approvals import actor_ref
from stores.forgetting.requests import ForgetPayload, ForgetRequestRow
from stores.forgetting.resolution import Preview, resolve
from stores.infra.errors import InvalidIdentifier, NotApproved
from stores.infra.in_transaction import Also
from stores.ledgers.forget_tombstones import ForgetRefused
from stores.platform import Platform
from workers.service import RequestRefused, validate_request
from workers.settings import Settings
from workflows.contracts.forget import FORGET_WORKFLOW, ForgetInput, ForgetResult, forget_workflow_id
from workflows.contracts.search_attributes import ERASURE_STAGE, ERASURE_STATUS


def preview(platform: Platform, app_name: str, user_id: str, about: str, limit: int = 10) -> Preview:
    """What ``about`` resolves to among the user's items (the recall path), with warnings; changes nothing."""
    sk = validate_request(platform, app_name, user_id)
    hidden = platform.forgetting.matcher(sk, ("suppress",))
    return resolve(
        platform.pool,
        platform.memory_store,
        platform.config.subject_secret,
        app_name,
        user_id,
        about,
        limit=limit,
        hidden=hidden,
        keys=platform.keys,
    )


@dataclass(frozen=True)
class FiledForget:
    request_id: str
    subject_key: str
    workflow_id: str
    tombstone_id: str
    pending: bool = False  # waits for a second person's approval (not started)


def _item_texts(platform: Platform, subject: str, memory_ids: Sequence[str]) -> list[str]:
    """The chosen items' own words: the verifier's recall probes (sealed with the request)."""
    import uuid

    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, content_sealed FROM memories WHERE subject_key = %s AND id = ANY(%s::uuid[])",
            (subject, [str(uuid.UUID(i)) for i in memory_ids]),
        ).fetchall()
    return [platform.memory_store.decrypt_row(r[0], bytes(r[1])) for r in rows]


async def file_forget(
    client: Client,
    platform: Platform,
    settings: Settings,
    *,
    app_name: str,
    user_id: str,
    strength: str,
    memory_ids: Sequence[str] = (),
    spans: Sequence[str] = (),
    state_keys: Sequence[str] = (),
    session_id: str | None = None,
    about: str | None = None,
    requested_by: str | None = None,
    path: ApprovalPath = "single_person",
) -> FiledForget:
    """File a confirmed forget; ``RequestRefused`` (nothing stored or started) when it cannot be valid.

    ``path`` says who decided: ``single_person`` (the CLI's operator), ``data_subject`` (the user's own
    confirmation through the agent) or ``four_eyes`` (staff in the console): a staff-filed forget that
    deletes waits in ``pending_approval``, unstarted, until someone else approves it (``approve_forget``);
    a suppression deletes nothing and starts at once."""
    sk = validate_request(platform, app_name, user_id)
    if strength != "suppress" and await asyncio.to_thread(platform.requests.active_hold, sk) is not None:
        raise RequestRefused("a legal hold is active on this user: nothing may be deleted (suppress is allowed)")
    try:
        ids = list(memory_ids)
        probes = [about] if about else []
        probes += await asyncio.to_thread(_item_texts, platform, sk, ids)
        payload = ForgetPayload(user_id, list(spans), list(state_keys), session_id, probes)
        row = await asyncio.to_thread(
            platform.forget_requests.create, sk, app_name, strength, ids, payload, requested_by=requested_by
        )
    except (ForgetRefused, InvalidIdentifier, ValueError) as exc:
        raise RequestRefused(str(exc)) from None
    filer = actor_ref(platform.config.subject_secret, requested_by or path)
    if path == "four_eyes" and strength != "suppress":
        await asyncio.to_thread(platform.forget_requests.set_state, row.request_id, "pending_approval")
        return FiledForget(row.request_id, sk, forget_workflow_id(row.request_id), row.tombstone_id, pending=True)
    decided_path: ApprovalPath = "single_person" if path == "four_eyes" else path
    await asyncio.to_thread(
        platform.approvals.record,
        request_id=row.request_id,
        subject_key=sk,
        kind="forget",
        path=decided_path,
        decision="approved",
        requested_by=filer,
        decided_by=filer,
    )
    await _start(client, settings, row)
    return FiledForget(row.request_id, sk, forget_workflow_id(row.request_id), row.tombstone_id)


async def _start(client: Client, settings: Settings, row: ForgetRequestRow) -> None:
    await client.start_workflow(
        FORGET_WORKFLOW,
        ForgetInput(row.request_id, row.subject_key, row.app_name, row.strength, row.memory_ids),
        id=forget_workflow_id(row.request_id),
        task_queue=settings.task_queue,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(ERASURE_STATUS, "received"), SearchAttributePair(ERASURE_STAGE, "received")]
        ),
        static_summary=f"{row.strength} of {len(row.memory_ids)} item(s) of {row.subject_key[:15]}… in {row.app_name}",
    )


async def decide_forget(
    client: Client,
    platform: Platform,
    settings: Settings,
    request_id: str,
    decided_by: str,
    *,
    approve: bool,
    person_of: Callable[[str], str] = str,
    also: Also | None = None,
) -> ForgetRequestRow:
    """A second person's decision on a staff-filed forget waiting for approval: approved, it starts; denied,
    it ends ``denied`` and its sealed payload is dropped. ``NotApproved`` when the rules refuse it (the person
    who filed it, a request not waiting). ``also`` (the decision's audit entry) commits with the decision."""
    store = platform.forget_requests
    row = await asyncio.to_thread(store.get, request_id)
    if row.state != "pending_approval":
        raise NotApproved(f"this forget is {row.state}, not waiting for approval")
    secret = platform.config.subject_secret
    filed_by = await asyncio.to_thread(store.requested_by, request_id)
    filer = actor_ref(secret, await asyncio.to_thread(person_of, filed_by) if filed_by else "four_eyes")
    await asyncio.to_thread(
        platform.approvals.record,
        request_id=request_id,
        subject_key=row.subject_key,
        kind="forget",
        path="four_eyes",
        decision="approved" if approve else "denied",
        requested_by=filer,
        decided_by=actor_ref(secret, decided_by),
        also=also,
    )
    if approve:
        await asyncio.to_thread(store.set_state, request_id, "received")
        await _start(client, settings, row)
    else:
        await asyncio.to_thread(store.set_state, request_id, "denied")
        await asyncio.to_thread(store.close, request_id)
    return await asyncio.to_thread(store.get, request_id)


async def forget_result(client: Client, request_id: str) -> ForgetResult:
    handle = client.get_workflow_handle(forget_workflow_id(request_id), result_type=ForgetResult)
    result: ForgetResult = await handle.result()
    return result
