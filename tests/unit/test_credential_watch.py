"""The worker's credential watch keeps polling whatever one poll raised, and ends when the worker stops."""

from __future__ import annotations

import asyncio

import pytest

from workers.credential_reload import CredentialFiles, Outcome, TemporalCredentials


class Breaking(TemporalCredentials):
    def __init__(self) -> None:  # no settings, client or files read: only the loop is under test
        self.files = CredentialFiles(("/etc/erasure/temporal/client.pem",), ())
        self.tokens = None
        self.polls = 0

    async def refresh(self, worker: object = None, on_client: object = None) -> Outcome:
        self.polls += 1
        raise RuntimeError("the new client uses another runtime")


@pytest.mark.asyncio
async def test_a_poll_that_raises_does_not_end_the_watch_and_stop_ends_it() -> None:
    creds, stop = Breaking(), asyncio.Event()
    watching = asyncio.create_task(creds.watch(None, stop, every=0.01))
    while creds.polls < 3:
        await asyncio.sleep(0.01)
        assert not watching.done()  # still polling after a poll raised
    stop.set()
    await asyncio.wait_for(watching, 1)  # ends without raising


@pytest.mark.asyncio
async def test_nothing_to_watch_returns_at_once() -> None:
    creds = Breaking()
    creds.files = CredentialFiles((), ())
    await asyncio.wait_for(creds.watch(None, asyncio.Event(), every=0.01), 1)
    assert creds.polls == 0
