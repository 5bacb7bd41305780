"""Serving profiles for the Festina what-ifs: nominal latency and power per (model, GPU kind) and
phase from benchmark rows (bench -> :class:`Profile`), and measured profile CSVs. How the clock and
the MPS SM share scale them is :mod:`analytics.serving.dvfs`.

Nominal numbers come from measured benchmark rows (``bench_runs``); the clock and SM-share
dependence comes from a documented DVFS model, or from a user's measured profile CSV.

Nominal (top clock, whole GPU), per model and GPU kind
------------------------------------------------------
* **decode**: ITL vs batch ``itl_ms(b) = a + c*b``, a least-squares line through the ML.ENERGY
  rows of that model on one GPU (``tp = n_gpus = 1``, text tasks; v3 rows where the GPU has them,
  else v2); decode power ``P_d(b)``: the same rows' ``power_w``, interpolated in log2(batch) and
  held flat outside the measured batches.
* **prefill**: throughput (prompt tokens/s) from the Argonne LLM-Inference-Bench TTFT table
  (Fig. 21: batch 16 x 1,024 prompt tokens, vLLM, one GPU): ``16*1024 / TTFT``, for
  ``meta-llama/Meta-Llama-3-8B`` on that GPU, scaled to other models by parameter count (prefill
  is compute-bound, ~2*params FLOPs per token). For a GPU without an Argonne row, the H100 row is
  scaled by the datasheet BF16 TFLOPs ratio (:data:`analytics.hardware.catalog.CATALOG`).
  Prefill power ``P_p``: no staged source measures prefill power on its own, so it is the highest
  decode power measured for the model on that GPU (the largest batch, where the GPU is
  compute-saturated) -- an approximation, stated in the UI.


Measured profiles (:func:`parse_measured_profiles`) replace the DVFS model: CSV columns
``model, gpu, phase, sm_share, clock_mhz, latency_ms, power_w`` (``model`` may be ``*`` for all
models on that GPU). The latency column is used as a **ratio** to its value at the table's top
clock and share 1 (the bench rows keep giving the batch / prompt-length dependence); the power
column is used as measured (W of the whole GPU at that share, clock and phase).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import polars as pl

from analytics.config import SYNTHETIC_SOURCE
from analytics.hardware import catalog as hardware
from analytics.ingest.csvcheck import ROW, FormatError, check_allowed, check_range, read_csv_checked
from analytics.serving.dvfs import GPU_DVFS

#: Argonne TTFT reference model (Fig. 21 table) and its parameter count (billions)
PREFILL_REF_MODEL = "meta-llama/Meta-Llama-3-8B"
PREFILL_REF_PARAMS_B = 8.0
#: the synthetic demo's 8 B model (:mod:`analytics.ingest.demo`), the prefill reference of a
#: store that holds no measured one
SYNTHETIC_PREFILL_MODEL = "synthetic/dense-8b"
TEXT_TASKS = ("lm-arena-chat", "chat", "code", "gpqa", "sourcegraph-fim")


@dataclass(frozen=True)
class Profile:
    """Nominal-clock profile of one model on one GPU kind (see module docstring for sources).

    Attributes
    ----------
    model : bench model id
    gpu : hardware key
    params_b : parameters, billions
    weights_gb : bytes of weights / 1e9 (params x effective bits / 8)
    itl_a_ms, itl_c_ms : decode ITL line ``a + c*batch`` (ms) at the top clock, whole GPU
    dec_batches, dec_power_w : measured decode power (W) at those batch sizes
    prefill_tok_s : prompt tokens per second at the top clock, whole GPU
    prefill_power_w : W while prefilling (highest measured power of the model on that GPU)
    t_mem_ms : weights / memory bandwidth (ms): memory-bound floor of one decode iteration
    max_batch : largest measured batch (concurrency cap per replica)
    rows : which bench rows were used (for citation in the UI)
    """

    model: str
    gpu: str
    params_b: float
    weights_gb: float
    itl_a_ms: float
    itl_c_ms: float
    dec_batches: tuple[float, ...]
    dec_power_w: tuple[float, ...]
    prefill_tok_s: float
    prefill_power_w: float
    t_mem_ms: float
    max_batch: int
    rows: str = ""
    measured: dict = field(default_factory=dict, compare=False, hash=False)

    def itl_nom_ms(self, batch):
        """Decode ITL (ms) at the top clock and whole GPU for ``batch`` (scalar: a float, or
        array)."""
        return self._itl(batch) if _is_array(batch) else self.batch_terms(batch)[0]

    def mem_fraction(self, batch):
        """Memory-bound fraction ``m(b)`` of one decode iteration (roofline, capped at 0.95)."""
        return self._mem(batch) if _is_array(batch) else self.batch_terms(batch)[1]

    def decode_power_nom_w(self, batch):
        """Measured decode power (W) at ``batch``, log2-interpolated, flat outside the rows."""
        return self._pow(batch) if _is_array(batch) else self.batch_terms(batch)[2]

    def batch_terms(self, batch) -> tuple[float, float, float]:
        """(ITL ms, ``m(b)``, decode W) at a scalar ``batch``: the array formulas' values,
        computed once per batch size and kept on the profile (the serving simulator asks for the
        same few batch sizes millions of times; the values are bit-identical to the formulas)."""
        memo = self.__dict__.get("_batch_memo")
        if memo is None:
            memo = {}
            object.__setattr__(self, "_batch_memo", memo)  # frozen dataclass: a private cache
        row = memo.get(batch)
        if row is None:
            row = (float(self._itl(batch)), float(self._mem(batch)), float(self._pow(batch)))
            if len(memo) < 100_000:
                memo[batch] = row
        return row

    def _itl(self, batch):
        return self.itl_a_ms + self.itl_c_ms * np.asarray(batch, dtype=float)

    def _mem(self, batch):
        return np.minimum(0.95, self.t_mem_ms / self._itl(batch))

    def _pow(self, batch):
        return np.interp(np.log2(np.maximum(np.asarray(batch, dtype=float), 1.0)),
                         np.log2(self.dec_batches), self.dec_power_w)


def _is_array(x) -> bool:
    return not isinstance(x, (int, float, np.integer, np.floating))


# --------------------------------------------------------------------------- from bench rows
def available_gpus(bench: pd.DataFrame) -> list[str]:
    """GPU kinds with a cited DVFS entry and at least one usable single-GPU ML.ENERGY model."""
    out = []
    for key in GPU_DVFS:
        try:
            if _model_rows(bench, key):
                out.append(key)
        except ValueError:
            continue
    return out


def _model_rows(bench: pd.DataFrame, gpu: str) -> dict[str, pd.DataFrame]:
    source = bench["source"].astype(str)
    b = bench[(bench["hardware"] == gpu) & (bench["n_gpus"] == 1) & (bench["tp"] == 1)
              & (source.str.startswith("ML.ENERGY") | (source == SYNTHETIC_SOURCE))
              & bench["task"].isin(TEXT_TASKS) & bench["itl_ms"].notna()
              & bench["power_w"].notna() & bench["concurrency"].notna()
              & bench["params_b"].notna() & (bench["precision"].isin(["bf16", "fp16"]))]
    if b.empty:
        return {}
    # the newest leaderboard the GPU has (v3 for H100/B200, v2 for A100): one methodology; the
    # synthetic demo's grid only where no measured leaderboard has the GPU
    measured = sorted(set(b["source"]) - {SYNTHETIC_SOURCE})
    src = measured[-1] if measured else SYNTHETIC_SOURCE
    b = b[b["source"] == src]
    out = {}
    for model, rows in b.groupby("model"):
        # one task per model: the one with most batch sizes (chat before reasoning on ties)
        task = rows.groupby("task").size().sort_index().idxmax()
        r = rows[rows["task"] == task].sort_values("concurrency")
        r = r.drop_duplicates("concurrency")
        if len(r) >= 3:
            out[model] = r
    return out


def prefill_reference(bench: pd.DataFrame, gpu: str) -> tuple[float, str]:
    """Prefill tokens/s of the reference model on ``gpu`` from the Argonne TTFT table.

    Returns ``(tokens_per_s, citation)``. Raises ValueError when neither the GPU nor H100 has a
    TTFT row (ingest ``llm_inference_bench_argonne/Fig_21__all_results_TTFT.csv``).
    """
    t = bench[bench["ttft_ms"].notna() & (bench["framework"] == "vLLM")
              & (bench["model"] == PREFILL_REF_MODEL) & (bench["n_gpus"] == 1)
              & bench["in_len"].notna() & bench["concurrency"].notna()]
    if t.empty:  # the synthetic demo's 8 B model stands in, only when nothing measured does
        t = bench[(bench["source"] == SYNTHETIC_SOURCE) & (bench["model"] == SYNTHETIC_PREFILL_MODEL)
                  & (bench["n_gpus"] == 1) & bench["ttft_ms"].notna()]
    own = t[t["hardware"] == gpu]
    if not own.empty:
        r = own.iloc[0]
        tok_s = r["concurrency"] * r["in_len"] / (r["ttft_ms"] / 1000.0)
        if r["source"] == SYNTHETIC_SOURCE:
            return float(tok_s), (f"SYNTHETIC {r['dataset']}: {gpu} {r['model']} batch "
                                  f"{r['concurrency']:.0f} x {r['in_len']:.0f} tokens, TTFT "
                                  f"{r['ttft_ms']:.1f} ms (roofline model, not measured)")
        return float(tok_s), (f"Argonne {r['dataset']}: {gpu} vLLM {PREFILL_REF_MODEL} batch "
                              f"{r['concurrency']:.0f} x {r['in_len']:.0f} tokens, TTFT "
                              f"{r['ttft_ms']:.1f} ms")
    ref = t[t["hardware"] == "H100-80GB"]
    if ref.empty:
        raise ValueError(
            f"no prefill (TTFT) benchmark row for {gpu} or H100: ingest the Argonne "
            "LLM-Inference-Bench TTFT table (Fig_21__all_results_TTFT.csv) on the Data page or "
            "with `headroom ingest`")
    r = ref.iloc[0]
    ratio = hardware.CATALOG[gpu].bf16_tflops / hardware.CATALOG["H100-80GB"].bf16_tflops
    tok_s = r["concurrency"] * r["in_len"] / (r["ttft_ms"] / 1000.0) * ratio
    return float(tok_s), (f"Argonne {r['dataset']}: H100 vLLM {PREFILL_REF_MODEL} TTFT "
                          f"{r['ttft_ms']:.1f} ms, scaled by BF16 TFLOPs {ratio:.2f}")


def profiles_from_bench(bench: pd.DataFrame, gpu: str) -> list[Profile]:
    """One :class:`Profile` per usable ML.ENERGY model on ``gpu`` (sorted by model id).

    Raises
    ------
    ValueError
        ``gpu`` has no cited DVFS entry, no usable single-GPU ML.ENERGY rows, or no prefill row;
        the message says which file to ingest.
    """
    if gpu not in GPU_DVFS:
        raise ValueError(f"{gpu}: no cited clock range / idle power; choose one of "
                         f"{sorted(GPU_DVFS)}")
    rows = _model_rows(bench, gpu)
    if not rows:
        raise ValueError(
            f"no single-GPU ML.ENERGY text-generation rows for {gpu}: ingest "
            "ml_energy/leaderboard_v3/all_task_configurations_flat.csv (H100) or "
            "ml_energy/leaderboard_v2/llm_text_generation_runs.csv (A100) on the Data page or "
            "with `headroom ingest`")
    ref_tok_s, ref_cite = prefill_reference(bench, gpu)
    spec = hardware.CATALOG[gpu]
    out = []
    for model, r in sorted(rows.items()):
        bsz = r["concurrency"].to_numpy(float)
        itl = r["itl_ms"].to_numpy(float)
        lin = bsz <= 256 if (bsz <= 256).sum() >= 2 else np.ones_like(bsz, bool)
        c, a = np.polyfit(bsz[lin], itl[lin], 1)
        a = max(a, 1e-3)
        params_b = float(r["params_b"].iloc[0])
        bits = hardware.PRECISION_BITS.get(str(r["precision"].iloc[0]), 16.0)
        weights_gb = params_b * bits / 8.0
        power = r["power_w"].to_numpy(float)
        out.append(Profile(
            model=model, gpu=gpu, params_b=params_b, weights_gb=weights_gb,
            itl_a_ms=float(a), itl_c_ms=float(max(c, 0.0)),
            dec_batches=tuple(bsz), dec_power_w=tuple(power),
            prefill_tok_s=ref_tok_s * PREFILL_REF_PARAMS_B / params_b,
            prefill_power_w=float(power.max()),
            t_mem_ms=weights_gb / spec.mem_bw_gbs * 1000.0,
            max_batch=int(bsz.max()),
            rows=(f"{r['source'].iloc[0]} {r['dataset'].iloc[0]}: {model} on {gpu}, task "
                  f"{r['task'].iloc[0]}, batches {', '.join(f'{x:.0f}' for x in bsz)}; "
                  f"prefill: {ref_cite}"),
        ))
    return out


# --------------------------------------------------------------------------- measured CSV
MEASURED_COLUMNS = ("model", "gpu", "phase", "sm_share", "clock_mhz", "latency_ms", "power_w")


class ProfileError(ValueError):
    """A measured-profile CSV is invalid; the message names the line and column."""


def parse_measured_profiles(data: bytes, display: str = "profile.csv") -> pd.DataFrame:
    """Read a measured-profile CSV (columns :data:`MEASURED_COLUMNS`) into a DataFrame.

    Raises
    ------
    ProfileError
        Missing column, non-numeric / non-positive value, unknown phase or share outside (0, 1],
        naming ``display``, the line and the column.
    """
    try:  # the one CSV validator of headroom (analytics.ingest.csvcheck)
        frame = read_csv_checked(data, display, {
            "model": pl.String, "gpu": pl.String, "phase": pl.String, "sm_share": pl.Float64,
            "clock_mhz": pl.Float64, "latency_ms": pl.Float64, "power_w": pl.Float64})
        check_allowed(frame, "phase", ("prefill", "decode"), display)
        check_range(frame, "sm_share", display, low=0, high=1, low_open=True)
        check_range(frame, ["clock_mhz", "latency_ms", "power_w"], display, low=0,
                    low_open=True)
    except FormatError as exc:
        raise ProfileError(str(exc)) from exc
    if frame.height == 0:
        raise ProfileError(f"{display}: line 2, column model: no profile rows")
    out = frame.drop(ROW).to_pandas()
    out["gpu"] = [hardware.normalise(g) for g in out["gpu"]]
    return out[list(MEASURED_COLUMNS)]


def apply_measured(profiles: list[Profile], measured: pd.DataFrame | None) -> list[Profile]:
    """Profiles with measured (clock, share) tables attached where a CSV row matches.

    Rows match on ``gpu`` and ``model`` (``*`` = every model on that GPU). Latency is stored as
    the ratio to the row at the table's top clock and largest share.
    """
    if measured is None or measured.empty:
        return profiles
    hit = measured["model"].eq("*") | measured["model"].isin({p.model for p in profiles})
    hit &= measured["gpu"].isin({p.gpu for p in profiles})
    if not hit.any():
        raise ProfileError(
            "the measured profile matches no benchmarked model: its rows name "
            f"{', '.join(sorted(set(measured['model'])))} on "
            f"{', '.join(sorted(set(measured['gpu'])))}; the pool has "
            f"{', '.join(sorted({p.gpu for p in profiles}))} with "
            f"{', '.join(p.model for p in profiles)} (use model * for all)")
    out = []
    for p in profiles:
        m = measured[(measured["gpu"] == p.gpu)
                     & ((measured["model"] == p.model) | (measured["model"] == "*"))]
        if (m["model"] == p.model).any():
            m = m[m["model"] == p.model]
        tabs = {}
        for phase, g in m.groupby("phase"):
            top = g[(g["clock_mhz"] == g["clock_mhz"].max())]
            top = top[top["sm_share"] == top["sm_share"].max()]
            ref = float(top["latency_ms"].iloc[0])
            pts = g[["sm_share", "clock_mhz"]].to_numpy(float)
            tabs[phase] = {"lat": (pts, g["latency_ms"].to_numpy(float) / ref),
                           "pow": (pts, g["power_w"].to_numpy(float))}
        if tabs:
            p = Profile(**{**{k: getattr(p, k) for k in p.__dataclass_fields__ if k != "measured"},
                           "rows": p.rows + "; measured profile: " + ", ".join(sorted(tabs))},
                        measured=tabs)
        out.append(p)
    return out
