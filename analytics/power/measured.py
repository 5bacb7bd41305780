"""Measured inputs of the hybrid power simulator, baked so the app runs without the staged files
(the tests re-derive them): the LLM serving templates (ML.ENERGY v3), the AcmeTrace per-GPU
batch power distribution, the A100 -> H100 hardware factor, and per-job batch power draws.

Method source: Mural, Yu & Xie, "Workload composition smooths aggregate power demand while
sustaining short-horizon ramps in AI data centers" (the *hybrid power paper*), Methods,
"Workload characteristics" and "Batch-inference co-simulation".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analytics.hardware.catalog import CATALOG


@dataclass(frozen=True)
class LLMTemplate:
    """One representative LLM serving configuration (hybrid power paper, Methods, "Workload
    characteristics": GPUs per serving instance and an effective power per active request).

    Attributes
    ----------
    model : model id as in ML.ENERGY
    max_num_seqs : vLLM maximum batch size of the configuration (the speed setting)
    gpus : GPUs per serving instance
    throughput_tok_s : output tokens per second of one instance at that setting
    power_w : average power of one instance (all its GPUs) at that throughput, W
    energy_per_token_j : J per output token (= power_w / throughput_tok_s)
    median_itl_ms : median inter-token latency, ms (orders the speed settings)
    """

    model: str
    max_num_seqs: int
    gpus: int
    throughput_tok_s: float
    power_w: float
    energy_per_token_j: float
    median_itl_ms: float


#: ML.ENERGY Benchmark v3 (``ml-energy/leaderboard`` public data, ``all_task_configurations_flat
#: .csv``), task ``lm-arena-chat``, ``gpu_model`` H100, ``weight_precision`` bfloat16. For each of
#: seven models the row with the given ``max_num_seqs`` and the fewest GPUs is used (speed F = 32,
#: M = 64, S = 128 sequences; inter-token latency grows with the batch). Fields: num_gpus,
#: output_throughput_tokens_per_sec, avg_power_watts, energy_per_token_joules, median_itl_ms.
#: :func:`templates_from_mlenergy` re-derives this table from the file.
TEMPLATE_MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B",
                   "google/gemma-3-12b-it", "Qwen/Qwen3-32B", "google/gemma-3-27b-it",
                   "meta-llama/Llama-3.1-70B-Instruct")
SPEEDS = {"F": 32, "M": 64, "S": 128}
_T = LLMTemplate
TEMPLATES: dict[str, tuple[LLMTemplate, ...]] = {
    "F": (_T(TEMPLATE_MODELS[0], 32, 1, 3391.07, 559.71, 0.16506, 8.907),
          _T(TEMPLATE_MODELS[1], 32, 1, 2927.93, 478.08, 0.16328, 10.569),
          _T(TEMPLATE_MODELS[2], 32, 1, 2023.23, 493.87, 0.24410, 15.014),
          _T(TEMPLATE_MODELS[3], 32, 1, 1786.62, 483.82, 0.27080, 17.485),
          _T(TEMPLATE_MODELS[4], 32, 1, 960.54, 599.37, 0.62399, 28.807),
          _T(TEMPLATE_MODELS[5], 32, 1, 1088.16, 571.45, 0.52515, 28.285),
          _T(TEMPLATE_MODELS[6], 32, 4, 1486.67, 1794.22, 1.20688, 20.047)),
    "M": (_T(TEMPLATE_MODELS[0], 64, 1, 5147.15, 610.35, 0.11858, 11.500),
          _T(TEMPLATE_MODELS[1], 64, 1, 4314.68, 514.39, 0.11922, 13.950),
          _T(TEMPLATE_MODELS[2], 64, 1, 3140.32, 524.98, 0.16717, 18.936),
          _T(TEMPLATE_MODELS[3], 64, 1, 2691.36, 540.52, 0.20084, 22.892),
          _T(TEMPLATE_MODELS[4], 64, 2, 2653.82, 974.14, 0.36707, 22.446),
          _T(TEMPLATE_MODELS[5], 64, 2, 2653.71, 1029.70, 0.38802, 22.763),
          _T(TEMPLATE_MODELS[6], 64, 4, 2510.51, 2001.50, 0.79725, 22.432)),
    "S": (_T(TEMPLATE_MODELS[0], 128, 1, 7036.53, 669.24, 0.09511, 16.482),
          _T(TEMPLATE_MODELS[1], 128, 1, 5930.30, 573.01, 0.09662, 20.701),
          _T(TEMPLATE_MODELS[2], 128, 1, 4474.35, 572.08, 0.12786, 26.164),
          _T(TEMPLATE_MODELS[3], 128, 1, 3545.60, 588.97, 0.16611, 34.727),
          _T(TEMPLATE_MODELS[4], 128, 2, 3905.31, 1073.71, 0.27493, 29.656),
          _T(TEMPLATE_MODELS[5], 128, 2, 3714.02, 1137.07, 0.30616, 31.996),
          _T(TEMPLATE_MODELS[6], 128, 4, 3876.27, 2183.76, 0.56337, 27.868)),
}
del _T

#: AcmeTrace (Hu et al., NSDI'24; ``InternLM/AcmeTrace`` ``data/utilization/util_pkl/
#: gpu_power_kalos.pkl``, staged as ``acmetrace/acme_power_util_cdf.csv``): per-GPU DCGM
#: ``POWER_USAGE`` of the Kalos cluster (A100-SXM4-80GB), W, at CDF percentiles 0, 5, ..., 100.
#: The distribution pools every sampled GPU (busy and idle phases of jobs, and idle GPUs), so it
#: has an idle mode near 60-100 W and a busy mode near 320-440 W.
ACME_PCT = tuple(float(p) for p in range(0, 101, 5))
ACME_KALOS_POWER_W = (55.7, 61.9, 63.0, 63.9, 65.0, 66.4, 72.9, 90.4, 94.0, 96.9, 101.4, 119.8,
                      148.7, 236.4, 325.3, 371.8, 388.7, 396.7, 403.6, 413.0, 599.7)


#: Hardware adjustment of batch power to the H100 baseline of the inference measurements (hybrid
#: power paper, Methods, "Batch-inference co-simulation": batch GPU power times a constant factor).
#: Here the ratio of board power limits, H100 SXM 700 W / A100 SXM4 400 W (datasheets, see
#: :data:`analytics.hardware.catalog.CATALOG`) = 1.75, because AcmeTrace's GPUs are A100s (the paper
#: scaled V100 traces the same way).
HW_FACTOR_A100_TO_H100 = CATALOG["H100-80GB"].tdp_w / CATALOG["A100-80GB"].tdp_w


def templates_from_mlenergy(path: str | Path, speed: str = "M",
                            models: tuple[str, ...] = TEMPLATE_MODELS) -> tuple[LLMTemplate, ...]:
    """Read the LLM templates from ML.ENERGY v3's flattened task-configuration CSV.

    Parameters
    ----------
    path : ``leaderboard_v3/all_task_configurations_flat.csv``
    speed : ``"F"``, ``"M"`` or ``"S"`` (``max_num_seqs`` 32, 64, 128)
    models : model ids, in the order wanted

    Returns
    -------
    tuple of LLMTemplate, one per model: the H100 / bfloat16 / ``lm-arena-chat`` row with that
    ``max_num_seqs`` and the fewest GPUs (ties: highest throughput).

    Raises
    ------
    KeyError
        Unknown speed, or a model without such a row.
    """
    import polars as pl  # optional reader, only to re-derive the baked table

    seqs = SPEEDS[speed]
    frame = pl.read_csv(path, infer_schema_length=10_000).filter(
        (pl.col("task") == "lm-arena-chat") & (pl.col("gpu_model") == "H100")
        & (pl.col("weight_precision") == "bfloat16") & (pl.col("max_num_seqs") == seqs))
    out = []
    for model in models:
        rows = frame.filter(pl.col("model_id") == model).sort(
            ["num_gpus", "output_throughput_tokens_per_sec"], descending=[False, True])
        if rows.height == 0:
            raise KeyError(f"{model}: no H100 bfloat16 lm-arena-chat row with max_num_seqs {seqs}")
        r = rows.row(0, named=True)
        out.append(LLMTemplate(model, seqs, int(r["num_gpus"]),
                               float(r["output_throughput_tokens_per_sec"]),
                               float(r["avg_power_watts"]), float(r["energy_per_token_joules"]),
                               float(r["median_itl_ms"])))
    return tuple(out)


def acme_power_quantiles(cdf: pd.DataFrame, cluster: str = "Kalos",
                         pct: tuple[float, ...] = ACME_PCT) -> np.ndarray:
    """Per-GPU power (W) of an AcmeTrace cluster at the given CDF percentiles.

    Parameters
    ----------
    cdf : ``reference_cdf`` rows (``cluster``, ``metric``, ``cdf_percent``, ``value``), e.g.
        :func:`analytics.store.reference_cdfs` after ingesting ``acme_power_util_cdf.csv``
    cluster : ``"Kalos"`` or ``"Seren"``

    Returns
    -------
    ndarray of shape (len(pct),), W, linearly interpolated in the CDF.

    Raises
    ------
    KeyError
        The frame has no ``gpu_power_watts`` rows for that cluster.
    """
    rows = cdf[(cdf["cluster"] == cluster) & (cdf["metric"] == "gpu_power_watts")]
    if rows.empty:
        raise KeyError(f"no AcmeTrace gpu_power_watts CDF for cluster {cluster!r}")
    rows = rows.sort_values("cdf_percent")
    return np.interp(np.asarray(pct), rows["cdf_percent"].to_numpy(float),
                     rows["value"].to_numpy(float))


def sample_batch_power(rng: np.random.Generator, n: int,
                       pct: tuple[float, ...] | np.ndarray = ACME_PCT,
                       power_w: tuple[float, ...] | np.ndarray = ACME_KALOS_POWER_W,
                       hw_factor: float = HW_FACTOR_A100_TO_H100) -> np.ndarray:
    """Draw each batch job's power per active GPU: inverse-CDF sampling of the AcmeTrace
    distribution times the hardware factor.

    Returns
    -------
    ndarray of shape (n,), W per GPU on the H100 scale.

    >>> p = sample_batch_power(np.random.default_rng(0), 4)
    >>> bool(((p >= 55.7 * 1.75) & (p <= 599.7 * 1.75)).all())
    True
    """
    return np.interp(rng.random(n) * 100.0, np.asarray(pct, float),
                     np.asarray(power_w, float)) * hw_factor


