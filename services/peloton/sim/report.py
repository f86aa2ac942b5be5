"""Writing a run's results: metrics.json and PNG plots (the simulator's output shell).

`write_report(result, out_dir)` writes
- metrics.json: {"summary": ..., "performance": ..., "series": ...} (see docs/sim.md);
- utilization.png: cpu and memory, allocated and used, over simulated hours;
- pools.png: each leaf pool's allocation, entitlement and demand (cpu) over time;
- queue_delay_cdf.png: the queueing-delay CDF of each priority tier.
matplotlib is imported here only (Agg backend), so the simulator core does not need it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .simulation import SimResult

__all__ = ["write_metrics", "write_report", "REPORT_FILES"]

REPORT_FILES = ("metrics.json", "utilization.png", "pools.png", "queue_delay_cdf.png")


def write_metrics(result: SimResult, out_dir: str | Path) -> Path:
    """Write metrics.json into `out_dir` (created); returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"summary": result.summary, "performance": result.performance,
           "series": result.series}
    metrics = out / "metrics.json"
    metrics.write_text(json.dumps(_clean(doc), indent=1) + "\n", encoding="utf-8")
    return metrics


def write_report(result: SimResult, out_dir: str | Path) -> list[Path]:
    """Write metrics.json and the plots into `out_dir` (created); returns the paths."""
    out = Path(out_dir)
    metrics = write_metrics(result, out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = [metrics]
    title = f"{result.summary['scenario']} (seed {result.summary['seed']})"
    for name, draw in (("utilization.png", _utilization), ("pools.png", _pools),
                       ("queue_delay_cdf.png", _delay_cdf)):
        fig = draw(plt, result, title)
        path = out / name
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def _utilization(plt: Any, result: SimResult, title: str) -> Any:
    s = result.series
    hours = np.array(s["t_s"]) / 3600.0
    fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
    for key, label, style in (("cpu_allocated", "cpu allocated", "-"),
                              ("cpu_used", "cpu used", "--"),
                              ("memory_allocated", "memory allocated", "-"),
                              ("memory_used", "memory used", "--")):
        ax.plot(hours, s[key], style, label=label)
    ax.set(title=f"Cluster utilization - {title}", xlabel="simulated time (h)",
           ylabel="fraction of capacity (hosts up)", ylim=(0, 1.05))
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    return fig


def _pools(plt: Any, result: SimResult, title: str) -> Any:
    s = result.series
    hours = np.array(s["t_s"]) / 3600.0
    pools = s["pools"]
    n = max(1, len(pools))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3 * rows), squeeze=False,
                             layout="constrained")
    for ax, (path, p) in zip(axes.flat, pools.items(), strict=False):
        ax.plot(hours, p["demand_cpu"], color="0.7", label="demand")
        ax.plot(hours, p["entitlement_cpu"], "--", label="entitlement")
        ax.plot(hours, p["allocation_cpu"], label="allocation")
        ax.set_title(path, fontsize=10)
        ax.set_xlabel("h")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    axes.flat[0].set_ylabel("cpu")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"Pool allocation vs entitlement - {title}")
    return fig


def _delay_cdf(plt: Any, result: SimResult, title: str) -> Any:
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    for tier, delays in result.delays.items():
        if delays.size == 0:
            continue
        x = np.sort(np.maximum(delays, 0.1))  # log axis: a same-cycle start shows as 0.1 s
        y = np.arange(1, x.size + 1) / x.size
        ax.step(x, y, where="post", label=f"{tier} (n={x.size:,})")
    ax.set_xscale("log")
    ax.set(title=f"Queueing delay (queued -> running) - {title}", xlabel="seconds",
           ylabel="fraction of runs", ylim=(0, 1.01))
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right")
    return fig


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value
