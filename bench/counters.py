"""Count what an erasure costs: boto3 API calls per operation and bucket, and SQL statements.

* S3 and KMS: a ``before-parameter-build`` hook on the platform's own boto3 clients fires once per API
  call the code makes (a paginator page is one call; botocore's internal HTTP retries are not counted).
* Response cache: the platform's valkey client's ``execute_command`` is wrapped (one count per command;
  a pipeline counts once).
* SQL: ``psycopg.Cursor.execute`` and ``executemany`` are wrapped process-wide (``Connection.execute``
  goes through ``Cursor.execute``): one count per ``execute``, and per parameter set of ``executemany``.
  ``pg_stat_statements`` needs ``shared_preload_libraries`` (not set on the embedded server), and
  ``pg_stat_database`` transaction counters are flushed lazily (up to a second late) and merge the
  statements of one transaction, so neither was used.

Counts are process-wide: take them only while nothing but the measured work runs.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

_INSTALLED: list[CallCounter] = []


class CallCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] += n

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)

    def since(self, before: Counter[str]) -> Counter[str]:
        now = self.snapshot()
        now.subtract(before)
        return Counter({k: v for k, v in now.items() if v})


def watch_boto(client: Any, service: str, counter: CallCounter) -> None:
    """Count every API call of ``client`` as ``<service>:<Operation>[@bucket]``."""

    def hook(params: Any = None, model: Any = None, **_kwargs: Any) -> None:
        bucket = params.get("Bucket") if isinstance(params, dict) else None
        name = getattr(model, "name", "?")
        counter.add(f"{service}:{name}" + (f"@{bucket}" if bucket else ""))

    client.meta.events.register(f"before-parameter-build.{service}", hook)


def watch_sql(counter: CallCounter) -> None:
    """Wrap psycopg's cursor once per process; every later count goes to ``counter`` as ``sql``."""
    if _INSTALLED:
        _INSTALLED[0] = counter
        return
    _INSTALLED.append(counter)
    execute = psycopg.Cursor.execute
    executemany = psycopg.Cursor.executemany

    def counted_execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        _INSTALLED[0].add("sql")
        return execute(self, query, params, **kwargs)

    def counted_executemany(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        params_list = list(params_seq)
        _INSTALLED[0].add("sql", len(params_list))
        return executemany(self, query, params_list, **kwargs)

    setattr(psycopg.Cursor, "execute", counted_execute)  # noqa: B010 - deliberate monkeypatch
    setattr(psycopg.Cursor, "executemany", counted_executemany)  # noqa: B010


def watch_cache(client: Any, counter: CallCounter) -> None:
    """Count every command ``client`` (a valkey/redis client) sends as ``cache:<COMMAND>`` (a pipeline: one
    ``cache:PIPELINE`` round trip)."""
    execute = client.execute_command

    def counted(*args: Any, **options: Any) -> Any:
        counter.add(f"cache:{str(args[0]).upper()}" if args else "cache:?")
        return execute(*args, **options)

    client.execute_command = counted
    make_pipeline = client.pipeline

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = make_pipeline(*args, **kwargs)
        run = pipe.execute

        def counted_run(*a: Any, **kw: Any) -> Any:
            counter.add("cache:PIPELINE")
            return run(*a, **kw)

        pipe.execute = counted_run
        return pipe

    client.pipeline = pipeline


def watch_chroma(store: Any, counter: CallCounter) -> None:
    """Count every database the Chroma store opens as ``chroma:open`` (a SQLite open and Chroma's start-up:
    its cost per call, as a round trip is for the other stores)."""
    opened = store.opened

    @contextmanager
    def counted(*args: Any, **options: Any) -> Iterator[Any]:
        counter.add("chroma:open")
        with opened(*args, **options) as found:
            yield found

    store.opened = counted


def group(counts: Counter[str], artifact_bucket: str, log_bucket: str) -> dict[str, int]:
    """The figures the targets talk about, from raw per-operation counts."""

    def total(pred: Any) -> int:
        return sum(v for k, v in counts.items() if pred(k))

    return {
        "kms_calls": total(lambda k: k.startswith("kms:")),
        "s3_requests": total(lambda k: k.startswith("s3:")),
        "s3_listings": total(lambda k: k.startswith("s3:List")),
        "s3_artifact_deletes": total(lambda k: k.startswith("s3:Delete") and k.endswith("@" + artifact_bucket)),
        "s3_log_deletes": total(lambda k: k.startswith("s3:Delete") and k.endswith("@" + log_bucket)),
        "s3_puts": total(lambda k: k.startswith("s3:Put")),
        "s3_gets": total(lambda k: k.startswith("s3:Get") or k.startswith("s3:Head")),
        "sql_statements": counts.get("sql", 0),
        "cache_commands": total(lambda k: k.startswith("cache:")),
        "chroma_opens": total(lambda k: k.startswith("chroma:")),
    }
