"""The retry policies every workflow's activities use, in one place.

``STEP``: an activity retries until it succeeds or fails for good (the error types the worker marks as
non-retryable: bad input, a hold, an approval that does not verify), backing off from 1 s to 30 s; its
timeouts bound each attempt. ``BOUNDED``: the same, for one item of a batch (a sweep's subject, an
expiry's group), given up after five attempts so one bad item is counted and the batch goes on; the next
run tries it again. ``WEBHOOK``: a notification to a caller's endpoint, from 1 s to 10 minutes, twelve
attempts; a receiver down longer than that is reported, never the reason an erasure fails.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

from workflows.contracts import error_types

STEP = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=list(error_types.NON_RETRYABLE),
)
BOUNDED = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
    non_retryable_error_types=list(error_types.NON_RETRYABLE),
)
WEBHOOK = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=10),
    maximum_attempts=12,
)
