"""The request-group arrival model of inference (hybrid power paper, Methods, "Inference request
arrivals"), an alternative to replaying one trace: requests are grouped (one pooled Code group,
Conversation Q1-Q4 by context-token quartile, after DynamoLLM), each group's per-minute request
count is negative binomial, and every group is split over the LLM templates with the template
overdispersion rescaled so the superposed count keeps the group's variance. Owns
:class:`RequestGroup`, :class:`RequestModel`, :func:`fit_request_model`,
:func:`generate_requests`, :func:`revealed_capacity` and :func:`validate` (the paper's replay
validation: revealed capacity and the power spectral density, Methods, "Batch scheduling").

Negative binomial in the NB2 form of Hilbe (2011), the paper's reference: mean ``mu``,
``Var = mu + alpha mu^2`` (``alpha = 0`` is Poisson).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: Minutes of one day (revealed capacity is a running maximum of daily percentiles).
DAY_MIN = 1440


@dataclass(frozen=True)
class RequestGroup:
    """One request group of the fitted model.

    Attributes
    ----------
    name : ``"code"`` or ``"conversation Q1"`` .. ``"conversation Q4"``
    source : dataset it was fitted on
    requests : requests of the trace in the group (whole minutes only)
    minutes : whole minutes of the trace the counts cover
    mean_per_min : fitted mean requests per minute (``mu``)
    hourly_factor : ndarray of shape (24,): ``mu_t = mean_per_min x hourly_factor[hour(t)]``
        (all 1 when the trace spans less than a day: no daily pattern can be fitted)
    alpha : NB2 dispersion of the group's per-minute count, >= 0
    var_per_min : the trace's per-minute count variance (ddof 1) the fit reproduces
    tokens : ndarray of shape (requests,): tokens of each request (prompt + completion, the
        replayed demand's unit), resampled for generated requests
    context_range : (lo, hi) context tokens of the group (quartile bounds; code: the range)
    """

    name: str
    source: str
    requests: int
    minutes: int
    mean_per_min: float
    hourly_factor: np.ndarray
    alpha: float
    var_per_min: float
    tokens: np.ndarray
    context_range: tuple[float, float]

    def template_alpha(self, n_templates: int) -> float:
        """Dispersion of one template's share (paper: "we rescale template-level overdispersion
        so that the superposed process preserves the variance of the original group-level
        arrival model"). ``T`` independent NB2 counts of mean ``mu/T`` and dispersion
        ``alpha_T`` sum to variance ``mu + alpha_T mu^2 / T``, so ``alpha_T = T alpha``; they
        then share ``p = 1 / (1 + alpha mu)`` and their sum is exactly the group's NB.

        >>> RequestGroup("code", "x", 1, 1, 1.0, np.ones(24), 0.1, 1.1, np.ones(1),
        ...              (0, 1)).template_alpha(7)
        0.7000000000000001
        """
        return self.alpha * n_templates


@dataclass(frozen=True)
class RequestModel:
    """The fitted request-group model plus the replayed series it is validated against.

    Attributes
    ----------
    groups : the :class:`RequestGroup` list (code first, then conversation Q1-Q4)
    replay_counts : ndarray of shape (n,): the traces' per-minute request counts summed over
        groups, over the whole minutes every trace covers
    replay_start : first minute of ``replay_counts``
    notes : caveats shown with the results
    validation : :func:`validate` of this model (filled by the service after fitting)
    """

    groups: tuple[RequestGroup, ...]
    replay_counts: np.ndarray
    replay_start: pd.Timestamp
    notes: tuple[str, ...] = ()
    validation: dict = field(default_factory=dict)

    def summary(self) -> list[dict]:
        """One JSON-ready dict per group (name, source, requests, minutes, mean and variance per
        minute, ``alpha``, mean tokens per request, context-token range)."""
        return [{"group": g.name, "source": g.source, "requests": g.requests,
                 "minutes": g.minutes, "mean_per_min": round(g.mean_per_min, 3),
                 "var_per_min": round(g.var_per_min, 3), "alpha": round(g.alpha, 5),
                 "mean_tokens": round(float(g.tokens.mean()), 1),
                 "context_tokens_lo": float(g.context_range[0]),
                 "context_tokens_hi": float(g.context_range[1])} for g in self.groups]


def _minute_counts(ts: pd.Series, lo: pd.Timestamp, hi: pd.Timestamp) -> np.ndarray:
    """Requests per whole minute in [lo, hi), zero-filled."""
    minute = ((ts - lo) // pd.Timedelta(minutes=1)).to_numpy()
    n = int((hi - lo) // pd.Timedelta(minutes=1))
    keep = (minute >= 0) & (minute < n)
    return np.bincount(minute[keep].astype(np.int64), minlength=n)


def _whole_minutes(ts: pd.Series) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The first and one-past-last whole minute a trace covers (its partial ends dropped)."""
    return ts.min().floor("min") + pd.Timedelta(minutes=1), ts.max().floor("min")


def _fit_nb(counts: np.ndarray, start: pd.Timestamp) -> tuple[float, np.ndarray, float]:
    """NB2 fit of per-minute counts: (mu, hourly factor, alpha).

    The mean is a per-hour-of-day level when the trace covers every hour of the day (the maximum
    likelihood mean of an NB regression on hour-of-day indicators is the per-hour sample mean,
    Hilbe 2011, ch. 6), else one constant. ``alpha`` is the moment estimator
    ``sum[(y - mu_t)^2 n/(n - p) - mu_t] / sum mu_t^2`` (``p`` fitted means; with one mean this
    is ``(s^2 - ybar) / ybar^2``, ``s^2`` the ddof-1 variance), floored at 0 (Poisson).
    """
    n = counts.size
    hours = ((start.hour * 60 + start.minute + np.arange(n)) // 60) % 24
    mu = float(counts.mean())
    factor = np.ones(24)
    if n >= DAY_MIN and mu > 0:
        by_hour = np.bincount(hours, weights=counts, minlength=24) / np.maximum(
            np.bincount(hours, minlength=24), 1)
        factor = by_hour / mu
    mu_t = mu * factor[hours]
    p = 24 if n >= DAY_MIN else 1
    if mu <= 0 or n <= p:
        return mu, factor, 0.0
    resid = float(((counts - mu_t) ** 2).sum()) * n / (n - p)
    alpha = (resid - float(mu_t.sum())) / float((mu_t ** 2).sum())
    return mu, factor, max(alpha, 0.0)


def _group(name, source, frame, lo, hi, context_range) -> RequestGroup:
    counts = _minute_counts(frame["ts"], lo, hi)
    mu, factor, alpha = _fit_nb(counts, lo)
    tokens = (frame["prompt_tokens"].fillna(0) + frame["completion_tokens"].fillna(0)).to_numpy(
        float)
    return RequestGroup(name, source, int(counts.sum()), int(counts.size), mu, factor, alpha,
                        float(counts.var(ddof=1)) if counts.size > 1 else 0.0,
                        tokens if tokens.size else np.zeros(1), context_range)


def fit_request_model(traces: list[tuple[str, pd.DataFrame]]) -> RequestModel:
    """Fit the request groups (paper, Methods, "Inference request arrivals").

    A trace whose name contains ``code`` is one pooled Code group ("generated-token
    distributions are much less sensitive to context length for Code requests"); any other is
    Conversation, split into Q1-Q4 at the quartiles of its context (prompt) tokens ("we use
    context-token quantiles to define request groups"). Counts are per whole minute of each
    trace (its partial first and last minutes dropped), zero-filled; each group gets an NB2 fit
    (:func:`_fit_nb`).

    Parameters
    ----------
    traces : ``(name, frame)`` pairs; frames have ``ts``, ``prompt_tokens``,
        ``completion_tokens`` (the ``requests`` columns of :func:`analytics.store.dataset_rows`)

    Returns
    -------
    RequestModel (``validation`` empty; see :func:`validate`)

    Raises
    ------
    ValueError
        No trace, or a trace shorter than 3 whole minutes.
    """
    if not traces:
        raise ValueError("the request-group model needs at least one request trace (Azure LLM "
                         "code / conversation)")
    groups, spans, notes = [], [], []
    for name, frame in traces:
        frame = frame.assign(ts=pd.to_datetime(frame["ts"]))
        lo, hi = _whole_minutes(frame["ts"])
        if (hi - lo) < pd.Timedelta(minutes=3):
            raise ValueError(f"{name}: fewer than 3 whole minutes of requests")
        frame = frame[(frame["ts"] >= lo) & (frame["ts"] < hi)]
        spans.append((lo, hi, frame["ts"]))
        if (hi - lo) < pd.Timedelta(days=1):
            notes.append(f"{name} spans {int((hi - lo) / pd.Timedelta(minutes=1))} minutes, "
                         "less than a day: the request model has a constant mean (no daily "
                         "pattern)")
        ctx = frame["prompt_tokens"].fillna(0).to_numpy(float)
        if "code" in name.lower():
            groups.append(_group("code", name, frame, lo, hi, (ctx.min(), ctx.max())))
            continue
        edges = np.quantile(ctx, [0.25, 0.5, 0.75])
        q = np.searchsorted(edges, ctx, side="right")
        bounds = [ctx.min(), *edges, ctx.max()]
        for k in range(4):
            groups.append(_group(f"conversation Q{k + 1}", name, frame[q == k], lo, hi,
                                 (float(bounds[k]), float(bounds[k + 1]))))
    lo = max(s[0] for s in spans)
    hi = min(s[1] for s in spans)
    if hi <= lo:
        raise ValueError("the request traces do not overlap in time")
    replay = sum(_minute_counts(ts, lo, hi) for _, _, ts in spans)
    return RequestModel(tuple(groups), np.asarray(replay), lo, tuple(notes))


def generate_requests(model: RequestModel, rng: np.random.Generator, n_min: int,
                      n_templates: int, start_minute_of_day: int = 0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Draw per-minute requests and tokens for every template (paper: "for each request group,
    we simulate independent minute-level arrival processes across these templates, dividing
    total mean arrivals equally across templates"; requests are then pooled by template).

    Template ``j`` of group ``g`` in minute ``t`` gets ``NB2(mu_t / T, alpha_T = T alpha)``
    requests (:meth:`RequestGroup.template_alpha`; Poisson when ``alpha = 0``), each carrying
    the tokens of a request of the group drawn at random from the trace.

    Parameters
    ----------
    model : the fitted :class:`RequestModel`
    rng : generator
    n_min : minutes to draw
    n_templates : ``T``, the number of LLM templates
    start_minute_of_day : clock minute of the first generated minute (selects the hour factor)

    Returns
    -------
    (requests, tokens): ndarrays of shape (n_min, n_templates), requests per minute and their
    tokens per minute.
    """
    hours = ((start_minute_of_day + np.arange(n_min)) // 60) % 24
    requests = np.zeros((n_min, n_templates), np.int64)
    tokens = np.zeros(n_min * n_templates)
    for g in model.groups:
        mu = np.repeat((g.mean_per_min * g.hourly_factor[hours] / n_templates)[:, None],
                       n_templates, axis=1)
        a = g.template_alpha(n_templates)
        if a > 0:
            r = 1.0 / a
            counts = rng.negative_binomial(r, r / (r + mu))
        else:
            counts = rng.poisson(mu)
        requests += counts
        flat = counts.ravel()
        draws = g.tokens[rng.integers(0, g.tokens.size, int(flat.sum()))]
        cell = np.repeat(np.arange(flat.size), flat)
        tokens += np.bincount(cell, weights=draws, minlength=flat.size)
    return requests, tokens.reshape(n_min, n_templates)


def revealed_capacity(series: np.ndarray, per_day: int = DAY_MIN) -> np.ndarray:
    """Revealed capacity (paper, Methods, "Batch scheduling": "the daily 99th percentile of busy
    GPUs ... revealed capacity as the running maximum of these daily 99th-percentile values"),
    applied to a per-minute series: one value per (possibly partial) day.

    >>> revealed_capacity(np.r_[np.arange(100.0), np.zeros(100)], per_day=100).tolist()
    [98.01, 98.01]
    """
    x = np.asarray(series, float)
    days = [np.percentile(x[i:i + per_day], 99) for i in range(0, x.size, per_day)]
    return np.maximum.accumulate(np.asarray(days, float))


def validate(model: RequestModel, rng: np.random.Generator, n_templates: int = 7,
             n_min: int = DAY_MIN, nperseg: int = 32) -> dict:
    """The paper's replay validation (Methods, "Batch scheduling": "we compare the resulting
    busy-... series and power spectral density with those of the observed trace"), for the
    request model: a generated per-minute request series (all groups and templates) against the
    replayed trace's, by revealed capacity (:func:`revealed_capacity`), mean and variance, and
    the Welch power spectral density (``scipy.signal.welch``, 1 sample per minute, the same
    ``nperseg`` for both so the frequency grids match, constant detrend).

    Parameters
    ----------
    model : fitted model (its ``replay_counts`` are the replayed series)
    rng : generator for the generated series
    n_templates : templates the groups are split over (the split must not change the sum)
    n_min : minutes generated (longer than the trace, so its PSD is a steady estimate)
    nperseg : Welch segment length, minutes (lowered to the trace length when shorter)

    Returns
    -------
    JSON-ready dict: ``replay_minutes``, ``generated_minutes``, ``mean_per_min`` and
    ``var_per_min`` (each ``{"replay", "generated"}``), ``revealed_capacity_per_min``
    (``{"replay", "generated"}``: the last running-maximum value; for the generated series the
    median over its ``revealed_capacity_windows`` consecutive windows as long as the replayed
    trace, since a percentile depends on the span it is taken over), ``psd_freq_per_min``,
    ``psd_replay``, ``psd_generated`` (lists, requests^2 per (1/min)), ``psd_log10_mad`` (mean
    over frequencies > 0 of ``|log10(PSD_generated / PSD_replay)|``; 0 = identical spectra),
    ``nperseg``.
    """
    from scipy.signal import welch

    replay = np.asarray(model.replay_counts, float)
    start = model.replay_start.hour * 60 + model.replay_start.minute
    gen = generate_requests(model, rng, n_min, n_templates, start)[0].sum(axis=1).astype(float)
    # revealed capacity over windows as long as the replayed trace (a p99 depends on length)
    windows = [gen[i:i + replay.size] for i in range(0, gen.size - replay.size + 1, replay.size)]
    seg = int(min(nperseg, replay.size))
    f, p_rep = welch(replay, fs=1.0, nperseg=seg)
    _, p_gen = welch(gen, fs=1.0, nperseg=seg)
    pos = (f > 0) & (p_rep > 0) & (p_gen > 0)
    mad = float(np.mean(np.abs(np.log10(p_gen[pos] / p_rep[pos])))) if pos.any() else float("nan")
    return {
        "replay_minutes": int(replay.size), "generated_minutes": int(n_min),
        "mean_per_min": {"replay": float(replay.mean()), "generated": float(gen.mean())},
        "var_per_min": {"replay": float(replay.var(ddof=1)), "generated": float(gen.var(ddof=1))},
        "revealed_capacity_per_min": {"replay": float(revealed_capacity(replay)[-1]),
                                      "generated": float(np.median(
                                          [revealed_capacity(w)[-1] for w in windows]))},
        "revealed_capacity_windows": len(windows),
        "psd_freq_per_min": f.tolist(), "psd_replay": p_rep.tolist(),
        "psd_generated": p_gen.tolist(), "psd_log10_mad": mad, "nperseg": seg,
    }
