"""Render the results of the three comparison scripts as the markdown tables of
``docs/benchmarks.md`` ("Comparisons (issue 7)"), so the doc shows exactly what was measured.

    .venv/bin/python -m bench.ysb.doc [bench/out]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.ysb.harness import ROOT


def ysb(r: dict[str, Any]) -> list[str]:
    lines = [
        f"Run {r['date']}, {r['machine']}: `{r['command']}` ({r['events']:,} events, "
        f"{r['files']} files, {r['repeats']} repeats in rotating order).",
        "",
        "| implementation | events/s, job time (median) | each run | events/s, streaming time "
        "(median) | window counts |",
        "| --- | ---: | --- | ---: | --- |",
    ]
    for leg, s in r["legs"].items():
        runs = ", ".join(f"{v:,.0f}" for v in s["events_per_s"]) or "failed: " + "; ".join(
            s["failures"]
        )
        ok = "= reference" if s["correct"] else "**wrong or failed**"
        median, streaming = s["median_events_per_s"], s.get("median_stream_events_per_s")
        stream = f"{streaming:,.0f}" if streaming else "n/a"
        lines.append(f"| {leg} | {median:,.0f} | {runs} | {stream} | {ok} |")
    lines.append("")
    lines += [f"- **{name}: {ratio:.2f}x**" for name, ratio in r["ratios"].items()]
    loads = [v for s in r["legs"].values() for v in s.get("load_after_run", [])]
    if loads:
        lines.append(f"- 1-minute load average after each run: {min(loads)}–{max(loads)}")
    return lines


def latency(r: dict[str, Any]) -> list[str]:
    lines = [
        f"Run {r['date']}, {r['machine']}: `{r['command']}` ({r['duration_s']:.0f} s per rate).",
        "",
        "| trigger | rate (events/s, achieved) | p50 | p95 | p99 | rows in gold / views sent "
        "| sustained |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for x in r["runs"]:
        lines.append(
            f"| {x['trigger']} (`{x['trigger_interval']}`) | {x['rate']:,} "
            f"({x.get('achieved_rate', x['rate']):,}) | "
            f"{x['p50_ms'] / 1000:.2f} s | {x['p95_ms'] / 1000:.2f} s | {x['p99_ms'] / 1000:.2f} s"
            f" | {x['rows_in_gold']:,} / {x['expected_views']:,} | "
            f"{'yes' if x['sustained'] else 'no'} |"
        )
    lines.append("")
    lines += [
        f"- highest rate sustained, {t} trigger: **{v:,} events/s**"
        for t, v in r["max_sustained"].items()
    ]
    return lines


def nexmark(r: dict[str, Any]) -> list[str]:
    lines = [
        f"Run {r['date']}, {r['machine']}: `{r['command']}` ({r['events']:,} events, "
        f"{r['cores']} cores).",
        "",
        "| query | lakefeed events/s/core | Flink events/s/core (published) | ratio | output |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for q, x in r["queries"].items():
        if not x["rows"]:
            lines.append(f"| {q} | failed | {x['flink_per_core_published']:,} | | "
                         f"{'; '.join(x['failures'])} |")  # fmt: skip
            continue
        out = f"{x['rows'][0]:,} rows"
        if x["expected_rows"] is not None:
            out += " = expected" if x["ok"] else f" (expected {x['expected_rows']:,})"
        lines.append(
            f"| {q} | {x['events_per_s_per_core']:,.0f} | {x['flink_per_core_published']:,} | "
            f"{x['ratio_to_flink_per_core']:.2f}x | {out} |"
        )
    return lines


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "out"
    for name, render in (("ysb", ysb), ("latency", latency), ("nexmark", nexmark)):
        results = out / name / "results.json"
        print(f"### {name}\n")
        if results.exists():
            print("\n".join(render(json.loads(results.read_text()))))
        else:
            print(f"_not measured ({results} missing)_")
        print()


if __name__ == "__main__":
    main()
