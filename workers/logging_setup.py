"""structlog, configured once: console on a terminal, JSON otherwise, and no raw identifiers.

``refuse_raw_identifiers`` is a processor that drops known raw-identifier fields and masks any value
registered as sensitive (the raw user ids an activity is handling) wherever it appears in an event.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

from stores.privacy.redaction import current, sensitive

__all__ = ["configure_logging", "get_logger", "refuse_raw_identifiers", "sensitive"]

#: Field names that may hold raw identity or content; their values never reach a log line.
FORBIDDEN_FIELDS = frozenset(
    {"user", "user_id", "userid", "raw_user_id", "email", "content", "text", "query", "session_text"}
)
REDACTED = "[redacted]"

_configured = False


def _mask(value: Any, needles: list[str]) -> Any:
    if isinstance(value, str):
        for needle in needles:
            if needle in value:
                value = value.replace(needle, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: _mask(v, needles) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask(v, needles) for v in value)
    return value


def refuse_raw_identifiers(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key in list(event_dict):
        if key.lower() in FORBIDDEN_FIELDS:
            event_dict[key] = REDACTED
    needles = current()
    if needles:
        for key, value in list(event_dict.items()):
            event_dict[key] = _mask(value, needles)
    return event_dict


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    """A logger on whatever ``sys.stderr`` is now (it may be replaced after configuration: test capture)."""
    return structlog.PrintLogger(file=sys.stderr)


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler on whatever ``sys.stderr`` is at emit time (test capture may replace it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        return


def configure_logging(log_format: str = "auto", level: int = logging.INFO) -> None:
    """Configure structlog, and route the standard library's loggers (Temporal SDK, botocore, psycopg)
    through the same processors: their messages and tracebacks are masked like ours."""
    global _configured
    as_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    renderer: Any = structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    shared: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,  # the traceback becomes text before it is masked
        refuse_raw_identifiers,
    ]
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, *shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    handler = _CurrentStderr()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _CurrentStderr)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    _configured = True


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
