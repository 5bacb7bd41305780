"""Per-minute inference demand on the pool (hybrid power paper, Methods, "Inference request
arrivals", "Inference scheduling"): a request trace's tokens per minute, or a labelled synthetic
envelope, split equally over the LLM templates of :mod:`analytics.power.measured` and scaled to
a mean GPU allocation. Owns :class:`InferenceLoad`, :func:`inference_load`,
:func:`demand_shape` and :func:`synthetic_demand`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics.power.measured import TEMPLATES, LLMTemplate


@dataclass(frozen=True)
class InferenceLoad:
    """Per-minute inference demand on the pool.

    Attributes
    ----------
    demand_gpus : ndarray of shape (n_min,), int: GPUs the serving instances need each minute
    power_full_w : ndarray of shape (n_min,): inference power if that demand is fully served, W
    target_reached : the scaling reached its target mean (False: the target was above what
        the demand series can fill once clipped at the pool, see :func:`inference_load`)
    """

    demand_gpus: np.ndarray
    power_full_w: np.ndarray
    target_reached: bool = True


def _instances(tok_s: np.ndarray, templates, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """GPUs and full-service power per minute for demand ``scale * tok_s``: a 1-D demand is split
    equally over the templates, a 2-D one (n_min, len(templates)) gives each its own column."""
    split = tok_s.ndim == 2
    n = tok_s.shape[0]
    gpus = np.zeros(n, dtype=np.int64)
    power = np.zeros(n)
    for j, t in enumerate(templates):
        share = scale * (tok_s[:, j] if split else tok_s / len(templates))
        gpus += np.ceil(share / t.throughput_tok_s - 1e-9).astype(np.int64) * t.gpus
        power += share * t.energy_per_token_j
    return gpus, power


def _served_mean(gpus: np.ndarray, pool_gpus: int | None, cap_factor: float | None) -> float:
    """Mean GPUs inference is actually given: its demand clipped at the pool and, with
    ``cap_factor``, at ``ceil(cap_factor x mean demand)`` (the engine's allocation
    ``min(demand, cap, C)``, :func:`analytics.power.engine.simulate`)."""
    limit = np.inf if pool_gpus is None else float(pool_gpus)
    if cap_factor is not None:
        limit = min(limit, float(np.ceil(cap_factor * gpus.mean())))
    return float(np.minimum(gpus, limit).mean())


def inference_load(tokens_per_min: np.ndarray, mean_gpus: float,
                   templates: tuple[LLMTemplate, ...] = TEMPLATES["M"], *,
                   served_pool_gpus: int | None = None,
                   cap_factor: float | None = None) -> InferenceLoad:
    """Turn a per-minute demand shape into GPUs and power, scaled to a mean GPU allocation.

    The demand (tokens per minute; only its shape matters) is split equally over the templates
    (paper: "dividing total mean arrivals equally across templates") or, given as an array of
    shape (n_min, len(templates)), is already per template (the request-group model of
    :mod:`analytics.power.requests`); each template serves its share with whole instances of
    ``gpus`` GPUs, ``ceil(demand / throughput_tok_s)`` of them, and draws
    ``demand x energy_per_token_j`` W (the effective power per active request of the paper, as
    tokens/s x J/token). One scale factor, found by bisection, makes the mean GPU demand equal
    ``mean_gpus``, so a scenario's inference share fixes the demand level.

    With ``served_pool_gpus`` the bisection instead targets the mean GPUs inference is *served*:
    demand clipped at the pool (and at ``ceil(cap_factor x mean demand)`` when ``cap_factor``
    is given), so clipping cannot lower the realised inference GPU-time (issue 18 item 13).
    A target above what the trace can fill (its zero-demand minutes stay empty however large
    the scale) is lowered to 98 % of that bound; :attr:`InferenceLoad.target_reached` says so.

    Parameters
    ----------
    tokens_per_min : ndarray of shape (n_min,) or (n_min, len(templates)), >= 0
    mean_gpus : target mean of the demanded (or, with ``served_pool_gpus``, served) GPUs
        (0 -> no inference)
    served_pool_gpus, cap_factor : see above (keyword-only)

    Returns
    -------
    InferenceLoad

    Raises
    ------
    ValueError
        Negative demand, a 2-D demand whose width is not the number of templates, or a positive
        target with an all-zero demand series.

    >>> load = inference_load(np.array([1.0, 2.0, 3.0, 2.0]), 8.0, TEMPLATES["M"][:1])
    >>> load.demand_gpus.tolist(), round(float(load.demand_gpus.mean()), 1)
    ([4, 8, 12, 8], 8.0)
    """
    tok = np.asarray(tokens_per_min, float)
    if (tok < 0).any():
        raise ValueError("inference demand must be >= 0")
    if tok.ndim == 2 and tok.shape[1] != len(templates):
        raise ValueError(f"per-template demand has {tok.shape[1]} columns for "
                         f"{len(templates)} templates")
    n = tok.shape[0]
    if mean_gpus <= 0:
        return InferenceLoad(np.zeros(n, np.int64), np.zeros(n))
    if tok.sum() <= 0:
        raise ValueError("the inference demand series is all zeros")
    tok_s = tok / 60.0
    reached = True
    if served_pool_gpus is None:
        def stat(gpus):
            return float(gpus.mean())
    else:
        bound = served_pool_gpus * float(np.mean(tok_s.sum(axis=1) > 0 if tok.ndim == 2
                                                 else tok_s > 0))
        if mean_gpus > 0.98 * bound:
            mean_gpus, reached = 0.98 * bound, False

        def stat(gpus):
            return _served_mean(gpus, served_pool_gpus, cap_factor)
    lo, hi = 0.0, 1.0
    while stat(_instances(tok_s, templates, hi)[0]) < mean_gpus:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if stat(_instances(tok_s, templates, mid)[0]) < mean_gpus:
            lo = mid
        else:
            hi = mid
    gpus, power = _instances(tok_s, templates, hi)
    return InferenceLoad(gpus, power, reached)


def demand_shape(grid: pd.DataFrame) -> tuple[np.ndarray, pd.Timestamp, list[str]]:
    """The inference demand shape of a 1-minute demand grid, ready to be repeated.

    Parameters
    ----------
    grid : :func:`analytics.services.demand.demand_grid` at 1 minute (``ts``, ``target``)

    Returns
    -------
    (tokens_per_min, start, notes): a trace spanning a day or more is cut to its whole days from
    its first midnight, so repeating it keeps time of day (``start`` = that midnight); a shorter
    trace is returned as it is (``start`` = its first minute) and the notes say it has no daily
    pattern. Scenarios index it modulo its length.
    """
    ts = pd.to_datetime(grid["ts"])
    values = grid["target"].to_numpy(float)
    first_midnight = ts.iloc[0].ceil("D")
    skip = int((first_midnight - ts.iloc[0]).total_seconds() // 60)
    whole = (len(values) - skip) // 1440 * 1440
    if whole >= 1440:
        days = whole // 1440
        return values[skip:skip + whole], first_midnight, (
            [] if days >= 7 else [f"the inference trace has {days} whole day(s); scenarios "
                                  "repeat them"])
    return values, ts.iloc[0], [f"the inference trace covers {len(values)} minutes, less than "
                                "a whole day: scenarios repeat it end to end, so inference has "
                                "no daily pattern"]


def synthetic_demand(rng: np.random.Generator, n_min: int) -> np.ndarray:
    """A labelled SYNTHETIC inference envelope for stores without a request trace: a daily
    sine (trough 04:00, peak 16:00, +-50 %) times lognormal minute noise (sigma 0.3).
    Illustrative only, fitted to nothing.

    Returns
    -------
    ndarray of shape (n_min,), tokens per minute (arbitrary scale).
    """
    minute = np.arange(n_min)
    daily = 1.0 + 0.5 * np.sin(2 * np.pi * ((minute % 1440) / 1440 - 10 / 24))
    return daily * rng.lognormal(0.0, 0.3, n_min)


