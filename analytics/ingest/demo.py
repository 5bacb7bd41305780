"""The offline synthetic demo: one labelled dataset per kind of input, so every page answers
with nothing pulled (issue 31 item 9). Every dataset is stored with ``synthetic = true`` and
every chart drawn from it carries :data:`analytics.ui.charts.SYNTHETIC_LABEL`.

Nothing here is measured and nothing is fitted to a trace: the shapes are illustrative and
stated in each docstring. Where a number has a physical meaning (a GPU's memory bandwidth, its
idle and maximum power) it is read from the cited spec table (:mod:`analytics.hardware`) so the
synthetic benchmark grid stays within what the hardware can do; the rest are round constants
chosen for the demo and named as such.

Datasets (:data:`NAMES`): a 14-day request trace (``requests``), hourly carbon intensity at
three made-up sites (``carbon_intensity``), a 14-day batch-job trace (``jobs``), a roofline-
model benchmark grid (``bench_runs``) and six hours of 8-GPU telemetry (``telemetry``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from analytics import store
from analytics.config import DEFAULT_T0, SYNTHETIC_SOURCE
from analytics.schema import Parsed

if TYPE_CHECKING:
    import numpy as np

WARNING = "SYNTHETIC: generated for the offline demo, not measured"

#: dataset name per canonical table, in ingest order
NAMES = {"requests": "synthetic_demo_14d", "carbon_intensity": "synthetic_demo_carbon",
         "jobs": "synthetic_demo_jobs", "bench_runs": "synthetic_demo_bench",
         "telemetry": "synthetic_demo_telemetry"}

#: the made-up sites of the carbon series: (name, mean gCO2/kWh, diurnal solar dip as a share of
#: the mean at 13:00 UTC, hour-to-hour noise sd gCO2/kWh). Not real balancing areas.
SITES = (("SYN-SOLAR", 260.0, 0.55, 12.0), ("SYN-COAL", 620.0, 0.05, 18.0),
         ("SYN-HYDRO", 95.0, 0.10, 6.0))


def _ts(seconds: np.ndarray, t0=DEFAULT_T0) -> pl.Series:
    """Seconds after ``t0`` as the canonical naive-UTC ``Datetime('us')``."""
    import numpy as np

    return pl.from_epoch(pl.Series((np.asarray(seconds) * 1e6).astype(np.int64)
                                   + int(t0.timestamp() * 1e6)), "us")


def _parsed(table: str, frame: pl.DataFrame, resolution_s: float, what: str) -> Parsed:
    return Parsed(table, "synthetic", frame, "synthetic demo", resolution_s,
                  (f"{WARNING} {what}",))


def synthetic_requests(rng: np.random.Generator, days: int = 14) -> Parsed:
    """A labelled synthetic request trace (``requests``), ``days`` long from ``DEFAULT_T0``.

    Arrivals are Poisson per second with a rate of 0.15 req/s scaled by a diurnal sine (peak 14:00,
    trough 02:00, +-60 %) and a weekend factor of 0.6; prompt and completion lengths are
    lognormal (medians 600 and 180 tokens). These shapes are illustrative, not fitted to any trace.
    """
    import numpy as np

    seconds = np.arange(days * 86400)
    hour = (seconds % 86400) / 3600
    weekday = (seconds // 86400) % 7  # t0 is a Monday
    rate = 0.15 * (1 + 0.6 * np.sin(2 * np.pi * (hour - 8) / 24)) * np.where(weekday >= 5, 0.6, 1.0)
    counts = rng.poisson(rate)
    arrival_s = np.repeat(seconds, counts) + rng.random(counts.sum())
    n = arrival_s.size
    frame = pl.DataFrame({
        "ts": _ts(arrival_s), "model": ["synthetic"] * n,
        "prompt_tokens": np.maximum(1, rng.lognormal(np.log(600), 0.9, n)).astype(np.int64),
        "completion_tokens": np.maximum(1, rng.lognormal(np.log(180), 0.8, n)).astype(np.int64),
        "failed": np.zeros(n, dtype=bool),
        "session_id": pl.Series([None] * n, dtype=pl.String),
        "latency_s": pl.Series([None] * n, dtype=pl.Float64),
    })
    return _parsed("requests", frame, 1e-6, "traffic")


def synthetic_carbon(rng: np.random.Generator, days: int = 14) -> Parsed:
    """Hourly carbon intensity (gCO2/kWh, basis ``avg``) at the three made-up :data:`SITES`,
    covering the request trace's span (so Dispatch aligns with offset 0).

    Each site: its mean times ``1 - dip * max(0, cos(2 pi (hour - 13) / 24))`` (a midday solar
    dip) plus Gaussian noise, clipped at 5 gCO2/kWh. Illustrative, not any grid's data.
    """
    import numpy as np

    hours = np.arange(days * 24)
    solar = np.maximum(0.0, np.cos(2 * np.pi * ((hours % 24) - 13) / 24))
    parts = []
    for site, mean, dip, sd in SITES:
        value = np.maximum(5.0, mean * (1 - dip * solar) + rng.normal(0, sd, hours.size))
        parts.append(pl.DataFrame({"site": [site] * hours.size, "ts": _ts(hours * 3600.0),
                                   "gco2_per_kwh": value, "basis": ["avg"] * hours.size}))
    return _parsed("carbon_intensity", pl.concat(parts), 3600.0, "carbon intensity")


def synthetic_jobs(rng: np.random.Generator, days: int = 14) -> Parsed:
    """A batch-job trace (``jobs``) for the Power page: Poisson submissions at 10 jobs/h, GPUs
    per job drawn from 1 / 2 / 4 / 8 / 16 / 32 (shares 35 / 20 / 20 / 15 / 7 / 3 %), run time
    lognormal (median 1 h, sd of log 1.2, 1 min to 48 h), a start 0-10 min after submission
    (uniform), all ``COMPLETED`` on ``H100-80GB``. Illustrative, not any cluster's log.
    """
    import numpy as np

    n = int(rng.poisson(10 * 24 * days))
    submit = np.sort(rng.uniform(0, days * 86400, n))
    start = submit + rng.uniform(0, 600, n)
    run = np.clip(rng.lognormal(np.log(3600), 1.2, n), 60, 48 * 3600)
    gpus = rng.choice([1, 2, 4, 8, 16, 32], n, p=[0.35, 0.2, 0.2, 0.15, 0.07, 0.03])
    frame = pl.DataFrame({
        "job_id": [f"syn-{i}" for i in range(n)], "submit_ts": _ts(submit),
        "start_ts": _ts(start), "end_ts": _ts(start + run), "n_gpus": gpus.astype(np.int32),
        "gpu_kind": ["H100-80GB"] * n, "state": ["COMPLETED"] * n,
        "exit_code": np.zeros(n, dtype=np.int32),
        "user_hash": [f"syn-user-{u}" for u in rng.integers(0, 40, n)],
        "elapsed_s": run,
    })
    return _parsed("jobs", frame, 1.0, "job trace")


#: the benchmark grid's models: (id, parameters in billions, KV cache per token in MB: layers x
#: KV heads x head dim x 2 (K and V) x 2 bytes of an 8 KV-head GQA model of that size)
BENCH_MODELS = (("synthetic/dense-8b", 8.0, 32 * 8 * 128 * 4 / 1e6),
                ("synthetic/dense-14b", 14.0, 40 * 8 * 128 * 4 / 1e6),
                ("synthetic/dense-70b", 70.0, 80 * 8 * 128 * 4 / 1e6))
BENCH_BATCHES = (1, 8, 32, 64, 128, 256)
IN_LEN, OUT_LEN = 600.0, 180.0


def synthetic_bench(rng: np.random.Generator) -> Parsed:
    """A benchmark grid (``bench_runs``, source :data:`~analytics.config.SYNTHETIC_SOURCE`) from
    a roofline model on the GPU kinds with a cited clock range (H100-80GB, A100-40GB):
    3 models (8, 14 and 70 B) x TP 1/2/4/8 x BF16 (and FP8 where the kind has it) x batch 1-256, a 600-token
    prompt and 180-token answer, configurations whose weights and KV cache exceed 90 % of the
    memory left out.

    Per decode step: memory time = (weights / TP + batch x context x KV per token / TP) /
    (45 % of the datasheet bandwidth), compute time = 2 x params x batch / (50 % of the
    datasheet TFLOP/s x TP), step = the larger + 0.2 ms per extra TP rank; TTFT = batch x prompt
    x 2 x params / (50 % TFLOP/s x TP); power per GPU = idle + (max - idle) x (0.3 + 0.7 x
    compute share), all GPUs summed; 3 % multiplicative noise. The efficiencies are round demo
    constants, not measured.
    """

    from analytics.hardware.catalog import DVFS_KINDS, PRECISION_BITS

    rows = []
    for kind in DVFS_KINDS.values():
        for model, params_b, kv_mb in BENCH_MODELS:
            for precision in ("bf16", "fp8") if kind.fp8_tflops else ("bf16",):
                tflops = kind.fp8_tflops if precision == "fp8" else kind.bf16_tflops
                weights_gb = params_b * PRECISION_BITS[precision] / 8
                for tp in (1, 2, 4, 8):
                    for batch in BENCH_BATCHES:
                        kv_gb = batch * (IN_LEN + OUT_LEN) * kv_mb / 1e3
                        if (weights_gb + kv_gb) / tp > 0.9 * kind.memory_gb:
                            continue
                        ctx_gb = batch * (IN_LEN + OUT_LEN / 2) * kv_mb / 1e3
                        mem_ms = (weights_gb + ctx_gb) / tp / (0.45 * kind.mem_bw_gbs) * 1e3
                        flop_ms = 2 * params_b * batch / (0.5 * tflops * tp)
                        noise = rng.normal(1, 0.03, 3)
                        itl = (max(mem_ms, flop_ms) + 0.2 * (tp - 1)) * noise[0]
                        ttft = batch * IN_LEN * 2 * params_b / (0.5 * tflops * tp) * noise[1]
                        share = flop_ms / max(mem_ms, flop_ms)
                        power = tp * (kind.idle_w + (kind.tdp_w - kind.idle_w)
                                      * min(1.0, 0.3 + 0.7 * share)) * noise[2]
                        tok_s = batch / itl * 1e3
                        rows.append({
                            "source": SYNTHETIC_SOURCE, "task": "chat", "hardware": kind.key,
                            "gpu_mem_gb": float(kind.memory_gb), "n_gpus": tp, "tp": tp, "pp": 1,
                            "precision": precision, "framework": "vLLM", "model": model,
                            "params_b": params_b, "active_params_b": params_b,
                            "in_len": IN_LEN, "out_len": OUT_LEN, "concurrency": float(batch),
                            "throughput_tok_s": tok_s, "ttft_ms": ttft, "itl_ms": itl,
                            "latency_s": (ttft + OUT_LEN * itl) / 1e3, "power_w": power,
                            "energy_per_token_j": power / tok_s, "failed": False})
    return _parsed("bench_runs", pl.DataFrame(rows), 1.0, "benchmark grid (roofline model)")


def synthetic_telemetry(rng: np.random.Generator, hours: int = 6, step_s: int = 5) -> Parsed:
    """Six hours of 5-s samples of 8 GPUs on one made-up host (``telemetry``): idle for the
    first and last 45 min, serving between at a utilisation that follows a slow sine
    (50-95 %) plus noise; power = idle + (max - idle) x utilisation of the H100-80GB spec; the
    energy counter integrates it. Illustrative, not any GPU's log.
    """
    import numpy as np

    from analytics.hardware.catalog import CATALOG

    spec = CATALOG["H100-80GB"]
    t = np.arange(0, hours * 3600, step_s, dtype=float)
    serving = (t >= 2700) & (t < hours * 3600 - 2700)
    parts = []
    for gpu in range(8):
        util = np.where(serving, 0.725 + 0.225 * np.sin(2 * np.pi * t / 5400 + gpu), 0.0)
        util = np.clip(util + np.where(serving, rng.normal(0, 0.04, t.size), 0.0), 0, 1)
        power = spec.idle_w + (spec.tdp_w - spec.idle_w) * util + rng.normal(0, 3, t.size)
        parts.append(pl.DataFrame({
            "ts": _ts(t), "host": ["synthetic-node"] * t.size,
            "gpu_id": np.full(t.size, gpu, dtype=np.int32), "power_w": power,
            "sm_active": util * 0.9, "gpu_util_pct": util * 100,
            "mem_used_mib": np.where(serving, 72_000.0, 1_000.0),
            "temp_c": 35 + 40 * util, "energy_j": np.cumsum(power * step_s),
            "sm_clock_mhz": np.where(serving, float(spec.f_max_mhz), float(spec.f_min_mhz)),
            "gpu_uuid": [f"GPU-synthetic-{gpu}"] * t.size}))
    return _parsed("telemetry", pl.concat(parts, how="diagonal"), float(step_s), "telemetry")


def ingest_demo(con, seed: int = 0, days: int = 14) -> list[dict]:
    """Generate and store every demo dataset (:data:`NAMES`), all in one transaction, each with
    ``synthetic = true``. A second call stores nothing new (same bytes: ``duplicate``).
    Returns the ingest report (:func:`analytics.store.ingest`)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    makers = {"requests": lambda: synthetic_requests(rng, days),
              "carbon_intensity": lambda: synthetic_carbon(rng, days),
              "jobs": lambda: synthetic_jobs(rng, days),
              "bench_runs": lambda: synthetic_bench(rng),
              "telemetry": lambda: synthetic_telemetry(rng)}
    # the request trace keeps the digest it had when it was the whole demo (a store that holds
    # it sees a duplicate, not a name clash); it draws first, so its rows are unchanged too
    digests = {t: f"synthetic-{t}-seed{seed}-days{days}" for t in NAMES}
    digests["requests"] = f"synthetic-seed{seed}-days{days}"
    names = {**NAMES, "requests": f"synthetic_demo_{days}d"}  # the trace names its span
    items = [store.IngestItem(makers[table](), names[table], digests[table], synthetic=True)
             for table in NAMES]
    return store.ingest(con, items)

