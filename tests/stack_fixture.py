"""Helpers for starting the real local stack on free ports in a temporary state directory."""

from __future__ import annotations

import random
from pathlib import Path

from workers.settings import Settings
from workers.stack.process import port_is_free

TEST_PAYLOAD_KEY = "7e" * 32  # test-only key: recorded histories in tests/histories/ are encrypted with it


def _below_ephemeral_range() -> int:
    """The first port the kernel hands out to outgoing connections: blocks are chosen below it, so a part
    restarted by a test (the fault tests stop and start SeaweedFS) never finds its port taken by some
    connection's ephemeral port (seen once: the restarted filer failed with "address already in use")."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
    return max(low, 12000)


def free_port_block(size: int, exclude: set[int] | None = None) -> int:
    """A base port such that base..base+size-1 are all free now (and outside the ephemeral range)."""
    exclude = exclude or set()
    top = _below_ephemeral_range() - size
    for _ in range(500):
        base = random.randint(10000, top)
        block = set(range(base, base + size))
        if block & exclude:
            continue
        if all(port_is_free(p) for p in block):
            return base
    raise RuntimeError("no free port block found")


#: the state directories made here: their root-owned Postgres directories are removed when the test
#: session ends (``remove_postgres_dirs``, from tests/conftest.py), whichever test started the stack
STATE_DIRS: list[Path] = []


def remove_postgres_dirs() -> list[Path]:
    """As root: remove the Postgres directory (``/var/lib/erasure-orchestrator/pg-*``) of every state directory
    this process made settings for, unless its Postgres still runs. The paths removed."""
    import os

    from workers.errors import StackError
    from workers.stack.parts import remove_root_postgres

    removed: list[Path] = []
    if os.geteuid() != 0:
        return removed
    for state_dir in dict.fromkeys(STATE_DIRS):
        try:
            base = remove_root_postgres(Settings.from_env({"ERASURE_STATE_DIR": str(state_dir)}))
        except (StackError, OSError):
            continue  # still running (a leaked process) or unreadable: left for `erasure stack up` to prune
        if base is not None:
            removed.append(base)
    return removed


def make_test_settings(state_dir: Path, **overrides: str) -> Settings:
    STATE_DIRS.append(state_dir)
    used: set[int] = set()
    ports: dict[str, int] = {}
    blocks = (("pg", 1), ("s3", 8), ("kms", 1), ("temporal", 1), ("ui", 1), ("cache", 1), ("idp", 1), ("serve", 1))
    for name, size in blocks:
        base = free_port_block(size, used)
        used |= set(range(base, base + size))
        ports[name] = base
    env = {
        "ERASURE_STATE_DIR": str(state_dir),
        "ERASURE_PG_PORT": str(ports["pg"]),
        "ERASURE_S3_PORT": str(ports["s3"]),
        "ERASURE_KMS_PORT": str(ports["kms"]),
        "ERASURE_TEMPORAL_PORT": str(ports["temporal"]),
        "ERASURE_TEMPORAL_UI_PORT": str(ports["ui"]),
        "ERASURE_CACHE_PORT": str(ports["cache"]),
        "ERASURE_IDP_PORT": str(ports["idp"]),
        "ERASURE_SERVE_PORT": str(ports["serve"]),
        "ERASURE_INGESTION_DELAY_SECONDS": "2",
        "ERASURE_LOG_FORMAT": "json",
        # a fixed payload key, so histories recorded by one test run replay in another (tests/histories/)
        "ERASURE_PAYLOAD_KEY": TEST_PAYLOAD_KEY,
        # seeded users (a `large` one holds ~13,000 rows) are bigger than a capped platform keeps: the tests
        # and the benchmark measure erasure, not eviction; eviction's own tests set their caps
        "ERASURE_MEMORY_MAX_RECORDS": "1000000",
        "ERASURE_MEMORY_MAX_TOKENS": "100000000",
        # the tests' own receivers listen on loopback: named as an address, so callbacks may reach them
        "ERASURE_CALLBACK_ALLOWED_URLS": "http://127.0.0.1",
    }
    env.update(overrides)
    return Settings.from_env(env)
