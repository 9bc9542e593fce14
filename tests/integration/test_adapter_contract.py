"""The contract every registered erase adapter satisfies, checked the same way for each on the real stack.

The adapters are the entry points of ``erasure.adapters`` (``stores.adapters.registry.discovered()``), read when
the tests are collected, so a new store's adapter is checked here with no edit; the physical clean-up adapters
(``PhysicalCleanup``: vacuum, compaction) are left out (the physical job covers them: ``test_physical_job.py``,
``test_physical_evidence.py``), and an adapter the test platform has not configured
(``platform.adapters.not_configured``: ``qdrant_memory`` unless ``ERASURE_QDRANT_PATH`` is set) runs on a
platform of its own configured with its options (``STORE_OPTIONS``), or is skipped with its factory's reason.
Each test seeds two users ("small", no cross-user summaries) in an app of its own and drives the adapter as the
saga does, without a saga: the request filed (``open_request``), ``begin_request``'s captures recorded (the real
activity: found at start, canaries, ciphertext sample, ``StartCapture``), the steps the adapter runs after in the
plan (``after``, transitively) erased first, then the adapter itself; its check is judged by the verifier's own
rule (``verifier.checks.judged``).

The contract (one test each, parametrised by adapter name):

1. ``erase`` removes exactly the user's data: ``locate`` finds the target's data before (the seeder fills every
   store; ``HOLDS_NOTHING_SEEDED`` would list one it cannot), the erase reports what it removed, then
   ``remaining`` passes with nothing counted and nothing missing and ``locate`` finds nothing; the other user's
   fingerprint in every store is byte-identical; nothing the adapter returns or heartbeats holds the raw id.
2. ``remaining`` fails while data is left: before the erase (counts or ``missing``), and after it, with the
   step's record complete, once the user's data is written again (counts, nothing missing).
3. ``erase`` is idempotent: a retry from the last heartbeat succeeds, so does a run of the same request
   with no cursor, a second request's erase finds nothing to remove (all counts zero), the check still
   passes and the other user is unchanged.
4. ``sweep_before`` after the erase finds nothing (scheduled sweeps' ``before=now``, the second sweep's
   ``None``) and leaves the other user unchanged; a late write of the user is found by the second sweep,
   only it, and the check passes again.
5. forget: an ``ItemForgetting`` adapter forgets one seeded item of the target (a ``ForgetScope`` over one item
   its own ``items_left`` reads) and only it: ``items_left`` goes from >= 1 to 0, the target's other items stay,
   a second forget finds nothing, the other user is unchanged. A store that acts only on a session erasure
   (its ``items_check`` names no check for an item forget: the sessions, artifacts and logs) is left as it was
   by an item forget, and a session erasure of one of the target's sessions removes that session's data there
   and only it (the target's other session stays, so does the other user's data under the same session id);
   a store that names no check for either (the data keys) changes for neither. The forget's first step (the
   memory store, ``activities.forget.FIRST_STEP``: it places the tombstone the others are asked by) is
   skipped here, tested in ``test_item_forget.py`` and ``test_forget_every_store.py``. An adapter without the
   capability must make a forget of a subject it holds data of fail closed (``PlanIncomplete``).
6. fail closed on missing input: with a bare ``RequestRecord`` (no step record, no capture), with and without a
   bound, with the raw id and in subject-key mode, the check never passes while the store holds the user's
   data: it reports ``missing`` (``NO_RECORDED_INPUT`` lists the adapters whose check reads nothing recorded,
   which then report counts).

``test_the_contract_catches_a_planted_defect`` runs the contract functions against defects planted in a real
adapter (the response cache: an eraser that does nothing, one that reaches another user, a check that sees
nothing, an erase that fails on a retry) and asserts each contract it breaks fails, so the suite is shown to
catch a defect in CI.

What this replaces / what stays where it is (the per-store tests, read for this mapping; none is edited here):

- ``test_stores.py``: ``test_each_adapter_erases_exactly_one_user_and_is_idempotent`` is contracts 1 and 3 for
  every store at once; what only it checks: four users, erase counts equal to the fingerprint counts, and the
  memory store's cross-user summaries (rows filed under other users derived from the target's, removed and
  listed, every other row byte-identical): it could be slimmed to that memory part. The rest stays (ADK and
  artifact round trips, adversarial identifiers, shredding, the fence, concurrent log purges, the presence
  probe).
- ``test_planted.py``: five whole sagas, one planted under-deletion per built-in store. Contract 2 (the
  check fails on data left with the step's record complete) and the meta-test cover "each store's check can
  fail" for every store at the adapter level; what only the sagas show is the end-to-end path
  (``verification_failed``, the search attribute, the receipt naming exactly the failed check) and five
  particular defect shapes (old object versions, the ``user_states`` row, derived summaries, one log
  segment, the wrapped key). Slim to one saga for the end-to-end path and move the shapes to adapter-level
  plants (seconds each instead of a saga each).
- ``test_store_gaps.py``: stays. Each test plants a gap the generic contract does not write (legacy log
  segments without mention keys, incomplete multipart uploads, a cache index dropped before its entries,
  a purge cut mid-way).
- ``test_response_cache.py``: the erase / sweep / check halves of the saga test are contracts 1 and 4;
  what stays: the fence dropping the platform's cache writes during the erasure, the eraser that drops the
  index but leaves the entries (read back by key: ``erased_entries_back``, which the contract's late write
  does not exercise) and the resume between batches.
- ``test_chroma_memory.py``: the "fails closed without the step's record" half of
  ``test_the_check_fails_closed_without_the_step_record_or_the_backend_root`` is contract 6 (slim to the
  backend-root half), and the final idempotency assertion of the resume test is contract 3. What stays:
  raw-file scans (vectors and sealed documents on disk), Chroma's own ``delete_collection`` leaving files,
  the resume, the dated sweep that keeps later items, a fresh backend, the heap scrub.
- ``test_qdrant_store.py``: ``test_the_adapter_erases_one_user_and_leaves_the_other_byte_identical`` is
  contracts 1, 2, 4 and 6 (the suite configures Qdrant on a platform of its own: ``STORE_OPTIONS``), so it
  could go; ``test_the_store_is_left_out_unless_configured`` and the saga test stay.
- ``test_forget_every_store.py``: contract 5 covers ``forget_items`` / ``items_left`` of Chroma and the cache
  at the adapter level (one item, only it, others untouched, the read can see an item); the forget
  workflow's receipt per store, session erasure's detach semantics, the refusal of a plug-in without the
  capability (contract 5 exercises it only for a configured store that lacks it) stay there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pkgutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.forget import FIRST_STEP, ForgetActivities
from activities.request import RequestActivities
from stores.adapters.interface import (
    AdapterNotConfigured,
    Beat,
    Bound,
    EraseAdapter,
    ForgetScope,
    ItemForgetting,
    ItemsCheck,
    PhysicalCleanup,
    Remaining,
    ScopedItemForgetting,
    Subject,
    Swept,
)
from stores.adapters.registry import discovered
from stores.books.request_record import RequestRecord
from stores.forgetting.requests import ForgetPayload
from stores.logs.archive import LogLine
from stores.platform import Platform
from stores.privacy.identity import session_ref, subject_key
from tests.adapter_wrap import open_request, registry_with
from verifier.checks import judged
from workers.settings import Settings
from workers.stack.seeding.seeder import seed_platform
from workers.wiring import build_platform
from workflows.contracts import error_types
from workflows.contracts.erasure import StepInput
from workflows.contracts.forget import ForgetStep

pytestmark = pytest.mark.integration

#: stores the seeder writes nothing of a seeded user into (give the adapter a ``seed`` hook, ``Seeded``,
#: rather than listing it here): name -> why
HOLDS_NOTHING_SEEDED: dict[str, str] = {}
#: adapters whose check reads no recorded input, so a bare record is still a full check (it reports counts)
NO_RECORDED_INPUT: dict[str, str] = {
    "artifacts": "the check lists every version, delete marker and upload under the subject key's prefix",
}


def contract_adapters() -> list[str]:
    """Every registered adapter but the physical clean-up ones (a factory that is not a class is checked again
    when its test runs)."""
    names = []
    for name, target in sorted(discovered().items()):
        factory = pkgutil.resolve_name(target)
        if isinstance(factory, type) and issubclass(factory, PhysicalCleanup):
            continue
        names.append(name)
    return names


ADAPTERS = contract_adapters()


#: what a store needs configured before it exists on a platform, for the stores the test stack leaves out:
#: the suite builds a platform of its own for each (the shared stack, the store's own options), so their
#: contract runs in ``make test`` too
STORE_OPTIONS: dict[str, Callable[[Path], dict[str, str | None]]] = {
    "qdrant_memory": lambda root: {"qdrant_path": str(root / "qdrant")},
}

Store = tuple[Platform, EraseAdapter]


@pytest.fixture(scope="module")
def optional_platforms(
    local_stack: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Platform]]:
    """A platform per ``STORE_OPTIONS`` store, configured with its options, over the same stack."""
    built: dict[str, Platform] = {}
    try:
        for name, options in STORE_OPTIONS.items():
            root = tmp_path_factory.mktemp(name)
            built[name] = build_platform(local_stack, key_cache_ttl=0.0, store_options=options(root))
        yield built
    finally:
        for each in built.values():
            each.close()


@pytest.fixture(params=ADAPTERS)
def store(request: pytest.FixtureRequest, platform: Platform, optional_platforms: dict[str, Platform]) -> Store:
    """The adapter of that name and the platform it is on (the test platform, or one of its own configured
    with ``STORE_OPTIONS``); skipped, with the factory's reason, where neither configures it."""
    name: str = request.param
    home = optional_platforms.get(name, platform) if name in platform.adapters.not_configured else platform
    if name in home.adapters.not_configured:
        try:
            pkgutil.resolve_name(discovered()[name])(home.store_context)
            why = "its factory refused this platform"
        except AdapterNotConfigured as exc:
            why = str(exc)
        pytest.skip(f"{name} is not configured on the test platform: {why}")
    found = home.adapters.get(name)
    if isinstance(found, PhysicalCleanup):
        pytest.skip(f"{name} is a physical clean-up adapter: the physical job's tests cover it")
    return home, found


# ----- driving an adapter as the saga does ---------------------------------------------------------------


@dataclass
class Case:
    """One contract run: the adapter (or a planted stand-in), an app of its own, a target and another user."""

    platform: Platform
    adapter: EraseAdapter
    app: str
    target: str
    other: str

    @property
    def name(self) -> str:
        return self.adapter.name

    def key(self, user: str) -> str:
        return subject_key(self.platform.config.subject_secret, self.app, user)

    def other_subject(self) -> Subject:
        return Subject("", self.key(self.other), self.app, self.other)


def case_for(platform: Platform, adapter: EraseAdapter, contract: str) -> Case:
    run = uuid.uuid4().hex[:8]
    return Case(
        platform, adapter, f"contract-{contract}-{run}", f"target-{run}@example.org", f"other-{run}@example.org"
    )


def seed(case: Case, users: list[str], number: int) -> None:
    """The seeder's "small" users (every store, through the platform's services and the stores' seed hooks);
    no cross-user summaries, so nothing of one user is derived from the other's."""
    asyncio.run(seed_platform(case.platform, case.app, users, "small", number, summaries=False))


def seeded(case: Case) -> dict[str, Any]:
    """Both users seeded; the other user's fingerprint in every store (see ``others_view``)."""
    seed(case, [case.target, case.other], 1)
    if case.name not in HOLDS_NOTHING_SEEDED:
        held = case.adapter.locate(case.other_subject())
        assert any(held.values()), f"{case.name}: the other user holds nothing there, so 'unchanged' cannot fail"
    return others_view(case)


def others_view(case: Case) -> dict[str, Any]:
    """The other user's fingerprint in every registered store, the adapter under test standing in for its own."""
    view = {}
    for registered in case.platform.adapters.in_order():
        adapter = case.adapter if registered.name == case.name else registered
        view[adapter.name] = adapter.fingerprint(case.app, case.other)
    return view


def begin(case: Case) -> Subject:
    """The request filed, and ``begin_request`` run (the activity itself): what it records before any step."""
    subject = open_request(case.platform, case.app, case.target)
    step = StepInput(subject.request_id, subject.subject_key, case.app)
    ActivityEnvironment().run(RequestActivities(case.platform).begin_request, step)
    return subject


def erase_prerequisites(case: Case, subject: Subject) -> None:
    """The steps the plan runs before this adapter's (its ``after``, transitively), in plan order."""
    plan = {p.name: p for p in case.platform.adapters.plan}
    wanted: set[str] = set()
    todo = list(plan[case.name].after) if case.name in plan else []
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(plan[name].after)
    for adapter in case.platform.adapters.in_order(sorted(wanted)):
        adapter.erase(subject, {}, _ignore)


def _ignore(_details: dict[str, Any]) -> None:
    pass


def record_of(case: Case, subject: Subject) -> RequestRecord:
    return case.platform.requests.record(subject.request_id)


def check(case: Case, subject: Subject, bound: Bound | None = None, record: RequestRecord | None = None) -> Remaining:
    """The adapter's check, as the verifier runs it: the request's record read afresh."""
    return case.adapter.remaining(subject, record if record is not None else record_of(case, subject), bound, _ignore)


def passes(case: Case, found: Remaining) -> bool:
    return judged(case.name, found).passed


def clean(case: Case, found: Remaining) -> bool:
    """The check passes with nothing counted and nothing missing."""
    return passes(case, found) and nothing_of(found.counts) and not found.missing


def erased(case: Case) -> tuple[Subject, dict[str, int], list[dict[str, Any]]]:
    """Begin, the prerequisite steps, then the adapter's erase: (subject, its counts, its heartbeats)."""
    subject = begin(case)
    erase_prerequisites(case, subject)
    beats: list[dict[str, Any]] = []
    counts = case.adapter.erase(subject, {}, beats.append)
    return subject, counts, beats


def nothing_of(counts: Mapping[str, int]) -> bool:
    return not any(counts.values())


def pii_free(case: Case, *outputs: object) -> None:
    """Nothing an adapter returns or heartbeats holds the raw user id (the interface's promise)."""
    plain = [dataclasses.asdict(o) if isinstance(o, (Remaining, Swept)) else o for o in outputs]
    assert case.target not in json.dumps(plain, default=str), f"{case.name}: the raw user id in its output"


# ----- the contract, as functions (run on every adapter below, and on planted defects at the end) -------------


def erase_removes_exactly_the_users_data(case: Case) -> None:
    others_before = seeded(case)
    subject = begin(case)
    found = case.adapter.locate(subject)
    if case.name in HOLDS_NOTHING_SEEDED:
        assert nothing_of(found), f"{case.name} is listed as holding nothing seeded, yet locate found {found}"
    else:
        assert not nothing_of(found), f"{case.name}: locate finds nothing of a seeded user (seed hook missing?)"
    erase_prerequisites(case, subject)
    beats: list[dict[str, Any]] = []
    counts = case.adapter.erase(subject, {}, beats.append)
    assert all(isinstance(n, int) and n >= 0 for n in counts.values()), counts
    if not nothing_of(found):
        assert not nothing_of(counts), f"{case.name}: the erase reports removing nothing of {found}"
    left = check(case, subject)
    assert clean(case, left), f"{case.name}: left after erase: counts {left.counts}, missing {left.missing}"
    assert nothing_of(case.adapter.locate(subject)), f"{case.name}: locate still finds the user after erase"
    assert others_view(case) == others_before, f"{case.name}: the other user changed"
    pii_free(case, counts, beats, left)


def remaining_fails_while_data_is_left(case: Case) -> None:
    seeded(case)
    subject = begin(case)
    erase_prerequisites(case, subject)
    before_erase = check(case, subject)
    assert not passes(case, before_erase), f"{case.name}: check passed with data left (before the erase)"
    case.adapter.erase(subject, {}, _ignore)
    assert passes(case, check(case, subject)), f"{case.name}: the check fails right after the erase"
    seed(case, [case.target], 2)  # the user's data again, the step's record complete
    assert not nothing_of(case.adapter.locate(subject)), f"{case.name}: the late write left nothing to find"
    left = check(case, subject)
    assert not left.missing, f"{case.name}: the check misses input with the step's record complete"
    assert not nothing_of(left.counts), f"{case.name}: check passed with data left (written again)"


def erase_is_idempotent(case: Case) -> None:
    others_before = seeded(case)
    subject, _first, beats = erased(case)
    retried = case.adapter.erase(subject, beats[-1] if beats else {}, _ignore)  # a retry from the last heartbeat
    assert all(isinstance(n, int) and n >= 0 for n in retried.values()), retried
    # a run of the same request with no cursor (a retry whose first heartbeat never reached the server): it
    # succeeds and changes nothing (its counts are the step's; the logs step's are the request's tally)
    case.adapter.erase(subject, {}, _ignore)
    assert others_view(case) == others_before, f"{case.name}: the other user changed"
    case.platform.requests.set_state(subject.request_id, "completed")
    second = begin(case)  # a second erasure of the same user finds nothing to remove
    assert second.request_id != subject.request_id
    again = case.adapter.erase(second, {}, _ignore)
    assert nothing_of(again), f"{case.name}: a second erase removed something: {again}"
    left = check(case, subject)
    assert clean(case, left), f"{case.name}: the check fails after a second erase: {left}"
    assert others_view(case) == others_before, f"{case.name}: the other user changed"


def sweep_finds_nothing_after_erase_and_spares_others(case: Case) -> None:
    others_before = seeded(case)
    subject, _counts, _beats = erased(case)
    for before in (datetime.now(UTC), None):  # the scheduled sweeps' bound, then the second sweep's
        swept = case.adapter.sweep_before(subject, before, None)
        assert nothing_of(swept.found), f"{case.name}: sweep found {swept.found} after the erase (before={before})"
    assert others_view(case) == others_before, f"{case.name}: the other user changed"
    seed(case, [case.target], 3)  # a late writer past the step
    late = case.adapter.sweep_before(subject, None, None)
    assert not nothing_of(late.found), f"{case.name}: the late write not swept"
    left = check(case, subject)
    assert clean(case, left), f"{case.name}: left after the sweep: {left}"
    assert others_view(case) == others_before, f"{case.name}: the other user changed"
    pii_free(case, late)


def items_seen(adapter: ItemForgetting, case: Case) -> list[tuple[str | None, str]]:
    """What the adapter's own ``items_left`` reads of the target, through a scope that covers nothing and
    notes every (item id, text) it is asked about."""
    seen: list[tuple[str | None, str]] = []

    def note(item_id: str | None, text: str) -> bool:
        seen.append((item_id, text))
        return False

    adapter.items_left(ForgetScope("probe", case.key(case.target), case.app, "forget", covers=note))
    return sorted(seen, key=lambda s: (s[0] or "", s[1]))


def one_item(case: Case, item_id: str | None, text: str) -> ForgetScope:
    """A forget of one item: by its id where the store has ids, else by its exact text (the tombstone's span)."""
    if item_id is not None:
        return ForgetScope(
            f"forget-{uuid.uuid4().hex[:8]}",
            case.key(case.target),
            case.app,
            "forget",
            memory_ids=frozenset({item_id}),
            covers=lambda i, _t: i == item_id,
        )
    return ForgetScope(
        f"forget-{uuid.uuid4().hex[:8]}", case.key(case.target), case.app, "forget", covers=lambda _i, t: t == text
    )


def items_check(adapter: EraseAdapter, scope: ForgetScope) -> ItemsCheck | None:
    """The check the forget verification shows for ``scope`` (what ``activities.forget`` asks the adapter)."""
    if isinstance(adapter, ScopedItemForgetting):
        return adapter.items_check(scope)
    return ItemsCheck(adapter.name)


def forget_reaches_one_item_and_only_it(case: Case) -> None:
    adapter = case.adapter
    if case.name == FIRST_STEP:
        pytest.skip(
            f"{case.name}: the forget's first step, run by the forget activity itself (it places the tombstone)"
        )
    if not isinstance(adapter, ItemForgetting):
        forget_is_refused(case)
        return
    if items_check(adapter, ForgetScope("probe", case.key(case.target), case.app, "forget")) is None:
        forget_reaches_one_session_and_only_it(case)
        return
    others_before = seeded(case)
    items = items_seen(adapter, case)
    assert len(items) >= 2, f"{case.name}: the seeded target needs two items here, found {len(items)}"
    texts = [t for _i, t in items]
    # one item: by its id, or (a store without ids) by a text no other item has (two replies can be alike)
    chosen = next(s for s in items if s[0] is not None or texts.count(s[1]) == 1)
    scope = one_item(case, *chosen)
    assert adapter.items_left(scope) >= 1, f"{case.name}: items_left cannot see the item the scope covers"
    counts = adapter.forget_items(scope, _ignore)
    assert not nothing_of(counts), f"{case.name}: forget_items reports forgetting nothing"
    assert adapter.items_left(scope) == 0, f"{case.name}: items left after forget"
    after = items_seen(adapter, case)
    assert chosen not in after, f"{case.name}: the forgotten item is still read"
    assert after, f"{case.name}: the forget took every item of the target, not one"
    assert nothing_of(adapter.forget_items(scope, _ignore)), f"{case.name}: a second forget removed something"
    assert others_view(case) == others_before, f"{case.name}: the other user changed"
    pii_free(case, counts)


def session_scope(case: Case, session_id: str) -> ForgetScope:
    """A session erasure of one of the target's sessions (as ``activities.forget`` builds it)."""
    sk = case.key(case.target)
    return ForgetScope(
        f"erase-{uuid.uuid4().hex[:8]}",
        sk,
        case.app,
        "erase_session",
        session_ref=session_ref(sk, session_id),
        covers=lambda _i, _t: False,
        session_id=session_id,
        user_id=case.target,
    )


def ship_session_lines(case: Case, sessions: list[str], others: list[str]) -> None:
    """Log lines written in the target's sessions and in the other user's (the agent's lines carry their
    session; the seeder's carry none), one of the other's under the target's first session id (ADK session ids
    are unique per user only): into a segment of a window of this case's own."""
    run = int(case.app.rsplit("-", 1)[-1], 16)  # the case's own run (``case_for``)
    window = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=5 * (run % 100_000))
    ts = window.isoformat()
    lines = [LogLine(ts, case.app, case.target, "info", f"turn {n} done", session_id=s) for n, s in enumerate(sessions)]
    lines += [LogLine(ts, case.app, case.other, "info", "turn done", session_id=s) for s in [sessions[0], *others]]
    case.platform.logs.ship(lines, window, shard=run % 97)


def forget_reaches_one_session_and_only_it(case: Case) -> None:
    """A store that acts only on a session erasure: an item forget leaves it as it was; a session erasure
    removes that session's data there and only it (or, where the store names no check for a session erasure
    either, the data keys, nothing at all)."""
    adapter = case.adapter
    assert isinstance(adapter, ItemForgetting)
    seed(case, [case.target, case.other], 1)
    sessions = case.platform.sessions.session_ids(case.app, case.target)
    assert len(sessions) >= 2, f"the seeded target needs two sessions here, found {len(sessions)}"
    ship_session_lines(case, sessions, case.platform.sessions.session_ids(case.app, case.other))
    others_before = others_view(case)
    target_before = adapter.fingerprint(case.app, case.target)
    sk = case.key(case.target)
    everything = ForgetScope(f"forget-{uuid.uuid4().hex[:8]}", sk, case.app, "forget", covers=_all, user_id=case.target)
    assert nothing_of(adapter.forget_items(everything, _ignore)), f"{case.name}: an item forget removed something"
    assert adapter.fingerprint(case.app, case.target) == target_before, f"{case.name}: an item forget changed it"
    erased, kept = session_scope(case, sessions[0]), session_scope(case, sessions[1])
    if items_check(adapter, erased) is None:
        assert nothing_of(adapter.forget_items(erased, _ignore)), f"{case.name}: names no check, yet removed"
        assert adapter.fingerprint(case.app, case.target) == target_before, f"{case.name}: a session erase changed it"
        assert others_view(case) == others_before, f"{case.name}: the other user changed"
        return
    assert adapter.items_left(erased) >= 1, f"{case.name}: items_left cannot see the session's data"
    assert adapter.items_left(kept) >= 1, f"{case.name}: items_left cannot see the other session's data"
    counts = adapter.forget_items(erased, _ignore)
    assert not nothing_of(counts), f"{case.name}: forget_items reports erasing nothing of the session"
    assert adapter.items_left(erased) == 0, f"{case.name}: the session's data left after forget"
    assert adapter.items_left(kept) >= 1, f"{case.name}: the session erase took another session's data"
    assert nothing_of(adapter.forget_items(erased, _ignore)), f"{case.name}: a second forget removed something"
    assert others_view(case) == others_before, f"{case.name}: the other user changed"
    pii_free(case, counts)


def forget_is_refused(case: Case) -> None:
    """A store that holds the subject's data and cannot forget items makes the forget fail closed, before
    anything changes."""
    seeded(case)
    sk = case.key(case.target)
    assert not nothing_of(case.adapter.locate(Subject("", sk, case.app, case.target)))
    rows = case.platform.memory_store.rows_of(case.app, case.target)
    assert rows, "the seeded target has a memory item to forget"
    forget = case.platform.forget_requests.create(sk, case.app, "forget", [str(rows[0][0])], ForgetPayload(case.target))
    acts = ForgetActivities(case.platform, b"s" * 32, registry_with(case.platform, case.adapter))
    with pytest.raises(ApplicationError) as refused:
        ActivityEnvironment().run(acts.forget_apply, ForgetStep(forget.request_id, sk, case.app, "forget"))
    assert refused.value.type == error_types.PLAN_INCOMPLETE
    assert case.name in str(refused.value)
    assert case.platform.memory_store.rows_of(case.app, case.target) == rows


def fails_closed_on_missing_input(case: Case) -> None:
    seed(case, [case.target], 1)
    assert not nothing_of(case.adapter.locate(Subject("", case.key(case.target), case.app, case.target)))
    subject = open_request(case.platform, case.app, case.target)  # filed; nothing begun, no step ran
    key_mode = Subject(subject.request_id, subject.subject_key, case.app, None)  # a re-verification's subject
    bound = Bound(erased_at=datetime.now(UTC) + timedelta(minutes=1))  # an erasure after every seeded write
    for who in (subject, key_mode):
        for limit in (None, bound):
            found = check(case, who, limit, RequestRecord())
            mode = f"{case.name} (raw id {'known' if who.user_id else 'forgotten'}, bound {limit is not None})"
            assert not passes(case, found), f"{mode}: passed with missing input"
            if case.name in NO_RECORDED_INPUT:
                assert not found.missing, f"{mode}: listed as reading nothing recorded, yet missing {found.missing}"
                assert not nothing_of(found.counts), f"{mode}: passed with missing input: {found}"
            else:
                assert found.missing, f"{mode}: no missing input reported: {found}"


# ----- the contract on every registered adapter ----------------------------------------------------------


def test_erase_removes_exactly_the_users_data(store: Store) -> None:
    erase_removes_exactly_the_users_data(case_for(*store, "exact"))


def test_remaining_fails_while_data_is_left(store: Store) -> None:
    remaining_fails_while_data_is_left(case_for(*store, "left"))


def test_erase_is_idempotent(store: Store) -> None:
    erase_is_idempotent(case_for(*store, "again"))


def test_sweep_finds_nothing_after_erase_and_spares_others(store: Store) -> None:
    sweep_finds_nothing_after_erase_and_spares_others(case_for(*store, "sweep"))


def test_forget_reaches_one_item_and_only_it(store: Store) -> None:
    forget_reaches_one_item_and_only_it(case_for(*store, "forget"))


def test_fails_closed_on_missing_input(store: Store) -> None:
    fails_closed_on_missing_input(case_for(*store, "closed"))


# ----- the contract catches a defect: planted in a real adapter -----------------------------------------------


class Planted(Exception):
    """Raised by a planted defect (an erase that fails when retried)."""


class Plant:
    """A real adapter with one defect planted; everything not overridden is the real adapter's."""

    def __init__(self, inner: EraseAdapter, case: Case) -> None:
        self.inner, self.case = inner, case
        self.name, self.after, self.batched = inner.name, inner.after, inner.batched

    def __getattr__(self, attr: str) -> Any:  # the optional capabilities (capture, forget_items, ...)
        return getattr(self.inner, attr)

    def locate(self, subject: Subject) -> dict[str, int]:
        return self.inner.locate(subject)

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        return self.inner.erase(subject, cursor, beat)

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        return self.inner.remaining(subject, record, bound, beat)

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        return self.inner.sweep_before(subject, before, keys_shredded_at)

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        return self.inner.fingerprint(app_name, user_id)


class DoesNothing(Plant):
    """Erase, sweep and forget do nothing and record nothing (the erase reports what it found); the reads
    are real."""

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        return self.inner.locate(subject)

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        return Swept()

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        return {}


class SeesNothing(Plant):
    """A check that cannot fail: nothing counted, nothing missing, nothing left to forget."""

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        return Remaining()

    def items_left(self, scope: ForgetScope) -> int:
        return 0


class ReachesOthers(Plant):
    """Base of the plants that reach the case's other user as well."""

    def victim(self, subject: Subject) -> Subject:
        return Subject(subject.request_id, self.case.key(self.case.other), self.case.app, self.case.other)


class ErasesOthers(ReachesOthers):
    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        self.inner.erase(self.victim(subject), {}, _ignore)
        return self.inner.erase(subject, cursor, beat)


class SweepsOthers(ReachesOthers):
    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        self.inner.sweep_before(self.victim(subject), None, None)
        return self.inner.sweep_before(subject, before, keys_shredded_at)


class ForgetsOthers(ReachesOthers):
    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        inner = self.inner
        assert isinstance(inner, ItemForgetting)
        victim = self.victim(Subject(scope.request_id, scope.subject_key, scope.app_name))
        inner.forget_items(
            ForgetScope(scope.request_id, victim.subject_key, victim.app_name, "forget", covers=_all), beat
        )
        return inner.forget_items(scope, beat)


def _all(_item_id: str | None, _text: str) -> bool:
    return True


class TakesEverySession(Plant):
    """A session erasure that erases the subject's other sessions there too."""

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        inner, case = self.inner, self.case
        assert isinstance(inner, ItemForgetting)
        for sid in case.platform.sessions.session_ids(case.app, case.target):
            if sid != scope.session_id:
                other = dataclasses.replace(scope, session_id=sid, session_ref=session_ref(scope.subject_key, sid))
                inner.forget_items(other, beat)
        return inner.forget_items(scope, beat)


class FailsOnRetry(Plant):
    """The first erase is real; any later one fails (an erase that is not idempotent)."""

    ran = False

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        if self.ran:
            raise Planted("the second erase of the request failed")
        self.ran = True
        return self.inner.erase(subject, cursor, beat)


CONTRACTS: dict[str, Callable[[Case], None]] = {
    "exact": erase_removes_exactly_the_users_data,
    "left": remaining_fails_while_data_is_left,
    "again": erase_is_idempotent,
    "sweep": sweep_finds_nothing_after_erase_and_spares_others,
    "forget": forget_reaches_one_item_and_only_it,
    "closed": fails_closed_on_missing_input,
}
#: (contract, plant, the failure it must report)
DEFECTS = [
    ("exact", DoesNothing, "left after erase"),
    ("exact", ErasesOthers, "the other user changed"),
    ("left", SeesNothing, "check passed with data left"),
    ("again", FailsOnRetry, "the second erase of the request failed"),
    ("sweep", DoesNothing, "the late write not swept"),
    ("sweep", SweepsOthers, "the other user changed"),
    ("forget", DoesNothing, "forget_items reports forgetting nothing"),
    ("forget", ForgetsOthers, "the other user changed"),
    ("closed", SeesNothing, "passed with missing input"),
]
PLANTED_IN = "response_cache"  # a real store with a recorded step input and item forgetting
#: (plant, the failure it must report) in a store that forgets on a session erasure only (contract 5's other half)
SESSION_DEFECTS = [
    (DoesNothing, "forget_items reports erasing nothing of the session"),
    (SeesNothing, "items_left cannot see the session's data"),
    (TakesEverySession, "the session erase took another session's data"),
]
PLANTED_IN_SESSIONS = "artifacts"


@pytest.mark.parametrize(("contract", "plant", "failure"), DEFECTS, ids=[f"{c}-{p.__name__}" for c, p, _f in DEFECTS])
def test_the_contract_catches_a_planted_defect(
    platform: Platform, contract: str, plant: type[Plant], failure: str
) -> None:
    real = platform.adapters.get(PLANTED_IN)
    case = case_for(platform, real, contract)
    case.adapter = plant(real, case)
    with pytest.raises((AssertionError, Planted), match=failure):
        CONTRACTS[contract](case)


@pytest.mark.parametrize(("plant", "failure"), SESSION_DEFECTS, ids=[p.__name__ for p, _f in SESSION_DEFECTS])
def test_the_session_forget_contract_catches_a_planted_defect(
    platform: Platform, plant: type[Plant], failure: str
) -> None:
    real = platform.adapters.get(PLANTED_IN_SESSIONS)
    case = case_for(platform, real, "forget")
    case.adapter = plant(real, case)
    with pytest.raises(AssertionError, match=failure):
        forget_reaches_one_item_and_only_it(case)
