"""Capacity at an SLO per arm (issue 30 item 1): for each measured (GPU kind x GPU count x TP x
precision) arm of a model, the per-replica throughput at which the stated latency SLO holds,
read from the arm's measured concurrency sweep.

An SLO is a set of percentile limits (``ttft_p90_ms``, ``ttft_p99_ms``, ``itl_p90_ms``,
``itl_p99_ms``, ``tpot_p99_ms``, ``latency_p99_s``; any subset). A measured run meets it when
every stated limit holds for the percentile the run carries. Where a run lacks that percentile
but carries a higher one of the same latency (p99 for a p90 limit), the higher one stands for it
when it is within the limit (it is at least as large: a p99 within the limit puts the p90
within it too; said as ``judged_on``); a higher one over the limit says nothing of the lower,
and a limit whose latency the run carries at neither percentile leaves the run unjudged.

The arm's capacity is the highest measured throughput among the runs that meet the SLO (the
knee: past it the SLO breaks); ``held_to_max`` says the SLO held at the arm's highest measured
concurrency, so the capacity is a lower bound of what the arm sustains. An arm with no judged
run abstains (``unmeasured``); one whose judged runs all break the SLO has no capacity
(``breaks``). Arms the benchmarks never ran are not predicted here (the launch advisor's
calibrated model, :mod:`analytics.advisor`, answers for those with its abstention).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

#: SLO limit -> the bench_runs columns that can judge it, the limit's own percentile first
#: (a higher percentile of the same latency stands for a lower one, never the reverse).
JUDGED_BY = {
    "ttft_p90_ms": ("ttft_p90_ms", "ttft_p99_ms"),
    "ttft_p99_ms": ("ttft_p99_ms",),
    "itl_p90_ms": ("itl_p90_ms", "itl_p99_ms"),
    "itl_p99_ms": ("itl_p99_ms",),
    "tpot_p99_ms": ("tpot_p99_ms",),
    "latency_p99_s": ("latency_p99_s",),
}
#: How an arm's precision is asked of ``vllm serve`` (its engine arguments: ``--dtype`` of
#: ``auto, half, float16, bfloat16, float, float32``; ``--quantization fp8`` quantizes the
#: weights at load). int8 / int4 checkpoints name their method (AWQ, GPTQ) in the checkpoint,
#: which the benchmark row does not say: no flag is written for them.
VLLM_PRECISION = {"bf16": ("--dtype", "bfloat16"), "fp16": ("--dtype", "float16"),
                  "fp32": ("--dtype", "float32"), "fp8": ("--quantization", "fp8")}
#: What identifies an arm among the benchmark rows of one model.
ARM = ("hardware", "n_gpus", "tp", "precision")
#: The columns of :func:`arm_capacity`, in order.
COLUMNS = (*ARM, "task", "source", "runs", "judged", "status", "concurrency",
           "throughput_tok_s", "tok_s_per_gpu", "energy_per_token_j", "in_len", "out_len",
           "held_to_max", "judged_on", "vllm_serve", "why")


@dataclass(frozen=True)
class Slo:
    """Latency limits (ms, or s for the end-to-end latency); None: not constrained."""

    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    latency_p99_s: float | None = None

    def limits(self) -> dict[str, float]:
        """The stated limits. Raises ValueError when none is stated or one is not a positive
        finite number."""
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if getattr(self, f.name) is not None}
        if not out:
            raise ValueError("state at least one SLO limit (e.g. --itl-p99-ms 100)")
        bad = [k for k, v in out.items() if not (math.isfinite(float(v)) and float(v) > 0)]
        if bad:
            raise ValueError(f"SLO limit {bad[0]} must be a positive number, not {out[bad[0]]!r}")
        return {k: float(v) for k, v in out.items()}


def _judge(row, limits: dict[str, float]) -> tuple[bool | None, list[str]]:
    """Whether one run meets ``limits`` (None: a limit has no percentile to judge it) and the
    columns it was judged on."""
    used, ok = [], True
    for limit, value in limits.items():
        col = next((c for c in JUDGED_BY[limit] if c in row and pd.notna(row[c])), None)
        if col is None:
            return None, used
        within = float(row[col]) <= value
        if col != JUDGED_BY[limit][0] and not within:
            return None, used  # a p99 over a p90 limit says nothing of the p90
        used.append(col)
        ok = ok and within
    return ok, used


def arm_capacity(bench: pd.DataFrame, model: str, slo: Slo,
                 task: str | None = None) -> pd.DataFrame:
    """Per arm of ``model`` in ``bench`` (``store.bench_runs``; ``task``: only that benchmark
    task), the per-replica capacity at ``slo`` (the module's docstring).

    Returns
    -------
    DataFrame, one row per arm (:data:`ARM`), best capacity first: ``runs`` (measured
    concurrencies), ``judged`` (runs the SLO could be judged on), ``status`` (``meets``,
    ``breaks``, ``unmeasured``), ``concurrency`` (of the knee run), ``throughput_tok_s``
    (output tokens/s of one replica at the knee), ``tok_s_per_gpu``, ``energy_per_token_j``,
    ``in_len`` / ``out_len`` (the knee run's mean lengths, NaN where not measured),
    ``held_to_max``, ``judged_on`` (the columns that judged the knee run), ``source`` and
    ``why`` (an arm without a capacity: what it lacks); :data:`COLUMNS`, NaN where unknown.

    Raises ValueError: no stated limit, or no benchmark row of ``model``.
    """
    limits = slo.limits()
    rows = bench[bench["model"] == model]
    if task is not None:
        rows = rows[rows["task"] == task]
    if rows.empty:
        known = sorted(set(bench["model"].dropna()))[:10]
        raise ValueError(f"no benchmark run of model {model!r}"
                         + (f" on task {task!r}" if task else "")
                         + f"; measured models include {', '.join(known) or 'none'}")
    rows = rows[rows["failed"].fillna(False) == False]  # noqa: E712 (a pandas mask)
    out = []
    for key, arm in rows.groupby(list(ARM), dropna=False, sort=True):
        arm = arm.sort_values("concurrency")
        verdicts = [_judge(r, limits) for r in arm.to_dict("records")]
        judged = [(r, used) for r, (ok, used) in zip(arm.to_dict("records"), verdicts,
                                                     strict=True) if ok is not None]
        meets = [(r, used) for r, (ok, used) in zip(arm.to_dict("records"), verdicts,
                                                    strict=True) if ok]
        rec = dict(zip(ARM, key, strict=True)) | {
            "runs": len(arm), "judged": len(judged), "source": ", ".join(
                sorted(set(arm["source"].dropna()))), "task": task}
        if not judged:
            out.append(rec | {"status": "unmeasured", "why": "no run of this arm carries "
                              + " or ".join(c for lim in limits for c in JUDGED_BY[lim])})
            continue
        if not meets:
            worst = min(judged, key=lambda ru: ru[0]["concurrency"])[0]
            out.append(rec | {"status": "breaks", "why": "the SLO breaks at every judged run "
                              f"(from concurrency {worst['concurrency']:g})"})
            continue
        knee, used = max(meets, key=lambda ru: ru[0]["throughput_tok_s"])
        top = max(r["concurrency"] for r, _ in judged)
        out.append(rec | {
            "status": "meets", "concurrency": knee["concurrency"],
            "throughput_tok_s": knee["throughput_tok_s"],
            "tok_s_per_gpu": knee["throughput_tok_s"] / max(int(knee["n_gpus"]), 1),
            "energy_per_token_j": knee.get("energy_per_token_j"),
            "in_len": knee.get("in_len"), "out_len": knee.get("out_len"),
            "held_to_max": bool(all(ok for r, (ok, _) in zip(
                arm.to_dict("records"), verdicts, strict=True)
                if ok is not None and r["concurrency"] == top)),
            "judged_on": ", ".join(used),
            "vllm_serve": _serve_line(model, knee)})
    frame = pd.DataFrame(out).reindex(columns=COLUMNS)
    order = {"meets": 0, "breaks": 1, "unmeasured": 2}
    return frame.sort_values(["status", "tok_s_per_gpu"], key=lambda c: c.map(order)
                             if c.name == "status" else -c.fillna(-1)).reset_index(drop=True)


def _serve_line(model: str, knee: dict) -> str | None:
    """The knee's ``vllm serve`` line, or None where no launch file can be written for it
    (:func:`analytics.decisions.fleet_export.check_launchable`)."""
    from analytics.decisions.fleet_export import check_launchable

    try:
        check_launchable(model, knee)
    except ValueError:
        return None
    return shlex.join(vllm_serve_args(model, knee))


def vllm_serve_args(model: str, run: dict) -> list[str]:
    """The ``vllm serve`` command line (argv) that launches one replica of the arm of
    benchmark ``run`` at its knee: ``--tensor-parallel-size`` (and
    ``--pipeline-parallel-size`` above 1), the precision (:data:`VLLM_PRECISION`) and
    ``--max-num-seqs`` = the knee's concurrency (the engine then never batches past the point
    where the SLO was measured to hold). Flags as vLLM's engine arguments name them."""
    args = ["vllm", "serve", model, "--tensor-parallel-size", str(int(run["tp"]))]
    pp = run.get("pp")
    if pp is not None and pd.notna(pp) and int(pp) > 1:
        args += ["--pipeline-parallel-size", str(int(pp))]
    args += list(VLLM_PRECISION.get(str(run.get("precision")), ()))
    conc = run.get("concurrency")
    if conc is not None and pd.notna(conc):
        args += ["--max-num-seqs", str(int(conc))]
    return args


def pareto(frame: pd.DataFrame, more: str, less: str) -> pd.Series:
    """Whether each row is on the Pareto front of ``frame``: no other row has at least as much
    ``more`` and at most as much ``less`` with one of them strictly better (e.g. output
    tokens/s per GPU against J per token). Rows missing either value are never on it.

    >>> f = pd.DataFrame({"tok": [1.0, 2.0, 2.0, 3.0], "j": [1.0, 1.0, 2.0, 3.0]})
    >>> pareto(f, "tok", "j").tolist()
    [False, True, False, True]
    """
    x, y = frame[more].to_numpy(float), frame[less].to_numpy(float)
    ok = np.isfinite(x) & np.isfinite(y)
    out = np.zeros(len(frame), dtype=bool)
    for i in np.flatnonzero(ok):
        dominated = ok & (x >= x[i]) & (y <= y[i]) & ((x > x[i]) | (y < y[i]))
        out[i] = not dominated.any()
    return pd.Series(out, index=frame.index)
