"""Views of a serving comparison: per-bin time series, latency CDFs, energy-vs-clock curves of
the profiles, and the CLI's JSON document.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from analytics.serving.compare import Comparison, resolve_gamma
from analytics.serving.dvfs import GPU_DVFS, DvfsParams, energy_curve
from analytics.serving.engine import SimResult
from analytics.serving.params import POLICIES, STAGE_LABELS, STAGES, ServingParams
from analytics.serving.profiles import Profile


def timeseries(result: SimResult, trace: pd.DataFrame, bin_s: float = 60.0) -> pd.DataFrame:
    """Per-bin GPUs on (time-average), mean clock of powered-on GPUs (MHz), power (kW) and
    arrival rate (req/s).

    Returns a frame with ``t_min`` (bin start, minutes), ``gpus_on``, ``clock_mhz``,
    ``power_kw``, ``arrivals_per_s``.
    """
    seg = result.segments
    end = max(float(seg["t1_s"].max()) if len(seg) else 0.0, float(trace["arrival_s"].max()))
    edges = np.arange(0.0, end + bin_s, bin_s)
    on = np.zeros(len(edges) - 1)
    clk = np.zeros(len(edges) - 1)
    pw = np.zeros(len(edges) - 1)
    t0, t1 = seg["t0_s"].to_numpy(), seg["t1_s"].to_numpy()
    for k in range(len(edges) - 1):
        lo, hi = edges[k], edges[k + 1]
        ov = np.clip(np.minimum(t1, hi) - np.maximum(t0, lo), 0, None)
        on[k] = ov.sum() / bin_s
        pw[k] = (ov * seg["power_w"].to_numpy()).sum() / bin_s / 1000.0
        clk[k] = (ov * seg["clock_mhz"].to_numpy()).sum() / ov.sum() if ov.sum() else np.nan
    arrivals = np.histogram(trace["arrival_s"], edges)[0] / bin_s
    return pd.DataFrame({"t_min": edges[:-1] / 60.0, "gpus_on": on, "clock_mhz": clk,
                         "power_kw": pw, "arrivals_per_s": arrivals})


def latency_cdf(result: SimResult, metric: str = "ttft_ms", points: int = 50) -> pd.DataFrame:
    """Per-model latency CDF: ``model``, ``quantile``, ``value`` (ms) at ``points`` quantiles;
    unserved requests are left out of the CDF (they show in attainment)."""
    q = np.linspace(0, 1, points)
    rows = []
    for j, g in result.requests.groupby("model"):
        v = g[metric].dropna().to_numpy()
        if v.size:
            rows.append(pd.DataFrame({"model": j, "quantile": q, "value": np.quantile(v, q)}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["model", "quantile", "value"])


def profile_curves(profiles: list[Profile], gpu: str, batch: int = 32, n_clocks: int = 40,
                   gamma: float | None = None, static_scale: float = 1.0) -> pd.DataFrame:
    """Energy per token vs clock for each profile and phase (``model`` column added); ``gamma``
    None calibrates it (:func:`analytics.serving.compare.resolve_gamma`); ``static_scale``
    multiplies the static floor.

    Returns a frame as :func:`analytics.serving.dvfs.energy_curve` plus ``model``. Raises
    KeyError for a GPU kind without a :data:`analytics.serving.dvfs.GPU_DVFS` entry."""
    g = replace(GPU_DVFS[gpu], idle_w=GPU_DVFS[gpu].idle_w * static_scale)
    if gamma is None:
        gamma = resolve_gamma(ServingParams(gpu=gpu), profiles, g)[0].dvfs_gamma
    f = np.linspace(g.f_min_mhz, g.f_max_mhz, n_clocks)
    return pd.concat([energy_curve(p, g, f, batch, DvfsParams(gamma)).assign(model=p.model)
                      for p in profiles], ignore_index=True)


def to_json(comp: Comparison) -> dict:
    """The CLI document: ``policies`` (max_clock, static_dvfs, festina) and ``ablation`` stages,
    each ``energy_kwh``, ``ttft_attainment``, ``tbt_attainment`` plus context; the stages also
    carry their energy split and clock profile, ``ablation_steps`` what each stage changes
    (:func:`ablation_steps`), ``ablation_note`` why stage 3 saves what it does
    (:func:`stage3_note`), ``output_length_prediction`` the predictor the schedulers read and
    its measured mean error on the replay."""
    def doc(r: SimResult) -> dict:
        s = r.summary
        return {"energy_kwh": round(s["energy_kwh"], 6),
                "ttft_attainment": round(s["ttft_attainment"], 6),
                "tbt_attainment": round(s["tbt_attainment"], 6),
                "slo_attainment": round(s["slo_attainment"], 6),
                "mean_gpus_on": round(s["mean_gpus_on"], 3),
                "mean_clock_mhz": round(s["mean_clock_mhz"], 1),
                "served": s["served"], "requests": s["requests"]}

    res = comp.results
    out = {"policies": {k: doc(res[k]) for k in POLICIES if k in res},
           "ablation": {STAGE_LABELS[k]: doc(res[k]) | _clock_doc(res[k].summary)
                        for k in STAGES if k in res},
           "ablation_steps": ablation_steps(res)}
    note = stage3_note(res)
    if note:
        out["ablation_note"] = note
    if "festina" in res and "max_clock" in res:
        f, m = res["festina"].summary, res["max_clock"].summary
        out["festina_vs_max_clock"] = {
            "energy_saving": round(1 - f["energy_kwh"] / m["energy_kwh"], 4),
            "ttft_pp": round(100 * (f["ttft_attainment"] - m["ttft_attainment"]), 3),
            "tbt_pp": round(100 * (f["tbt_attainment"] - m["tbt_attainment"]), 3)}
    p = comp.params
    out["params"] = {"gpu": p.gpu, "n_gpus": p.n_gpus, "n_models": p.n_models,
                     "ttft_slo_ms": p.ttft_slo_ms, "tbt_slo_ms": p.tbt_slo_ms,
                     "safety_margin": p.safety_margin, "zipf_s": p.zipf_s, "seed": p.seed,
                     "window_s": p.window_s, "dvfs_gamma": p.dvfs_gamma, "kv_factor": p.kv_factor,
                     "static_scale": p.static_scale, "chunk_tokens": p.chunk_tokens,
                     "length_predictor": p.length_predictor, "length_error": p.length_error,
                     "length_quantile": p.length_quantile, "length_fit_s": p.length_fit_s,
                     "requests": int(len(comp.trace))}
    if comp.prediction:
        out["output_length_prediction"] = {
            "predictor": comp.prediction["predictor"],
            "mean_abs_error_pct": _num(100 * comp.prediction["mean_abs_error"], 3),
            "replay_starts_s": p.length_fit_s if p.length_predictor == "quantile" else 0.0}
    out["notes"] = list(comp.notes)
    out["models"] = sorted({s.model for s in comp.slots})
    return out


def _num(v: float, nd: int):
    """``v`` rounded, or None for NaN (strict JSON)."""
    return None if v is None or not np.isfinite(v) else round(float(v), nd)


def _clock_doc(s: dict) -> dict:
    """Energy split and how the clocks were set (:meth:`ServingEngine.clock_profile`)."""
    return {"prefill_kwh": _num(s["prefill_kwh"], 6), "decode_kwh": _num(s["decode_kwh"], 6),
            "static_busy_kwh": _num(s["static_busy_kwh"], 6), "idle_kwh": _num(s["idle_kwh"], 6),
            "prefill_clock_mhz": _num(s["prefill_clock_mhz"], 1),
            "decode_clock_mhz": _num(s["decode_clock_mhz"], 1),
            "clock_changes": int(s["clock_changes"]),
            "need_bound_share": _num(s["need_bound_share"], 4)}


def ablation_steps(res: dict[str, SimResult]) -> list[dict]:
    """What each ablation stage changes over the one before: ``stage``, ``energy_change_pct``
    (vs the previous stage), the change of each energy part (kWh: ``prefill``, ``decode``,
    ``static`` = static-while-busy + idle), ``slo_pp`` (attainment change, percentage points),
    and the stage's token-weighted ``prefill_clock_mhz`` / ``decode_clock_mhz``."""
    rows, prev = [], None
    for k in STAGES:
        if k not in res:
            continue
        s = res[k].summary
        if prev is not None:
            rows.append({
                "stage": STAGE_LABELS[k],
                "energy_change_pct": _num(100 * (s["energy_kwh"] / prev["energy_kwh"] - 1), 3),
                "prefill_kwh_change": _num(s["prefill_kwh"] - prev["prefill_kwh"], 6),
                "decode_kwh_change": _num(s["decode_kwh"] - prev["decode_kwh"], 6),
                "static_kwh_change": _num(s["static_busy_kwh"] + s["idle_kwh"]
                                          - prev["static_busy_kwh"] - prev["idle_kwh"], 6),
                "slo_pp": _num(100 * (s["slo_attainment"] - prev["slo_attainment"]), 3),
                "prefill_clock_mhz": _num(s["prefill_clock_mhz"], 1),
                "decode_clock_mhz": _num(s["decode_clock_mhz"], 1)})
        prev = s
    return rows


def stage3_note(res: dict[str, SimResult]) -> str | None:
    """Why ablation stage 3 (fine-grained runtime) saves what it saves over stage 2, with this
    run's figures; None when either stage was not run.

    Stage 3 differs from stage 2 in two places only: SM shares follow each busy tenant's SLO
    need, so where a need sets the clock the GPU runs at the *sum* of the needs instead of
    *n x the largest* (stage 2); and Eq. 9 weighs the energy-optimal clocks of co-resident busy
    phases instead of taking the highest. Where no SLO need sets the clock (loose SLOs) and
    co-resident phases prefer similar clocks, stage 2 already runs every phase at its
    energy-optimal clock and stage 3 has nothing left to save."""
    if "stage2" not in res or "stage3" not in res:
        return None
    s2, s3 = res["stage2"].summary, res["stage3"].summary
    change = s3["energy_kwh"] / s2["energy_kwh"] - 1
    nb = s3["need_bound_share"]
    share = "no" if not np.isfinite(nb) else f"{nb:.2%} of"
    return (f"Stage 3 (fine-grained runtime) changes energy by {change:+.2%} over stage 2 "
            f"({100 * (s3['slo_attainment'] - s2['slo_attainment']):+.2f} pp SLO attainment). "
            "It can save only where an SLO need sets the clock (shares by need then let the GPU "
            "run at the sum of the needs, not n x the largest) or where co-resident phases "
            "prefer different clocks (Eq. 9 weighs them instead of taking the highest). Here "
            f"the need set the clock in {share} stage 3's clock settings, and the "
            f"token-weighted clocks of stages 2 and 3 are prefill {s2['prefill_clock_mhz']:.0f}"
            f" vs {s3['prefill_clock_mhz']:.0f} MHz, decode {s2['decode_clock_mhz']:.0f} vs "
            f"{s3['decode_clock_mhz']:.0f} MHz.")
