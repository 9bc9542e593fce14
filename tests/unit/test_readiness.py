"""The console's readiness check without services: callers share one check, an answer is reused while fresh,
and a malformed database URL is reported without the password it holds."""

from __future__ import annotations

import asyncio
import threading
import time

from pydantic import SecretStr

from console.readiness import Readiness
from workers.check import PartCheck, check_postgres
from workers.settings import Settings


async def test_callers_arriving_together_share_one_check_and_a_fresh_answer_is_reused() -> None:
    runs: list[str] = []
    lock = threading.Lock()

    def part() -> PartCheck:
        with lock:
            runs.append(threading.current_thread().name)
        time.sleep(0.3)
        return PartCheck("part", True, "fine")

    readiness = Readiness([("part", part)], deadline=2.0, fresh=0.5)
    answers = await asyncio.gather(*(readiness.answer() for _ in range(20)))
    assert len(runs) == 1, "twenty callers, one check"
    assert all(a == (True, {"ready": True, "parts": [{"name": "part", "ok": True, "detail": "fine"}]}) for a in answers)
    await asyncio.sleep(0.6)
    await readiness.answer()
    assert len(runs) == 2, "a stale answer is checked again"


async def test_one_failing_part_makes_it_not_ready_and_no_part_is_not_ready_either() -> None:
    ok = ("a", lambda: PartCheck("a", True, "fine"))
    failing = ("b", lambda: PartCheck("b", False, "down"))
    ready, body = await Readiness([ok, failing]).answer()
    assert not ready
    assert body["parts"][1] == {"name": "b", "ok": False, "detail": "down"}
    assert await Readiness([]).answer() == (False, {"ready": False, "parts": []})


def test_a_malformed_database_url_is_reported_without_its_password() -> None:
    """Settings may refuse such a URL at start; the check says nothing of it either way (libpq quotes it)."""
    url = SecretStr("postgresql://erasure:s3cret-pw@[::1/erasure")
    settings = Settings.from_env({}).model_copy(update={"database_url": url})
    result = check_postgres(settings)
    assert not result.ok
    assert "s3cret-pw" not in result.detail
    assert "malformed" in result.detail
