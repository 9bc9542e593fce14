"""Figure 7: what sealing costs on the hot paths (a memory search, appending an event, loading a session)."""

from __future__ import annotations

import asyncio

from bench import sealing as sealing_bench
from bench.harness import APP, Bench, say


async def sealing(bench: Bench) -> None:
    """Figure 7: a memory search over sealed embeddings against plain pgvector, same words, same queries."""
    cost = await asyncio.to_thread(sealing_bench.search_cost, bench.platform, APP, bench.plan.search_rows)
    say(f"  [search, {cost.rows:,} rows] sealed {cost.sealed_ms:.1f} ms, plain {cost.plain_ms:.1f} ms")
    bench.figures.add("search_sealed_ms", cost.sealed_ms)
    bench.figures.add("search_plain_ms", cost.plain_ms)
    bench.figures.add("search_sealed_ratio", cost.ratio)
    sessions = await sealing_bench.session_cost(bench.platform, APP)
    say(
        f"  [session, {sessions.events} events] append {sessions.append_sealed_ms:.2f} ms sealed vs "
        f"{sessions.append_plain_ms:.2f} ms plain; "
        f"load {sessions.load_sealed_ms:.1f} ms vs {sessions.load_plain_ms:.1f} ms"
    )
    bench.figures.add("append_sealed_ratio", sessions.append_ratio)
    bench.figures.add("load_sealed_ratio", sessions.load_ratio)
    bench.figures.add("append_sealed_ms", sessions.append_sealed_ms)
    bench.figures.add("load_sealed_ms", sessions.load_sealed_ms)
