"""The benchmark's report: the table of figures against their targets, the capacity model, bench.json, a line
of results history and the charts."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import capacity, cpu, results_history
from bench.measured import Erasure, Figures
from bench.plan import Plan
from bench.stats import Row, Target, format_table, ratio, summarize
from workflows.erasure import HEARTBEAT_TIMEOUT


def _kms_target() -> Target:
    return Target(2)


def rows(f: Figures, plan: Plan) -> list[Row]:
    v = f.values
    big = "large platform"
    out: list[Row] = []

    def add(name: str, key: str, unit: str = "", target: Target | None = None) -> None:
        if v.get(key):
            out.append(Row(name, summarize(v[key]), unit, target))

    add(f"saga wall time, {plan.target_size} user, 10 bg", "saga_seconds_small", "s")
    add(f"direct deletions, {plan.target_size} user, 10 bg", "direct_seconds_small", "s")
    add("  saga's deleting activities (elapsed), 10 bg", "deletion_steps_seconds_small", "s")
    add("  saga's orchestration gaps, 10 bg", "orchestration_gaps_seconds_small", "s")
    # issue 19: a large user within 1.15x of direct; a typical user's fixed cost within 3x
    overhead = Target(1.15) if plan.target_size == "large" else Target(3.0)
    add("1 overhead saga/direct, 10 bg", "overhead_small", "x", overhead)
    add(f"saga wall time, {plan.target_size} user, {plan.background_large} bg", "saga_seconds_large", "s")
    add(f"direct deletions, {plan.background_large} bg", "direct_seconds_large", "s")
    add(f"1 overhead saga/direct, {plan.background_large} bg", "overhead_large", "x", overhead)
    if v.get("saga_seconds_small") and v.get("saga_seconds_large"):
        scaling = [ratio(a, b) for a, b in zip(v["saga_seconds_large"], v["saga_seconds_small"], strict=False)]
        v["scaling"] = scaling
        add(f"2 scaling {plan.background_large} bg / 10 bg", "scaling", "x", Target(1.1))
    add(f"3 throughput, {plan.concurrent} small users", "throughput_per_min", "/min")
    add(f"3 ceiling, {plan.concurrent} no-op sagas", "ceiling_per_min", "/min")
    add("3 throughput share of ceiling", "throughput_share", "", Target(0.8, at_most=False))
    for component in cpu.COMPONENTS:
        add(f"3 CPU s / small erasure: {component}", f"cpu_{component}_per_erasure", "s")
    add("3 Temporal actions / small erasure (history)", "actions_per_small_erasure", "", Target(30))
    add("3 Temporal actions / erasure (history)", "actions_small", "", Target(30))
    add("4 verifier share of saga (2 children)", "verifier_share_small", "")
    add(f"4 verifier share, {big}", "verifier_share_large", "")
    add("4 re-verify / saga time", "reverify_share_small", "")
    add("5 KMS calls / erasure", "calls_kms_calls_small", "", _kms_target())
    add("5 KMS calls / small erasure", "small_calls_kms", "", _kms_target())
    add("5 S3 requests / erasure", "calls_s3_requests_small")
    add("5 S3 listings / erasure", "calls_s3_listings_small")
    volumes = f.notes.get("volumes", {}).get(plan.target_size, {})
    versions = int(volumes.get("artifact_versions", 0))
    add(
        f"5 S3 artifact deletes ({versions} versions)",
        "calls_s3_artifact_deletes_small",
        "",
        Target(max(1, math.ceil(versions / 1000))),
    )
    add("5 S3 log-bucket deletes / erasure", "calls_s3_log_deletes_small")
    add("5 S3 puts / erasure", "calls_s3_puts_small")
    add("5 S3 gets / erasure", "calls_s3_gets_small")
    add("5 SQL statements / erasure", "calls_sql_statements_small")
    add("5 direct: S3 requests", "direct_calls_s3_requests_small")
    add("5 direct: SQL statements", "direct_calls_sql_statements_small")
    add("5 SQL statements saga / direct", "sql_statements_ratio_small", "x", Target(2.0))
    add("5 S3 requests saga / direct", "s3_requests_ratio_small", "x", Target(1.2))
    add("5 activity heartbeats / erasure (estimated, not in history)", "heartbeats_small")
    add("5 cache commands / erasure", "calls_cache_commands_small")
    add("5 direct: cache commands", "direct_calls_cache_commands_small")
    add("5 Chroma opens / erasure", "calls_chroma_opens_small")
    small, large = plan.expiry_background, plan.expiry_background * 10
    add(f"6 expiry sweep per expired row, {small:,} rows", "expiry_ms_per_row_small", "ms")
    add(f"6 expiry sweep per expired row, {large:,} rows", "expiry_ms_per_row_large", "ms")
    add(f"6 expiry cost per row, {large:,} vs {small:,} apart", "expiry_apart", "x", Target(1.2))
    add(f"6 expiry SQL statements / expired row, {small:,}", "expiry_sql_per_row_small")
    add(f"6 expiry SQL statements / expired row, {large:,}", "expiry_sql_per_row_large")
    add(f"7 memory search, {plan.search_rows:,} rows, sealed embeddings", "search_sealed_ms", "ms")
    add(f"7 memory search, {plan.search_rows:,} rows, plain pgvector", "search_plain_ms", "ms")
    add("7 memory search sealed / plain", "search_sealed_ratio", "x", Target(2.0))
    add("7 append an event, sealed session service", "append_sealed_ms", "ms")
    add("7 append an event, sealed / plain google-adk", "append_sealed_ratio", "x")
    add("7 load a session, sealed session service", "load_sealed_ms", "ms")
    add("7 load a session, sealed / plain google-adk", "load_sealed_ratio", "x")
    n = plan.backlog
    for w in (1, 2):
        add(f"8 backlog {n}: drain time, {w} worker process(es)", f"backlog_drain_seconds_{w}w", "s")
        add(
            f"8 backlog {n}: completed, {w} worker process(es)", f"backlog_completed_{w}w", "", Target(n, at_most=False)
        )
        add(f"8 backlog {n}: latency p50, {w} worker(s)", f"backlog_latency_p50_seconds_{w}w", "s")
        add(f"8 backlog {n}: latency p99, {w} worker(s)", f"backlog_latency_p99_seconds_{w}w", "s")
        add(
            f"8 backlog {n}: worker CPU s / erasure, {w} worker(s)", f"backlog_worker_cpu_seconds_per_erasure_{w}w", "s"
        )
        add(f"8 backlog {n}: worker peak RSS, {w} worker(s)", f"backlog_worker_peak_rss_mb_{w}w", "MB")
    add(f"8 backlog {n}: drain 1 worker / 2 workers", "backlog_speedup_2w", "x")
    for label, where in (("small", "10 bg"), ("large", f"{plan.background_large:,} bg"), ("backlog", f"backlog {n}")):
        add(f"10 physical job: one run, {where}", f"physical_seconds_{label}", "s")
        add(f"10 physical job: requests covered, {where}", f"physical_requests_{label}")
        add(f"10 physical job: cost per erased user, {where}", f"physical_seconds_per_request_{label}", "s")
        add(f"10 physical job: run within the window, {where}", f"physical_window_met_{label}", "", Target(1, False))
    add("9 huge user: saga wall time", "saga_seconds_huge", "s")
    add("9 huge user: direct deletions", "direct_seconds_huge", "s")
    add("9 huge user: saga / direct", "overhead_huge", "x", Target(1.2))
    add("9 huge user: longest step", "longest_step_seconds_huge", "s")
    add(
        f"9 huge user: steps longer than the {HEARTBEAT_TIMEOUT.seconds} s heartbeat timeout",
        "steps_past_heartbeat_timeout_huge",
    )
    add("9 huge user: activity retries (every step heartbeats)", "retries_huge", "", Target(0))
    return out


def print_and_record(
    plan: Plan, figures: Figures, sample: Erasure | None, total: float, history: Path | None = results_history.HISTORY
) -> None:
    """The table and the capacity model to stdout, then the files (``write_outputs``), named as they are written."""
    table = rows(figures, plan)
    print(format_table(table))
    print(f"\nactivities per erasure: {figures.notes.get('activities_per_erasure')}; total time {total:.0f}s")
    model = capacity.markdown(capacity.Measured.from_values(figures.values))
    figures.notes["capacity_model"] = model
    print("\ncapacity model (measured per erasure, extrapolated per month):\n" + model)
    written = write_outputs(plan, figures, table, sample, total, history)
    print("wrote " + ", ".join(str(p) for p in written))


def write_outputs(
    plan: Plan,
    figures: Figures,
    table: list[Row],
    sample: Erasure | None,
    total: float,
    history: Path | None = results_history.HISTORY,
    echo: Callable[[str], None] = print,
) -> list[Path]:
    """bench.json, one line appended to the results history, and the charts; returns the files written."""
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    mode = "quick" if plan.quick else "full"
    plan_doc = {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(plan).items()}
    doc = {
        "mode": mode,
        "plan": plan_doc,
        "total_seconds": round(total, 1),
        "table": [r.as_dict() for r in table],
        "values": figures.values,
        "notes": figures.notes,
    }
    written = [plan.out_dir / "bench.json"]
    written[0].write_text(json.dumps(doc, indent=2, default=str) + "\n")
    entries: list[results_history.Entry] = []
    if history is not None:
        measured = {k: v for k, v in plan_doc.items() if k != "out_dir"}
        results_history.append(history, results_history.record(mode, measured, table, total))
        written.append(history)
        try:
            entries = results_history.read(history)
        except ValueError as exc:  # an older line damaged (a merge?): this run's line is written, chart the rest
            echo(f"history chart skipped: {exc}")
    return written + draw_charts(plan, figures, table, sample, entries, echo)


def draw_charts(
    plan: Plan,
    figures: Figures,
    table: Sequence[Row],
    sample: Erasure | None,
    entries: Sequence[results_history.Entry],
    echo: Callable[[str], None] = print,
) -> list[Path]:
    """The PNG charts in ``plan.out_dir``: skipped with a note when matplotlib is missing, and a chart that
    fails is reported and skipped (the figures are already written: a chart never costs the run)."""
    try:
        from bench import charts  # matplotlib, from the bench extra
    except ImportError as exc:
        missing = exc.name or "matplotlib"
        echo(f"charts skipped: no {missing} (matplotlib is in the bench extra: pip install -e '.[bench]')")
        return []
    v, out = figures.values, plan.out_dir
    share = next((r.target for r in table if r.name == "3 throughput share of ceiling"), None)
    scale = [
        charts.Scale(plan.background_small, v.get("saga_seconds_small", []), v.get("direct_seconds_small", [])),
        charts.Scale(plan.background_large, v.get("saga_seconds_large", []), v.get("direct_seconds_large", [])),
    ]
    jobs: list[tuple[str, Callable[[Path], Path]]] = []
    if sample:
        title = f"time per step, one {plan.target_size} user erasure"
        gaps = sample.wall - sample.busy
        jobs.append(("steps.png", lambda p: charts.steps(p, sample.steps, sample.wall, gaps, title)))
    if v.get("throughput_per_min") and v.get("ceiling_per_min"):
        tput, ceil, n = v["throughput_per_min"], v["ceiling_per_min"], plan.concurrent
        jobs.append(("throughput.png", lambda p: charts.throughput(p, tput, ceil, n, share.bound if share else None)))
    if any(s.saga for s in scale):
        jobs.append(("scaling.png", lambda p: charts.scaling(p, [s for s in scale if s.saga], plan.target_size)))
    if entries:
        jobs.append(("history.png", lambda p: charts.history(p, entries)))
    written = []
    for name, draw in jobs:
        try:
            written.append(draw(out / name))
        except Exception as exc:  # a chart is a view of figures already written; report it, keep the others
            echo(f"chart {name} skipped: {type(exc).__name__}: {exc}")
    return written
