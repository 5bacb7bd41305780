"""Serving profiles for the Festina what-ifs: latency and power per (model, GPU kind) and phase,
as functions of the SM clock and the MPS SM share.

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
  scaled by the datasheet BF16 TFLOPs ratio (:data:`analytics.hardware.catalog.SPECS`).
  Prefill power ``P_p``: no staged source measures prefill power on its own, so it is the highest
  decode power measured for the model on that GPU (the largest batch, where the GPU is
  compute-saturated) -- an approximation, stated in the UI.

DVFS model (``x = f / f_max``, SM share ``s``)
----------------------------------------------
* prefill time ``T_p(x, s) = T_p,nom / (x*s)`` (compute-bound: Festina Sec. 2 / Fig. 3;
  throughput proportional to SM clock and SM count).
* decode ITL ``T_d(b, x, s) = T_d,nom(b) * (m(b) + (1 - m(b)) / (x*s))``: the memory-bound part
  does not speed up with the SM clock. ``m(b) = min(0.95, t_mem / T_d,nom(b))`` with ``t_mem`` =
  bytes of weights / datasheet memory bandwidth (roofline: reading all weights once per
  iteration), so ``m`` is derived from the bench row and the datasheet, not chosen.
* power ``P = P_idle + s * (P_phase,nom - P_idle) * (m + (1 - m) * x**gamma)``: a static floor
  (the measured power of a powered-on GPU that holds a model but computes nothing,
  :data:`GPU_DVFS`) plus a dynamic part. Of the dynamic part, the memory-bound share ``m`` (the
  same roofline ``m(b)`` as the decode time; 0 for prefill) is HBM traffic, which does not
  follow the SM clock; the rest is SM power ``~ f**gamma`` (CMOS ``C V^2 f`` with ``V ~ f``:
  gamma = 3). No staged source measures power against the SM clock, so ``gamma`` is
  **calibrated** (:func:`calibrate_gamma`) to a published measurement: SM clock locking recovers
  *up to 32 %* of decode energy on Hopper (:data:`DECODE_SAVING_CITE`, H200; memory-bound decode
  "leaves power headroom untouched"). ``gamma`` is chosen so the largest decode-energy saving the
  model predicts over the measured batches of the dense profiles equals that 32 %. On the staged
  ML.ENERGY v3 H100 rows this lands at gamma = 3.0, the textbook value, so the memory split and
  the measurement agree. Without the memory split the same calibration needs gamma ~ 1.2, which
  makes prefill energy fall monotonically with the clock, contradicting Festina Fig. 3. Any other
  value can be passed; :func:`analytics.serving.engine.sensitivity` shows how the headline moves.

Energy per token is ``P * T``: the static floor times a time that grows as ``1/x`` against a
dynamic part that shrinks as ``x**gamma`` gives the U-shaped energy-vs-clock curve of
Festina Fig. 3 (:func:`energy_curve`).

Measured profiles (:func:`parse_measured_profiles`) replace the DVFS model: CSV columns
``model, gpu, phase, sm_share, clock_mhz, latency_ms, power_w`` (``model`` may be ``*`` for all
models on that GPU). The latency column is used as a **ratio** to its value at the table's top
clock and share 1 (the bench rows keep giving the batch / prompt-length dependence); the power
column is used as measured (W of the whole GPU at that share, clock and phase).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analytics.hardware import catalog as hardware


@dataclass(frozen=True)
class GpuDvfs:
    """Clock range and static power of one GPU kind (all cited).

    Attributes
    ----------
    key : hardware key (``bench_runs.hardware``)
    f_max_mhz : top SM clock, MHz
    f_min_mhz : lowest clock the policies may choose, MHz
    idle_w : power of a powered-on GPU holding model weights but computing nothing, W
    pcie_gbs : host-to-device bandwidth for loading weights, GB/s (one direction)
    sources : (field, citation) pairs
    """

    key: str
    f_max_mhz: float
    f_min_mhz: float
    idle_w: float
    pcie_gbs: float
    sources: tuple[tuple[str, str], ...]


_HOPPER_CLOCK = ("nvidia-smi -q -d CLOCK on an H200 (Hopper GH100, same SM clock table as H100 "
                 "SXM): Max Clocks Graphics 1980 MHz, idle clock 345 MHz "
                 "(github.com/awslabs/amazon-eks-ami pull #1985, 2024-10-01)")
_H100_IDLE = ("nvidia-smi on 'NVIDIA H100 80GB HBM3' with 72,790 MiB resident and 0 % utilisation: "
              "140-145 W (github.com/wilicc/gpu-burn issue #114, 2024-10-25)")
_A100_IDLE = ("AcmeTrace (InternLM, NSDI'24; staged acmetrace/acme_power_util_cdf.csv): Kalos "
              "A100 per-GPU DCGM power, 1st percentile 60.2 W")
_A100_CLOCK = ("A100 SXM4 nvidia-smi supported graphics clocks top out at 1410 MHz "
               "(github.com/1Panel-dev/1Panel issue #11910); no staged source states its floor, "
               "so the Hopper floor (345 MHz) is reused -- a parameter")
_PCIE5 = "NVIDIA H100 datasheet: PCIe Gen5 128 GB/s (bidirectional) -> 64 GB/s one way"
_PCIE4 = "NVIDIA A100 datasheet: PCIe Gen4 64 GB/s (bidirectional) -> 32 GB/s one way"

#: GPU kinds with a cited clock range and static power (others need these given explicitly).
GPU_DVFS: dict[str, GpuDvfs] = {g.key: g for g in (
    GpuDvfs("H100-80GB", 1980, 345, 140, 64, (("clock", _HOPPER_CLOCK), ("idle_w", _H100_IDLE),
                                              ("pcie", _PCIE5))),
    GpuDvfs("A100-40GB", 1410, 345, 60.2, 32, (("clock", _A100_CLOCK), ("idle_w", _A100_IDLE),
                                               ("pcie", _PCIE4))),
)}

#: Argonne TTFT reference model (Fig. 21 table) and its parameter count (billions)
PREFILL_REF_MODEL = "meta-llama/Meta-Llama-3-8B"
PREFILL_REF_PARAMS_B = 8.0
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
        """Decode ITL (ms) at the top clock and whole GPU for ``batch`` (scalar or array)."""
        return self.itl_a_ms + self.itl_c_ms * np.asarray(batch, dtype=float)

    def mem_fraction(self, batch):
        """Memory-bound fraction ``m(b)`` of one decode iteration (roofline, capped at 0.95)."""
        return np.minimum(0.95, self.t_mem_ms / self.itl_nom_ms(batch))

    def decode_power_nom_w(self, batch):
        """Measured decode power (W) at ``batch``, log2-interpolated, flat outside the rows."""
        return np.interp(np.log2(np.maximum(np.asarray(batch, dtype=float), 1.0)),
                         np.log2(self.dec_batches), self.dec_power_w)


@dataclass(frozen=True)
class DvfsParams:
    """Parameters of the DVFS model that no staged source pins down.

    ``gamma``: exponent of the SM part of dynamic power, ``~ f**gamma``. The default 3 is the
    CMOS textbook value (and what :func:`calibrate_gamma` finds on the staged H100 rows);
    simulations calibrate it unless a value is given.
    """

    gamma: float = 3.0


#: Largest decode-energy saving from SM clock locking measured on Hopper (fraction).
DECODE_SAVING_TARGET = 0.32
DECODE_SAVING_CITE = ("Ma, Afzal, Eitzinger & Wellein, The Illusion of Power Capping in LLM "
                      "Decode, arXiv 2605.11999 (2026): on NVIDIA H200, SM clock locking "
                      "recovers up to 32 % of decode energy at minimal throughput loss")


# --------------------------------------------------------------------------- DVFS model
def _interpolator(pts: np.ndarray, vals: np.ndarray):
    """A callable ``q (N, 2) -> (N,)`` over (sm_share, clock) points: linear inside the convex
    hull, nearest outside (scipy's triangulation is built once, not per query); 1-D linear when
    the table varies along one axis only."""
    from scipy.interpolate import LinearNDInterpolator, NearestNDInterpolator

    if len(np.unique(pts[:, 0])) > 1 and len(np.unique(pts[:, 1])) > 1:
        lin, near = LinearNDInterpolator(pts, vals), NearestNDInterpolator(pts, vals)

        def f(q):
            out = lin(q)
            bad = np.isnan(out)
            if bad.any():
                out[bad] = near(q[bad])
            return out
        return f
    axis = 1 if len(np.unique(pts[:, 1])) > 1 else 0
    order = np.argsort(pts[:, axis])
    xs, ys = pts[order, axis], vals[order]
    return lambda q: np.interp(q[:, axis], xs, ys)


def _measured_ratio(prof: Profile, phase: str, f_mhz, share, what: str):
    tab = prof.measured.get(phase)
    if tab is None:
        return None
    fn = tab.get(what + "_fn")
    if fn is None:
        fn = tab[what + "_fn"] = _interpolator(*tab[what])
    q = np.column_stack([a.ravel() for a in np.broadcast_arrays(np.asarray(share, float),
                                                                np.asarray(f_mhz, float))])
    return fn(q).reshape(np.broadcast(np.asarray(share), np.asarray(f_mhz)).shape)


def measured_clock_floor(profiles: list[Profile]) -> float | None:
    """Lowest clock (MHz) every measured table covers (the largest of the tables' lowest
    clocks), or None without measured tables. Below it a table could only be extrapolated."""
    lows = [float(tab["lat"][0][:, 1].min()) for p in profiles for tab in p.measured.values()]
    return max(lows) if lows else None


def prefill_time_s(prof: Profile, gpu: GpuDvfs, tokens, f_mhz, share=1.0):
    """Prefill time (s) of ``tokens`` prompt tokens at clock ``f_mhz`` with SM share ``share``.

    Model: compute-bound, ``tokens / (prefill_tok_s * x * share)`` with ``x = f/f_max``; a
    measured profile replaces ``1/(x*share)`` by its latency ratio.
    """
    r = _measured_ratio(prof, "prefill", f_mhz, share, "lat")
    scale = r if r is not None else 1.0 / ((np.asarray(f_mhz) / gpu.f_max_mhz) * share)
    return np.asarray(tokens, dtype=float) / prof.prefill_tok_s * scale


def decode_itl_s(prof: Profile, gpu: GpuDvfs, batch, f_mhz, share=1.0):
    """Decode iteration time (s) for ``batch`` sequences: ``T_nom(b) (m + (1-m)/(x s))``."""
    nom = prof.itl_nom_ms(batch) / 1000.0
    r = _measured_ratio(prof, "decode", f_mhz, share, "lat")
    if r is not None:
        return nom * r
    m = prof.mem_fraction(batch)
    return nom * (m + (1.0 - m) / ((np.asarray(f_mhz) / gpu.f_max_mhz) * share))


def dynamic_power_w(prof: Profile, gpu: GpuDvfs, phase: str, batch, f_mhz, share,
                    params: DvfsParams = DvfsParams()):
    """Power (W) above the static floor drawn by one tenant in ``phase`` (``"prefill"`` or
    ``"decode"``): ``share * (P_nom - P_idle) * (m + (1 - m) x**gamma)`` with ``m = m(batch)``
    for decode and 0 for prefill (module docstring), or measured ``P(f, s) - P_idle``."""
    r = _measured_ratio(prof, phase, f_mhz, share, "pow")
    if r is not None:
        return np.maximum(r - gpu.idle_w, 0.0)
    x = np.asarray(f_mhz, dtype=float) / gpu.f_max_mhz
    if phase == "prefill":
        return share * max(prof.prefill_power_w - gpu.idle_w, 0.0) * x ** params.gamma
    m = prof.mem_fraction(batch)
    dyn = np.maximum(prof.decode_power_nom_w(batch) - gpu.idle_w, 0.0)
    return share * dyn * (m + (1.0 - m) * x ** params.gamma)


def energy_curve(prof: Profile, gpu: GpuDvfs, clocks_mhz, batch: int = 32,
                 params: DvfsParams = DvfsParams()) -> pd.DataFrame:
    """Energy per token vs clock for both phases on a whole GPU (Festina Fig. 3 analogue).

    Returns
    -------
    DataFrame with ``clock_mhz``, ``phase``, ``energy_j_per_token``, ``latency_ms``
    (prefill: per 1,024-token prompt; decode: one iteration at ``batch``), ``power_w``
    (whole GPU, static floor included).
    """
    f = np.asarray(clocks_mhz, dtype=float)
    tp = prefill_time_s(prof, gpu, 1024.0, f)
    pp = gpu.idle_w + dynamic_power_w(prof, gpu, "prefill", batch, f, 1.0, params)
    td = decode_itl_s(prof, gpu, batch, f)
    pd_ = gpu.idle_w + dynamic_power_w(prof, gpu, "decode", batch, f, 1.0, params)
    return pd.concat([
        pd.DataFrame({"clock_mhz": f, "phase": "prefill", "energy_j_per_token": pp * tp / 1024,
                      "latency_ms": tp * 1000, "power_w": pp}),
        pd.DataFrame({"clock_mhz": f, "phase": "decode", "energy_j_per_token": pd_ * td / batch,
                      "latency_ms": td * 1000, "power_w": pd_}),
    ], ignore_index=True)


def phase_clock(p_p: float, t_p: float, f_p: float, p_d: float, t_d: float, f_d: float) -> float:
    """Festina Eq. 9: one device clock for co-resident phases, weighted by phase energy.

    ``F = (P_p T_p F_p + P_d T_d F_d) / (P_p T_p + P_d T_d)``; powers in W, times in s,
    clocks in MHz. With no work in either phase, returns ``max(f_p, f_d)``.

    >>> phase_clock(400.0, 0.5, 1200.0, 300.0, 2.0, 900.0)
    975.0
    """
    wp, wd = p_p * t_p, p_d * t_d
    if wp + wd <= 0:
        return max(f_p, f_d)
    return (wp * f_p + wd * f_d) / (wp + wd)


def decode_saving(prof: Profile, gpu: GpuDvfs, batch: float, gamma: float,
                  n_clocks: int = 200) -> float:
    """Fraction of decode energy saved by the energy-optimal clock vs the top clock (whole GPU,
    static floor included) for one profile and batch under exponent ``gamma``."""
    f = np.linspace(gpu.f_min_mhz, gpu.f_max_mhz, n_clocks)
    e = (gpu.idle_w + dynamic_power_w(prof, gpu, "decode", batch, f, 1.0, DvfsParams(gamma))) \
        * decode_itl_s(prof, gpu, batch, f)
    return float(1.0 - e.min() / e[-1])


def calibration_profiles(profiles: list[Profile]) -> list[Profile]:
    """Profiles whose memory-bound share is identified: the roofline floor (all weights read once
    per iteration) stays below the 0.95 cap at every measured batch. Mixture-of-experts models
    (e.g. Qwen3-30B-A3B) read only their active experts per token, so the floor from all weights
    hits the cap and would let decode look clock-insensitive; they are left out."""
    return [p for p in profiles if "decode" not in p.measured
            and float(np.max(p.mem_fraction(np.asarray(p.dec_batches)))) < 0.95]


def calibrate_gamma(profiles: list[Profile], gpu: GpuDvfs,
                    target: float = DECODE_SAVING_TARGET) -> float:
    """The DVFS exponent at which the largest predicted decode-energy saving over the
    calibration profiles' measured batches equals ``target`` (:data:`DECODE_SAVING_CITE`).

    Solved with :func:`scipy.optimize.brentq` on gamma in [0.5, 6] (the saving grows with gamma).

    Raises
    ------
    ValueError
        No profile qualifies (:func:`calibration_profiles`), or ``target`` is out of the range
        the profiles can reach.
    """
    from scipy.optimize import brentq

    cal = calibration_profiles(profiles)
    if not cal:
        raise ValueError("no dense bench profile to calibrate the DVFS exponent on; pass gamma")

    def gap(gamma: float) -> float:
        return max(decode_saving(p, gpu, b, gamma) for p in cal for b in p.dec_batches) - target

    lo, hi = 0.5, 6.0
    if gap(lo) > 0 or gap(hi) < 0:
        raise ValueError(f"a {target:.0%} decode saving is out of reach for gamma in "
                         f"[{lo}, {hi}] with these profiles; pass gamma")
    return float(brentq(gap, lo, hi, xtol=1e-4))


@dataclass
class LookupTable:
    """Offline profile table for the global scheduler's constant-time lookups (Festina Sec. 3.2:
    profiled once per GPU kind and model, then read, never re-modelled, at dispatch time).

    Axes: ``models`` (slot order), ``batches`` (decode batch buckets), ``shares`` (SM share in
    sixteenths), ``clocks_mhz`` (the simulator's clock grid). A lookup rounds the batch **up** and
    the SM share **down** to the grid, so a predicted latency is never optimistic from rounding.

    Arrays (float64)
    ----------------
    prefill_s_per_tok : (M, S, C) prefill seconds per prompt token
    prefill_dyn_w : (M, S, C) dynamic (above static floor) power while prefilling, W
    decode_itl_s : (M, B, S, C) decode iteration time, s
    decode_dyn_w : (M, B, S, C) dynamic power while decoding, W
    """

    clocks_mhz: np.ndarray
    batches: np.ndarray
    shares: np.ndarray
    prefill_s_per_tok: np.ndarray
    prefill_dyn_w: np.ndarray
    decode_itl_s: np.ndarray
    decode_dyn_w: np.ndarray

    def b(self, batch: float) -> int:
        """Index of the smallest batch bucket >= ``batch`` (clamped to the largest)."""
        return min(int(np.searchsorted(self.batches, max(batch, 1.0) - 1e-9)),
                   len(self.batches) - 1)

    def s(self, share: float) -> int:
        """Index of the largest share bucket <= ``share`` (at least the smallest)."""
        return max(int(np.searchsorted(self.shares, share + 1e-9)) - 1, 0)

    def c(self, f_mhz: float) -> int:
        """Index of the smallest grid clock >= ``f_mhz`` (clamped)."""
        return min(int(np.searchsorted(self.clocks_mhz, f_mhz - 1e-6)),
                   len(self.clocks_mhz) - 1)


#: decode batch buckets of :class:`LookupTable` (1 .. 2,048, about x1.5 apart)
TABLE_BATCHES = np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512,
                          768, 1024, 1536, 2048], dtype=float)
#: SM share buckets of :class:`LookupTable` (MPS active-thread percentage in 1/16 steps)
TABLE_SHARES = np.arange(1, 17, dtype=float) / 16.0


def build_lookup(slots: list[Profile], gpu: GpuDvfs, clocks_mhz: np.ndarray,
                 params: DvfsParams = DvfsParams()) -> LookupTable:
    """Evaluate every slot's profile (DVFS model or measured table) on the lookup grid.

    Parameters
    ----------
    slots : profile per model slot (shape M)
    gpu : GPU kind
    clocks_mhz : clock grid (C,), MHz
    params : DVFS parameters (ignored where a measured table covers the phase)
    """
    f = np.asarray(clocks_mhz, float)
    ss, ff = (a.ravel() for a in np.meshgrid(TABLE_SHARES, f, indexing="ij"))
    S, C, B = len(TABLE_SHARES), len(f), len(TABLE_BATCHES)
    pt = np.empty((len(slots), S, C))
    pw = np.empty((len(slots), S, C))
    dt = np.empty((len(slots), B, S, C))
    dw = np.empty((len(slots), B, S, C))
    cache: dict[int, tuple] = {}
    for m, prof in enumerate(slots):
        key = id(prof)
        if key not in cache:
            a = prefill_time_s(prof, gpu, 1.0, ff, ss).reshape(S, C)
            b = np.broadcast_to(dynamic_power_w(prof, gpu, "prefill", 1, ff, ss, params),
                                ff.shape).reshape(S, C)
            c = np.stack([decode_itl_s(prof, gpu, bb, ff, ss).reshape(S, C)
                          for bb in TABLE_BATCHES])
            d = np.stack([np.broadcast_to(dynamic_power_w(prof, gpu, "decode", bb, ff, ss,
                                                          params), ff.shape).reshape(S, C)
                          for bb in TABLE_BATCHES])
            cache[key] = (a, b, c, d)
        pt[m], pw[m], dt[m], dw[m] = cache[key]
    return LookupTable(f, TABLE_BATCHES.copy(), TABLE_SHARES.copy(), pt, pw, dt, dw)


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
    b = bench[(bench["hardware"] == gpu) & (bench["n_gpus"] == 1) & (bench["tp"] == 1)
              & bench["source"].astype(str).str.startswith("ML.ENERGY")
              & bench["task"].isin(TEXT_TASKS) & bench["itl_ms"].notna()
              & bench["power_w"].notna() & bench["concurrency"].notna()
              & bench["params_b"].notna() & (bench["precision"].isin(["bf16", "fp16"]))]
    if b.empty:
        return {}
    # the newest leaderboard the GPU has (v3 for H100/B200, v2 for A100): one methodology
    src = sorted(b["source"].unique())[-1]
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
    own = t[t["hardware"] == gpu]
    if not own.empty:
        r = own.iloc[0]
        tok_s = r["concurrency"] * r["in_len"] / (r["ttft_ms"] / 1000.0)
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
    ratio = hardware.SPECS[gpu].bf16_tflops / hardware.SPECS["H100-80GB"].bf16_tflops
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
    spec = hardware.SPECS[gpu]
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
    text = data.decode("utf-8-sig")
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    for col in MEASURED_COLUMNS:
        if col not in header:
            raise ProfileError(f"{display}: line 1, column {col}: missing column (need "
                               f"{', '.join(MEASURED_COLUMNS)})")
    recs = []
    for line, row in enumerate(reader, start=2):
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        if not any(row.values()):
            continue
        rec = {"model": row["model"], "gpu": hardware.normalise(row["gpu"])}
        if row["phase"] not in ("prefill", "decode"):
            raise ProfileError(f"{display}: line {line}, column phase: {row['phase']!r} is not "
                               "prefill or decode")
        rec["phase"] = row["phase"]
        for col in ("sm_share", "clock_mhz", "latency_ms", "power_w"):
            try:
                v = float(row[col])
            except ValueError as exc:
                raise ProfileError(f"{display}: line {line}, column {col}: {row[col]!r} is not "
                                   "a number") from exc
            if not np.isfinite(v) or v <= 0 or (col == "sm_share" and v > 1):
                raise ProfileError(f"{display}: line {line}, column {col}: {row[col]!r} out of "
                                   "range" + (" (0, 1]" if col == "sm_share" else " (> 0)"))
            rec[col] = v
        recs.append(rec)
    if not recs:
        raise ProfileError(f"{display}: line 2, column model: no profile rows")
    return pd.DataFrame(recs)


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
