"""The stress run's tables: the summary of every request, one line per category, and each probe's cost."""

from __future__ import annotations

import html
import os
import statistics
from dataclasses import dataclass

from explorer.tools.stress_client import Monitor

SAID_CHARS = 90  # of a request's status line, in the table of what each cost


@dataclass(kw_only=True)
class Result:
    category: str
    name: str
    start: float
    end: float
    ok: bool
    detail: str = ""
    answer_bytes: int = 0

    @property
    def seconds(self) -> float:
        return self.end - self.start


def table(results: list[Result], monitor: Monitor, budget: float, baseline: int, resting: int) -> str:
    """The summary table, then one line per category."""
    seconds = [r.seconds for r in results]
    worst = max(results, key=lambda r: r.seconds)
    during = [s for start, s in monitor.pages if worst.start <= start <= worst.end] or [0.0]
    peak = max(rss for _, rss in monitor.rss)
    queue_full = sum("Queue is full" in r.detail for r in results)
    gib = 2**30
    lines = [
        "| requests | failures | p50 | p95 | worst request | GET / while it ran (max) | GET / (max) "
        "| peak RSS | resting RSS | budget |",
        "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
        f"| {len(results)} ({queue_full} told the queue is full) | {sum(not r.ok for r in results)} "
        f"| {statistics.median(seconds):.2f} s | {_percentile(seconds, 95):.2f} s "
        f"| {worst.name} ({worst.category}), {worst.seconds:.1f} s | {max(during):.2f} s "
        f"| {max(s for _, s in monitor.pages):.2f} s "
        f"| {peak / gib:.2f} GiB | {resting / gib:.2f} GiB ({resting / budget:.2f}× budget) "
        f"| {budget / gib:.2f} GiB (startup RSS {baseline / gib:.2f} GiB) |",
        "",
        "| category | requests | failures | p50 | p95 | max | GET / (max) | peak RSS |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for category in dict.fromkeys(r.category for r in results):
        ran = [r for r in results if r.category == category]
        times = [r.seconds for r in ran]
        first, last = min(r.start for r in ran), max(r.end for r in ran)
        pages = [s for start, s in monitor.pages if first <= start <= last] or [0.0]
        rss = [rss for t, rss in monitor.rss if first <= t <= last] or [0]
        lines.append(
            f"| {category} | {len(times)} | {sum(not r.ok for r in ran)} | {statistics.median(times):.2f} s "
            f"| {_percentile(times, 95):.2f} s | {max(times):.2f} s | {max(pages):.2f} s "
            f"| {max(rss) / gib:.2f} GiB ({max(rss) / budget:.2f}×) |"
        )
    return "\n".join(lines)


def costs(results: list[Result], monitor: Monitor) -> str:
    """One line per request: its time, the slowest `GET /` while it ran, the server's RSS before it and
    at its peak, the bytes of its answer and the start of what its status line said."""
    if not results:
        return ""
    lines = [
        "",
        "| request | answered | time | GET / while it ran (max) | RSS before → peak | answer | said |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        pages = [seconds for start, seconds in monitor.pages if r.start <= start <= r.end] or [0.0]
        before = [rss for t, rss in monitor.rss if t <= r.start][-1:] or [0]
        during = [rss for t, rss in monitor.rss if r.start <= t <= r.end] or before
        lines.append(
            f"| {r.category}: {r.name} | {'as expected' if r.ok else 'NOT as expected'} | {r.seconds:.2f} s "
            f"| {max(pages):.2f} s | {before[0] / 2**30:.2f} → {max(during) / 2**30:.2f} GiB "
            f"| {r.answer_bytes:,} B | {html.unescape(r.detail)[:SAID_CHARS].replace('|', '/')} |"
        )
    return "\n".join(lines)


def report(
    results: list[Result], monitor: Monitor, budget: float, baseline: int, resting: int, busy: float
) -> str:
    """One server's tables: the summary, each listed request's cost, its time and the slowest pages."""
    lines = [table(results, monitor, budget, baseline, resting)]
    listed = ("probe", "queue", "disk", "expensive", "outside", "kinds", "expiry", "forged", "doors")
    lines.append(costs([r for r in results if r.category in listed], monitor))
    averages = " / ".join(f"{value:.2f}" for value in os.getloadavg())
    lines.append(f"\n{busy:.0f} s of requests; load average {averages} (1 / 5 / 15 min)\n")
    for start, seconds in sorted(monitor.pages, key=lambda page: -page[1])[:3]:
        if seconds > 1.0:
            busy_with = sorted({f"{r.category} / {r.name}" for r in results if r.start <= start <= r.end})
            error = next((e for t, e in monitor.errors if t == start), "")
            lines.append(
                f"GET / took {seconds:.1f} s {error} while these ran: {', '.join(busy_with) or 'nothing'}"
            )
    return "\n".join(lines)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]
