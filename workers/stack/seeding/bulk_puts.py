"""Many S3 puts in a process of their own: bulk seeding's object writes off the seeder's interpreter lock.

boto3 spends 2-3 ms of CPU on each request (serialising, signing, parsing the reply), so a seeder that seals
rows and puts objects in one process is bound to one core. ``PutProcess`` sends the puts from a spawned
process with its own client and a thread pool inside it; the seeder goes on building the next rows.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from stores.infra.aws_clients import AwsEndpoints, s3_client

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_client: S3Client | None = None  # the put process's client, made once by its initializer


def _start(endpoints: AwsEndpoints) -> None:
    global _client
    _client = s3_client(endpoints)


def put_all(s3: S3Client, requests: Sequence[dict[str, Any]], threads: int) -> int:
    """Every ``put_object`` request, ``threads`` at a time; the first failure raised. Returns how many."""
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bulk-put") as pool:
        for _ in pool.map(lambda request: s3.put_object(**request), requests):
            pass
    return len(requests)


def _put_here(requests: Sequence[dict[str, Any]], threads: int) -> int:
    assert _client is not None, "the put process was started without its client"
    return put_all(_client, requests, threads)


class PutProcess:
    """One spawned process that puts objects (``submit`` returns a future of the count); a context manager."""

    def __init__(self, endpoints: AwsEndpoints, threads: int = 8) -> None:
        self._threads = threads
        self._pool = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_start, initargs=(endpoints,)
        )

    def submit(self, requests: Sequence[dict[str, Any]]) -> Future[int]:
        return self._pool.submit(_put_here, list(requests), self._threads)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> PutProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
