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
    each ``energy_kwh``, ``ttft_attainment``, ``tbt_attainment`` plus context."""
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
           "ablation": {STAGE_LABELS[k]: doc(res[k]) for k in STAGES if k in res}}
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
                     "requests": int(len(comp.trace))}
    out["notes"] = list(comp.notes)
    out["models"] = sorted({s.model for s in comp.slots})
    return out
