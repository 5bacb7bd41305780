"""Live GPU telemetry (NVML) and serving-window averages.

The OmniPilot paper (Sec. on telemetry) warns that whole-job averages of 60-second DCGM samples
include idle start-up: restricting them to the serving window moved SM activity from 21 % to
51 % and power from 132 W to 189 W, and each metric needs a freshness window with stale values
down-weighted. This module does both.

* :func:`sample` polls NVML per GPU (:mod:`analytics.nvml`, re-exported here).
* :func:`window_averages` compares whole-job and serving-window means, each sample weighted by
  how long it stood for, with staleness decay beyond the metric's freshness window.
* :func:`energy_by_gpu` gives each GPU's energy from its cumulative counter, reset-aware
  (:func:`counter_deltas`), beside power integrated over time.

A GPU is (host, index, UUID) everywhere (:data:`GPU_KEYS`): logs of several hosts share
indices.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd

from analytics.nvml import TelemetryUnavailable, sample, status  # noqa: F401 - re-exported
from analytics.timegaps import logging_gaps

METRICS = ("power_w", "sm_active", "gpu_util_pct", "mem_used_mib", "temp_c", "sm_clock_mhz",
           "mem_clock_mhz")

#: Seconds a sample of each metric stays fully fresh: DCGM profiling fields (sm_active) are
#: averaged over their sampling period (60 s by default in dcgm-exporter setups the paper
#: describes); instantaneous NVML readings (power, utilisation, clocks) are fresh for about one
#: polling interval; slowly varying ones (memory used, temperature) for longer.
DEFAULT_FRESHNESS_S = {"power_w": 5.0, "sm_active": 60.0, "gpu_util_pct": 5.0,
                       "mem_used_mib": 30.0, "temp_c": 30.0, "sm_clock_mhz": 5.0,
                       "mem_clock_mhz": 5.0}


GPU_KEYS = ("host", "gpu_id", "gpu_uuid")


def gpu_groups(frame: pd.DataFrame):
    """``(key, rows)`` per GPU, ``key`` a dict of the :data:`GPU_KEYS` the frame has (empty
    host / UUID kept as None: a group of its own, never dropped), rows in time order."""
    keys = [k for k in GPU_KEYS if k in frame.columns]
    if not keys or frame.empty:
        return
    frame = frame.sort_values("ts", kind="stable")
    for values, g in frame.groupby(keys, dropna=False, sort=True):
        values = values if isinstance(values, tuple) else (values,)
        yield {k: (None if pd.isna(v) else v) for k, v in zip(keys, values, strict=True)}, g


def gpu_label(key: dict, with_uuid: bool = False) -> str:
    """``host/index`` (``node-a/0``), with the UUID when several GPUs share host and index.

    >>> gpu_label({"host": "node-a", "gpu_id": 0, "gpu_uuid": "GPU-1"})
    'node-a/0'
    """
    label = f"{key.get('host') or '?'}/{key.get('gpu_id')}"
    return f"{label} {key['gpu_uuid']}" if with_uuid and key.get("gpu_uuid") else label


def gpu_labels(frame: pd.DataFrame) -> pd.Series:
    """:func:`gpu_label` of every row (the UUID added only where host and index repeat)."""
    keys = [k for k in GPU_KEYS if k in frame.columns]
    shared = set()
    if {"host", "gpu_uuid"} <= set(keys):
        n = frame.groupby(["host", "gpu_id"], dropna=False)["gpu_uuid"].nunique(dropna=False)
        shared = set(n[n > 1].index)
    out = []
    for r in frame[keys].itertuples(index=False):
        key = {k: (None if pd.isna(v) else v) for k, v in zip(keys, r, strict=True)}
        out.append(gpu_label(key, (key.get("host"), key.get("gpu_id")) in shared))
    return pd.Series(out, index=frame.index, dtype=object)


def counter_deltas(values) -> tuple[np.ndarray, np.ndarray]:
    """Reset-aware increments of a cumulative counter sampled in time order.

    Rule: ``delta_i = c_i - c_{i-1}`` when the counter did not go down; when it did (driver
    reload, node restart, wrap) the counter restarted from 0, so ``delta_i = c_i`` (what it
    counted since the reset; what it counted between ``c_{i-1}`` and the reset is unknown and
    left out). Empty readings give a 0 delta and do not break the chain. Never negative.

    Returns ``(deltas, resets)``: arrays as long as ``values`` (``deltas[0] = 0``), ``resets``
    true where a reset was detected.

    >>> d, r = counter_deltas([1000.0, 1018.0, 1036.0, 9.0, 27.0])
    >>> d.tolist(), r.tolist()
    ([0.0, 18.0, 18.0, 9.0, 18.0], [False, False, False, True, False])
    """
    c = np.asarray(values, dtype=float)
    deltas, resets = np.zeros(len(c)), np.zeros(len(c), dtype=bool)
    prev = np.nan
    for i, v in enumerate(c):
        if np.isnan(v):
            continue
        if not np.isnan(prev):
            resets[i] = v < prev
            deltas[i] = v if v < prev else v - prev
        prev = v
    return deltas, resets


def energy_by_gpu(frame: pd.DataFrame, start=None, end=None) -> pd.DataFrame:
    """Energy of each GPU over ``[start, end]`` (both ends included; default: all samples).

    Returns one row per GPU with a sample in the window: host, gpu_id, gpu_uuid, gpu (label),
    samples, mean_power_w, max_power_w, energy_counter_j (sum of :func:`counter_deltas` of
    ``energy_j``; None without two counter readings; the counter runs on through a logging gap,
    so it covers gaps), counter_resets, first_reset_ts (ISO text or None), energy_power_j
    (trapezoid of ``power_w`` over the *measured* spans only, J; None without two power
    readings), measured_s (seconds those spans cover), gaps / gap_s (logging gaps,
    :func:`analytics.timegaps.logging_gaps`, judged on the GPU's whole series and counted where
    they overlap the window: a window that starts or ends inside a gap counts that part; the
    energy there is unknown and not in ``energy_power_j``) and first_gap_start / first_gap_end
    (ISO text or None, clipped to the window).
    """
    ts_all = pd.to_datetime(frame["ts"]) if not frame.empty else pd.Series(dtype="M8[ns]")
    keep = pd.Series(True, index=frame.index)
    lo = None if start is None else pd.Timestamp(start)
    hi = None if end is None else pd.Timestamp(end)
    if lo is not None:
        keep &= ts_all >= lo
    if hi is not None:
        keep &= ts_all <= hi
    labels = gpu_labels(frame) if not frame.empty else pd.Series(dtype=object)
    rows = []
    for key, whole in gpu_groups(frame):
        g = whole[keep.loc[whole.index]]
        if g.empty:
            continue
        row = {"host": key.get("host"), "gpu_id": key.get("gpu_id"),
               "gpu_uuid": key.get("gpu_uuid"), "gpu": labels.loc[g.index[0]],
               "samples": int(len(g)), **_energy_of(g), **_power_of(whole, lo, hi)}
        rows.append(row)
    cols = ["host", "gpu_id", "gpu_uuid", "gpu", "samples", "mean_power_w", "max_power_w",
            "energy_counter_j", "counter_resets", "first_reset_ts", "energy_power_j",
            "measured_s", "gaps", "gap_s", "first_gap_start", "first_gap_end"]
    return pd.DataFrame(rows, columns=cols)


def _power_steps(g: pd.DataFrame):
    """``(ts, power_w, step_s, gap)`` of one GPU's power samples (time order), or None with
    fewer than two."""
    if "power_w" not in g:
        return None
    p = g[["ts", "power_w"]].dropna()
    if len(p) < 2:
        return None
    ts = pd.to_datetime(p["ts"]).reset_index(drop=True)
    dt = np.diff((ts - ts.iloc[0]).dt.total_seconds().to_numpy())
    return ts, p["power_w"].to_numpy(float), dt, logging_gaps(dt)


def _power_of(whole: pd.DataFrame, lo, hi) -> dict:
    """energy_power_j, measured_s, gaps, gap_s, first_gap_start / _end of one GPU over
    ``[lo, hi]`` (None: open). Logging gaps are judged on the GPU's whole series: the power
    integral takes the steps inside the window that are not gaps, and each gap counts where it
    overlaps the window (a window that starts inside one counts that part)."""
    out = {"energy_power_j": None, "measured_s": None, "gaps": 0, "gap_s": 0.0,
           "first_gap_start": None, "first_gap_end": None}
    steps = _power_steps(whole)
    if steps is None:
        return out
    ts, w, dt, gap = steps
    t = ts.to_numpy()
    inside = np.ones(len(t), bool)
    if lo is not None:
        inside &= t >= lo.to_datetime64()
    if hi is not None:
        inside &= t <= hi.to_datetime64()
    step_in = inside[1:] & inside[:-1]
    if inside.sum() >= 2:
        use = step_in & ~gap
        out["energy_power_j"] = float(np.sum(((w[1:] + w[:-1]) / 2 * dt)[use]))
        out["measured_s"] = float(dt[use].sum())
    for i in np.flatnonzero(gap):
        a = ts.iloc[i] if lo is None else max(ts.iloc[i], lo)
        b = ts.iloc[i + 1] if hi is None else min(ts.iloc[i + 1], hi)
        if b <= a:
            continue
        out["gaps"] += 1
        out["gap_s"] += (b - a).total_seconds()
        if out["first_gap_start"] is None:
            out["first_gap_start"], out["first_gap_end"] = a.isoformat(), b.isoformat()
    return out


def _energy_of(g: pd.DataFrame) -> dict:
    """Power statistics and the counter's energy of one GPU's rows in a window (time order)."""
    out = {"mean_power_w": None, "max_power_w": None, "energy_counter_j": None,
           "counter_resets": 0, "first_reset_ts": None}
    if "power_w" in g:
        out["mean_power_w"] = _num(g["power_w"].mean())
        out["max_power_w"] = _num(g["power_w"].max())
    if "energy_j" in g:
        e = g[["ts", "energy_j"]].dropna()
        if len(e) > 1:
            deltas, resets = counter_deltas(e["energy_j"].to_numpy(float))
            out["energy_counter_j"] = float(deltas.sum())
            out["counter_resets"] = int(resets.sum())
            if resets.any():
                out["first_reset_ts"] = pd.Timestamp(e["ts"].iloc[int(resets.argmax())]
                                                     ).isoformat()
    return out


def summarize(frame: pd.DataFrame) -> list[dict]:
    """One row per GPU (host, gpu_id, gpu_uuid, gpu label): samples, mean / max power (W),
    energy used (reset-aware counter deltas, J; None without two readings), counter resets,
    mean utilisation (%) and max temperature (degC)."""
    out = []
    labels = gpu_labels(frame) if not frame.empty else pd.Series(dtype=object)
    for key, g in gpu_groups(frame):
        e = _energy_of(g)
        out.append({
            "host": key.get("host"), "gpu_id": int(key["gpu_id"]),
            "gpu_uuid": key.get("gpu_uuid"), "gpu": labels.loc[g.index[0]],
            "samples": int(len(g)), "mean_power_w": e["mean_power_w"],
            "max_power_w": e["max_power_w"], "energy_j": e["energy_counter_j"],
            "counter_resets": e["counter_resets"],
            "mean_gpu_util_pct": _num(g["gpu_util_pct"].mean()) if "gpu_util_pct" in g else None,
            "max_temp_c": _num(g["temp_c"].max()) if "temp_c" in g else None,
        })
    return out


def _num(v):
    return None if v is None or pd.isna(v) else float(v)


def freshness_weights(ts: np.ndarray, start: np.datetime64, end: np.datetime64,
                      fresh_s: float) -> np.ndarray:
    """Weight of each sample in a time-weighted mean over ``[start, end)``.

    Sample ``i`` stands for ``[t_i, t_{i+1})`` clipped to the window (the last one for one
    fresh period). Within ``fresh_s`` of ``t_i`` it counts fully; after that it decays as
    ``exp(-(age - fresh_s) / fresh_s)``, so a reading far older than its freshness window
    contributes little: weight = ``F(b) - F(a)`` with ``F`` the integral of that profile over
    ``age`` and ``[a, b]`` the clipped span in seconds since ``t_i``.

    >>> t = np.array(["2024-01-01T00:00:00", "2024-01-01T00:00:10"], dtype="datetime64[s]")
    >>> w = freshness_weights(t, t[0], t[1] + np.timedelta64(10, "s"), 10.0)
    >>> [round(float(x), 6) for x in w]
    [10.0, 10.0]
    """
    t = ts.astype("datetime64[us]").astype(np.int64) / 1e6
    s = np.datetime64(start, "us").astype(np.int64) / 1e6
    e = np.datetime64(end, "us").astype(np.int64) / 1e6
    nxt = np.append(t[1:], t[-1] + fresh_s) if len(t) else t
    a = np.clip(s - t, 0, None)  # age at which the window starts counting this sample
    b = np.clip(np.minimum(nxt, e) - t, 0, None)
    b = np.maximum(a, b)

    def integral(age):
        f = fresh_s
        return np.where(age <= f, age, f + f * (1 - np.exp(-(age - f) / f)))

    return integral(b) - integral(a)


def window_averages(frame: pd.DataFrame, start, end, freshness: dict[str, float] | None = None
                    ) -> pd.DataFrame:
    """Whole-job vs serving-window means of each metric, per GPU.

    Parameters
    ----------
    frame : telemetry rows (ts, gpu_id, optionally host and gpu_uuid, and metric columns)
    start, end : the serving window (e.g. from a vllm bench result or typed in)
    freshness : seconds a sample of each metric stays fresh (default DEFAULT_FRESHNESS_S)

    Returns
    -------
    DataFrame, one row per (GPU, metric): host, gpu_id, gpu_uuid, gpu (``host/index`` label,
    :func:`gpu_labels`), metric, whole, window, window_minus_whole, samples_in_window (samples
    in ``[start, end]``, both ends included as :func:`energy_by_gpu` counts them). A GPU is
    (host, index, UUID): scrapes of several nodes sharing indices stay apart.

    Raises
    ------
    ValueError : an empty window (end <= start)
    """
    start, end = pd.Timestamp(start), pd.Timestamp(end)
    if end <= start:
        raise ValueError(f"the serving window ends ({end}) before it starts ({start})")
    fresh = {**DEFAULT_FRESHNESS_S, **(freshness or {})}
    rows = []
    labels = gpu_labels(frame) if not frame.empty else pd.Series(dtype=object)
    for key, g in gpu_groups(frame):
        ident = {"host": key.get("host"), "gpu_id": key.get("gpu_id"),
                 "gpu_uuid": key.get("gpu_uuid"), "gpu": labels.loc[g.index[0]]}
        ts = pd.to_datetime(g["ts"]).to_numpy()
        job_start, job_end = ts[0], ts[-1]
        for m in METRICS:
            if m not in g or g[m].isna().all():
                continue
            ok = g[m].notna().to_numpy()
            vals, tsm = g[m].to_numpy(float)[ok], ts[ok]
            f = fresh[m]
            w_all = freshness_weights(tsm, job_start, job_end + np.timedelta64(int(f * 1e6), "us"),
                                      f)
            w_win = freshness_weights(tsm, start.to_datetime64(), end.to_datetime64(), f)
            whole = float(np.average(vals, weights=w_all)) if w_all.sum() else np.nan
            window = float(np.average(vals, weights=w_win)) if w_win.sum() else np.nan
            rows.append({**ident, "metric": m, "whole": whole, "window": window,
                         "window_minus_whole": window - whole,
                         "samples_in_window": int(((tsm >= start.to_datetime64())
                                                   & (tsm <= end.to_datetime64())).sum())})
    return pd.DataFrame(rows, columns=["host", "gpu_id", "gpu_uuid", "gpu", "metric", "whole",
                                       "window", "window_minus_whole", "samples_in_window"])


def detect_serving_window(frame: pd.DataFrame, metric: str = "gpu_util_pct",
                          threshold: float | None = None) -> tuple[pd.Timestamp, pd.Timestamp]:
    """From the first busy sample to the end of the last one (its start plus the median sample
    spacing), busy = ``metric`` above ``threshold`` (default: half its max): a starting guess
    for the serving window, to be confirmed by the user."""
    col = metric if metric in frame and frame[metric].notna().any() else "power_w"
    v = frame[col]
    thr = threshold if threshold is not None else 0.5 * float(v.max())
    busy = frame.loc[v > thr, "ts"]
    if busy.empty:
        raise ValueError(f"no sample has {col} above {thr:g}")
    return pd.Timestamp(busy.min()), pd.Timestamp(busy.max()) + sample_step(frame["ts"])


def sample_step(ts: pd.Series) -> pd.Timedelta:
    """Median spacing of the distinct sample times ``ts`` (1 s for a single instant): how long
    the last sample stands for."""
    steps = pd.Series(pd.to_datetime(ts).drop_duplicates().sort_values()).diff().dropna()
    return steps.median() if len(steps) else pd.Timedelta("1s")


def window_from_vllm_result(doc: dict) -> tuple[pd.Timestamp, pd.Timestamp]:
    """Serving window of a ``vllm bench serve --save-result`` JSON.

    vLLM writes ``date`` when the run has finished (``%Y%m%d-%H%M%S``, the client's local clock;
    read here as UTC) and ``duration`` = the benchmark's wall time in seconds, so the window is
    ``[date - duration, date]``.

    Raises ValueError when either field is missing or malformed.

    >>> window_from_vllm_result({"date": "20240510-120130", "duration": 90.0})
    (Timestamp('2024-05-10 12:00:00'), Timestamp('2024-05-10 12:01:30'))
    """
    try:
        end = pd.Timestamp(datetime.strptime(str(doc["date"]), "%Y%m%d-%H%M%S"))
        duration = float(doc["duration"])
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError("not a vllm bench serve result: needs 'date' (YYYYMMDD-HHMMSS) and "
                         f"'duration' (s) ({exc})") from exc
    if not np.isfinite(duration) or duration <= 0:
        raise ValueError(f"duration {duration} s is not a positive number")
    return end - pd.Timedelta(seconds=duration), end
