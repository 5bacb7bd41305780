"""Output-length prediction of the serving simulator (Festina Sec. 3.2.2, "Output Token Length
Prediction"; Fig. 7 bins the predictor's errors at +-2.5, +-5 and +-10 %).

A scheduler cannot know how many tokens a request will generate until it has generated them.
Everything in the simulator that *schedules* reads the predicted output length of each request:
the global scheduler's lookup energy of a request (its decode tokens,
:meth:`analytics.serving.placement.Placement.offer`), the serverless warm start's steady need
(mean output per model), the local scheduler's per-sequence TBT budget and decode tokens left
(:meth:`analytics.serving.local_scheduler.LocalScheduler.predicted_left`) and hence the clock,
the SM shares and Eq. 9's decode time. Only the simulated execution -- when a sequence really
ends, and its measured TBT -- uses the true length. A running sequence that outlives its
prediction is expected, by the scheduler, to end at its next token.

Predictors (:class:`analytics.serving.params.ServingParams` ``length_predictor``)
    ``oracle`` (default): a noisy oracle at the paper's error levels. Each request's prediction
    is its true length times ``1 + L*u``, ``u ~ Uniform(-1, 1)`` drawn per request from a
    generator seeded by ``seed`` (a stream apart from the model assignment, so every error level
    replays the same requests on the same models and the same ``u``), rounded to whole tokens,
    at least 1. ``L = length_error``: default 5 %, the middle of the paper's 2.5-10 % levels
    (the staged paper text gives Fig. 7's bins, not their heights); 0 gives the true lengths,
    i.e. the simulator as it ran before prediction existed, exactly.
    ``quantile``: per model, the ``length_quantile`` quantile of the output lengths observed in
    the trace's first ``length_fit_s`` seconds (the fit window: requests there are assigned to models
    with the same Zipf popularity, from their own seeded stream); a model with fewer than
    :data:`MIN_FIT` requests there gets the pooled quantile. The replay starts after the fit
    window (:func:`analytics.serving.workload.trace_arrays` ``start_s``), so no replayed request
    is in the fit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: predictors (``ServingParams.length_predictor``)
PREDICTORS = ("oracle", "quantile")
#: the paper's error levels (Festina Fig. 7 bins) plus 0 (true lengths): the sweep's oracle rows
ERROR_LEVELS = (0.0, 0.025, 0.05, 0.10)
#: fewer fit requests than this for a model: the quantile predictor uses the pooled quantile
MIN_FIT = 20
#: seed streams (``default_rng([seed, stream])``), apart from the model assignment's
_NOISE_STREAM, _FIT_MODEL_STREAM = 101, 102


def oracle_lengths(output: np.ndarray, error: float, seed: int) -> np.ndarray:
    """Noisy-oracle predictions ``max(round(output * (1 + error * u)), 1)``, ``u ~ U(-1, 1)``
    per request (seeded); ``error`` 0 returns the true lengths exactly.

    Parameters
    ----------
    output : (N,) true output tokens (>= 1)
    error : multiplicative error level L (0.05 = +-5 %), 0 <= L < 1
    seed : seed of the noise stream

    Returns (N,) float predicted output tokens (whole numbers >= 1).
    """
    out = np.asarray(output, dtype=float)
    if error == 0:
        return out.copy()
    u = np.random.default_rng([seed, _NOISE_STREAM]).uniform(-1.0, 1.0, len(out))
    return np.maximum(np.rint(out * (1.0 + error * u)), 1.0)


def fit_quantiles(fit_output: np.ndarray, fit_models: np.ndarray, n_models: int, q: float
                  ) -> np.ndarray:
    """Per-model ``q`` quantile of the fit window's output lengths, rounded to whole tokens
    (>= 1); a model with fewer than :data:`MIN_FIT` fit requests gets the pooled quantile.

    Returns (n_models,) float. Raises ValueError when the fit window holds no request.
    """
    fit_output = np.asarray(fit_output, dtype=float)
    if not len(fit_output):
        raise ValueError("the quantile length predictor has no request to fit on: the fit "
                         "window (length_fit_s) at the start of the trace is empty")
    pooled = float(np.quantile(fit_output, q))
    out = np.full(n_models, pooled)
    for j in range(n_models):
        mine = fit_output[fit_models == j]
        if len(mine) >= MIN_FIT:
            out[j] = float(np.quantile(mine, q))
    return np.maximum(np.rint(out), 1.0)


def predict_lengths(trace: pd.DataFrame, models: np.ndarray, popularity: np.ndarray, params,
                    fit: pd.DataFrame | None = None) -> tuple[np.ndarray, str]:
    """Predicted output tokens of every replayed request by ``params.length_predictor`` (see the module
    docstring) and a note saying which predictor and how far off it is on this replay.

    Parameters
    ----------
    trace : the replayed requests (``output`` column: true output tokens)
    models : (N,) model slot of each replayed request
    popularity : (M,) Zipf popularity of the models (assigns the fit window's requests)
    params : :class:`analytics.serving.params.ServingParams`
    fit : requests of the fit window (``output``), needed by the ``quantile`` predictor

    Returns ``(predicted (N,) float, note)``. Raises ValueError for an unknown predictor or a
    quantile predictor without a fit window.
    """
    output = trace["output"].to_numpy(np.int64)
    if params.length_predictor == "oracle":
        pred = oracle_lengths(output, params.length_error, params.seed)
        what = (f"a noisy oracle, true length x (1 + e), e uniform within "
                f"+-{100 * params.length_error:g} %")
    elif params.length_predictor == "quantile":
        if fit is None:
            raise ValueError("the quantile length predictor needs the fit window's requests")
        fit_models = np.random.default_rng([params.seed, _FIT_MODEL_STREAM]).choice(
            len(popularity), size=len(fit), p=popularity)
        per_model = fit_quantiles(fit["output"].to_numpy(float), fit_models, len(popularity),
                                  params.length_quantile)
        pred = per_model[np.asarray(models, dtype=np.int64)]
        what = (f"the per-model q{params.length_quantile:g} of {len(fit):,} output lengths in "
                f"the trace's first {params.length_fit_s:g} s (not replayed)")
    else:
        raise ValueError(f"unknown output-length predictor {params.length_predictor!r}; choose one of "
                         f"{', '.join(PREDICTORS)}")
    err = mean_abs_error(pred, output)
    note = (f"Output lengths are predicted ({what}): the schedulers read the prediction, the "
            f"simulated execution the true length; mean |error| {100 * err:.1f} %")
    return pred, note


def mean_abs_error(pred: np.ndarray, output: np.ndarray) -> float:
    """Mean relative prediction error ``mean(|pred / true - 1|)`` (fraction; 0 when empty)."""
    output = np.asarray(output, dtype=float)
    return float(np.mean(np.abs(np.asarray(pred) / output - 1.0))) if len(output) else 0.0
