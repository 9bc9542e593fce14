"""The request's recorded state: what each saga step leaves for the later steps and the verifier.

Typed and versioned. A field that is ``None`` was never recorded (the step that writes it has not run or
did not finish); an empty list or dict was recorded as empty. Readers must tell the two apart: the
verifier fails a check whose input is ``None`` ("input missing"), never treats it as "nothing to check".

Stored as JSON in ``erasure_requests.record`` with a ``version``. Version 1 is the unversioned dict
written before this module existed (same key names, read as is); a record of any other unknown version,
or with a key this version does not know, is refused (``RecordInvalid``) rather than half-read.

Everything here is PII-free: session ids, memory ids, segment keys, counts, times, keyed digests.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from stores.infra.errors import RecordInvalid

RECORD_VERSION = 2
_LEGACY_VERSION = 1
_LEGACY_ONLY = frozenset({"erased_memory_ids"})  # v1 kept derived ids here; v2 uses the erased_memories table


@dataclass(frozen=True)
class CiphertextSample:
    """One sealed memory row of the user, kept to prove after shredding that it no longer decrypts."""

    memory_id: str
    blob: str  # base64


@dataclass(frozen=True)
class LateSweepNote:
    at: str  # ISO 8601
    found: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestRecord:
    version: int = RECORD_VERSION
    # filing: the stores of the request's plan, in order (None: filed before plans existed, the built-in five)
    stores: list[str] | None = None
    # begin_request
    canaries: list[str] | None = None
    ciphertext_sample: CiphertextSample | None = None  # None also when the user had no memory row
    ciphertext_sample_destroyed: bool = False
    # both captures are only needed while the request runs: finish_request destroys them (issue 12, item 13)
    canaries_destroyed: bool = False
    sessions_at_start: int | None = None
    found_at_start: dict[str, int] | None = None
    # runs of the user's words (ordered keyed digests, ``stores.memory.verbatim_copies``) and the rows of other
    # subjects that held one at the start (copies made before the request: kept, disclosed); destroyed at
    # completion with the canaries
    text_runs: list[list[str]] | None = None
    copies_at_start: list[str] | None = None
    # stores with the StartCapture capability: what each held for the subject at the start (PII-free refs)
    refs_at_start: dict[str, list[str]] | None = None
    # sessions step (and the second sweep): every session tombstoned for the subject, as keyed digests
    # (``stores.privacy.identity.session_digest``), never the session ids
    erased_sessions: list[str] | None = None
    # memory step: derived rows it removed (the ids of every erased row are in ``erased_memories``)
    derived_removed: list[str] | None = None
    # logs step: the segments the subject index named
    purged_segments: list[str] | None = None
    # keys step
    keys_shredded_at: str | None = None
    # stores that record what they erased for their own check (store name -> PII-free references, e.g.
    # the response cache's entry digests); a store's key missing: its step never recorded (fail closed)
    erased_refs: dict[str, list[str]] | None = None
    # second sweep and the scheduled sweeps
    second_sweep: dict[str, int] | None = None
    late_writer_sweeps: list[LateSweepNote] = field(default_factory=list)
    # a failed saga (finish_request): the step that failed, and the user fence's fate after the failure
    # ("lifted", "kept" when lifting failed too, "not_placed")
    failed_step: str | None = None
    fence_after_failure: str | None = None
    # a request failed by the reconciler (``activities/reconcile.py``): why its workflow could not finish it
    # (``workflow_terminated``, ``workflow_timed_out``, ``workflow_failed``, ``workflow_missing``...)
    failure_reason: str | None = None

    @property
    def begun(self) -> bool:
        """Whether ``begin_request`` recorded its capture (canaries and the ciphertext sample, maybe none)."""
        return self.canaries is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, CiphertextSample):
                value = {"memory_id": value.memory_id, "blob": value.blob}
            elif f.name == "late_writer_sweeps":
                value = [{"at": n.at, "found": dict(n.found)} for n in value]
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RequestRecord:
        if not isinstance(raw, dict):
            raise RecordInvalid("request record is not a JSON object")
        data = dict(raw)
        version = data.pop("version", _LEGACY_VERSION)
        if version not in (_LEGACY_VERSION, RECORD_VERSION):
            raise RecordInvalid(f"request record version {version!r} is not one this code can read")
        known = {f.name for f in fields(cls)} - {"version"}
        if version == _LEGACY_VERSION:
            for key in _LEGACY_ONLY:
                data.pop(key, None)
        unknown = sorted(set(data) - known)
        if unknown:
            raise RecordInvalid(f"request record has unknown fields: {', '.join(unknown)}")
        try:
            sample = data.pop("ciphertext_sample", None)
            sweeps = data.pop("late_writer_sweeps", None) or []
            return cls(
                version=RECORD_VERSION,
                ciphertext_sample=CiphertextSample(str(sample["memory_id"]), str(sample["blob"])) if sample else None,
                late_writer_sweeps=[LateSweepNote(str(n["at"]), dict(n.get("found", {}))) for n in sweeps],
                **data,
            )
        except (KeyError, TypeError) as err:
            raise RecordInvalid(f"request record is malformed: {type(err).__name__}") from None
