"""Shared activity plumbing: raw-id lookup, error translation, heartbeats with resumable details."""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import psycopg
import structlog
from botocore.exceptions import ClientError
from psycopg_pool import PoolTimeout
from temporalio import activity
from temporalio.exceptions import ApplicationError, TemporalError

from stores.adapters.interface import Subject
from stores.infra.errors import InvalidIdentifier, RecordInvalid, RequestNotFound, UnknownSchema
from stores.platform import Platform
from stores.privacy.redaction import mask, sensitive
from verifier.receipts.signing import UnsignableDocument
from workflows.contracts import error_types
from workflows.contracts.erasure import activity_label

log = structlog.get_logger("activities")

P = ParamSpec("P")
R = TypeVar("R")

_DENIED = {"AccessDenied", "AccessDeniedException", "InvalidAccessKeyId", "SignatureDoesNotMatch"}


def non_retryable(message: str, type_: str) -> ApplicationError:
    return ApplicationError(message, type=type_, non_retryable=True)


_held = threading.local()


def keep_sensitive(*values: str) -> None:
    """Register raw ids for masking until the current activity ends (its error is masked with them)."""
    stack: contextlib.ExitStack | None = getattr(_held, "stack", None)
    if stack is not None:
        stack.enter_context(sensitive(*values))


def translate_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Map store errors to ``ApplicationError``s whose messages hold no raw id: known errors no retry can
    fix become non-retryable; any other error keeps its type (retryable) with registered raw ids masked and
    without its cause chain, so nothing personal reaches Temporal history or the SDK's failure log."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with contextlib.ExitStack() as stack:
            _held.stack = stack
            try:
                return _translated(fn, *args, **kwargs)
            finally:
                _held.stack = None

    return wrapper


def _translated(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    info = activity.info()
    log.info(
        "activity_started",
        activity=activity_label(info.activity_type, info.activity_id),
        attempt=info.attempt,
        workflow=info.workflow_id,
    )
    started = time.monotonic()
    try:
        result = fn(*args, **kwargs)
        elapsed = time.monotonic() - started
        label = activity_label(info.activity_type, info.activity_id)
        log.info("activity_done", activity=label, workflow=info.workflow_id, seconds=round(elapsed, 3))
        activity.metric_meter().create_histogram_float(
            "erasure_step_duration_ms", "time per saga step (activity), by step", "ms"
        ).record(elapsed * 1000.0, {"step": label})
        return result
    except InvalidIdentifier as exc:
        raise non_retryable(mask(str(exc)), error_types.INVALID_IDENTIFIER) from None
    except UnknownSchema as exc:
        raise non_retryable(mask(str(exc)), error_types.UNKNOWN_SCHEMA) from None
    except RequestNotFound as exc:
        raise non_retryable(mask(str(exc)), error_types.REQUEST_NOT_FOUND) from None
    except RecordInvalid as exc:
        raise non_retryable(mask(str(exc)), error_types.RECORD_INVALID) from None
    except UnsignableDocument as exc:
        raise non_retryable(mask(str(exc)), error_types.UNSIGNABLE_DOCUMENT) from None
    except PermissionError as exc:
        raise non_retryable(mask(str(exc)), error_types.PERMISSION_DENIED) from None
    except psycopg.errors.InsufficientPrivilege:
        raise non_retryable("the database refused permission", error_types.PERMISSION_DENIED) from None
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in _DENIED:
            raise non_retryable(f"the store refused permission ({code})", error_types.PERMISSION_DENIED) from None
        raise ApplicationError(f"store error {code}", type="StoreTransient") from None
    except (psycopg.OperationalError, PoolTimeout):
        raise ApplicationError("database unavailable", type="DatabaseUnavailable") from None
    except TemporalError as exc:  # ours (ApplicationError) or the SDK's (cancellation): PII-free already
        # without the frames it passed through: a deep store call's trace could push the encrypted failure
        # past the server's size limit, which then replaces it with "Failure exceeds size limit"
        raise exc.with_traceback(None) from None
    except Exception as exc:
        log.warning("activity_error", activity=info.activity_type, error=type(exc).__name__)
        raise ApplicationError(mask(f"{type(exc).__name__}: {exc}")[:500], type=type(exc).__name__) from None


def count(name: str, description: str, value: int = 1, **labels: str) -> None:
    """Add to one of our Prometheus counters (exported with the SDK's metrics on the worker's port)."""
    if value:
        activity.metric_meter().create_counter(name, description).add(value, labels)


def heartbeat_details(default: dict[str, Any]) -> dict[str, Any]:
    """The details of the last heartbeat of a previous attempt, or ``default``."""
    details = activity.info().heartbeat_details
    if details and isinstance(details[0], dict):
        return {**default, **details[0]}
    return dict(default)


def beat(**details: Any) -> None:
    activity.heartbeat(details)


class PlatformActivities:
    """Base of every activity class: holds the platform built once in the worker."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform

    def subject(self, request_id: str, subject_key: str, app_name: str) -> Subject:
        """The raw user id for a request, checked against the subject key it claims."""
        from stores.privacy.identity import subject_key as compute_key

        user_id = self.platform.requests.user_id(request_id)
        if user_id is not None:
            keep_sensitive(user_id)
        if user_id is None:
            raise non_retryable("the request's user id was already forgotten", error_types.USER_ID_FORGOTTEN)
        if compute_key(self.platform.config.subject_secret, app_name, user_id) != subject_key:
            raise non_retryable("subject key does not match the request", error_types.INVALID_IDENTIFIER)
        return Subject(request_id, subject_key, app_name, user_id)
