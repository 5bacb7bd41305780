"""The demand envelope: point forecasts + conformal intervals + measured coverage, end to end.

One code path for the CLI (``headroom envelope``) and the Demand / Coverage pages: both call
:func:`run_envelope` on a grid and read the same :class:`EnvelopeResult`.

Source: "Conformal GPU Demand Envelopes and Power-Aware Scheduling for Heterogeneous AI Clusters
under Cold Start and Cross-Cloud Shift" (abstract): chronological fit / calibration / test split
(42/9/10 days), point models compared by WAPE and MAE with a block-bootstrap interval of the MAE
gain over daily seasonality, and interval methods compared by coverage and mean width.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from analytics.envelope import forecast, metrics, repair
from analytics.envelope.conformal_methods import split_conformal
from analytics.envelope.grid import chronological_split
from analytics.envelope.intervals import IntervalData, Intervals
from analytics.envelope.mondrian import regimes, tercile_edges
from analytics.envelope.online import online_conformal, residuals
from analytics.envelope.registry import METHODS
from analytics.params import check, knob


@dataclass(frozen=True)
class EnvelopeParams:
    """Knobs of an envelope run (each field's help, unit and bounds: :func:`analytics.params.knob`).

    Attributes
    ----------
    alpha : miscoverage; intervals aim at ``1 - alpha`` coverage
    horizon : bins ahead
    split_days : (fit, calibration, test) days; default the paper's 42/9/10 when the series is
        long enough, else ``split_frac``
    split_frac : (fit, calibration, test) fractions, default 0.69/0.15/0.16
    base_model : point model the residual-based intervals wrap (split, rolling, aci, regime);
        ``"auto"``: the learned model with the lowest WAPE on the calibration window (chosen
        after every point model is fitted, before any interval; :attr:`EnvelopeResult.base_choice`
        says which and why, and the result's ``params`` name it)
    aci_gamma : ACI step size (Gibbs & Candes 2021 use 0.005)
    baseline : model the MAE gain is measured against (the paper: daily seasonality)
    seed : random seed of the learned models and of the bootstrap
    n_boot : bootstrap resamples of the MAE gain interval

    Raises
    ------
    ValueError : a knob outside its bounds (alpha outside (0, 1), an unknown base model, ...)
    """

    alpha: float = knob(0.1, "miscoverage: intervals aim at 1 - alpha coverage", lo=0.0, hi=1.0,
                        lo_open=True, hi_open=True)
    horizon: int = knob(1, "bins ahead of the forecast", "bins", lo=1)
    split_days: tuple[int, int, int] | None = knob(
        None, "fit, calibration, test days (default 42/9/10 when the series is long enough)",
        "days", cli=False)
    split_frac: tuple[float, float, float] | None = knob(
        None, "fit, calibration, test fractions (default 0.69/0.15/0.16)", cli=False)
    base_model: str = knob("hgb", "point model the residual-based intervals wrap (auto: the "
                           "learned model with the lowest calibration WAPE)",
                           choices=(*forecast.LEARNED, forecast.AUTO))
    aci_gamma: float = knob(0.005, "ACI step size (Gibbs & Candes 2021 use 0.005)", lo=0.0)
    baseline: str = knob("seasonal_daily", "model the MAE gain is measured against (one "
                         "that cannot forecast the test window falls back to persistence)")
    seed: int = knob(0, "seed of the learned models and of the bootstrap")
    n_boot: int = knob(2000, "bootstrap resamples of the MAE gain interval", lo=1)

    def __post_init__(self):
        check(self)


@dataclass
class EnvelopeResult:
    """Everything the pages and the CLI show.

    Attributes
    ----------
    series : DataFrame (n_bins rows): ``ts``, ``y``, ``part`` (fit / calibration / test) and one
        column per point model (NaN where it cannot forecast)
    test : DataFrame (n_test rows): ``ts``, ``y``, ``hour``, ``regime``, and ``<method>_lo`` /
        ``<method>_hi`` per interval method, ``aci_alpha`` (the alpha_t path)
    point_metrics : DataFrame, one row per model: wape, mae, rmse on the test window
    interval_metrics : DataFrame, one row per method: coverage, mean_width (of finite
        intervals), infinite_bins, winkler (interval score; inf if any interval is infinite)
    mae_gain : dict, MAE(baseline) - MAE(base_model) with its block-bootstrap interval, the
        block length and the rule that chose it, and a warning when fewer than 10 blocks fit
    split : dict, start / end / bins of each part, and the mode (days / fractions)
    hourly : DataFrame: method, hour, coverage, bins
    by_regime : DataFrame: method, group (regime), coverage, bins
    rolling : DataFrame: ts, method, coverage (trailing day, or a quarter of a shorter test
        window)
    alarm : dict from :func:`analytics.envelope.metrics.shift_alarm` plus its ``ts``
    base_choice : None, or (``base_model="auto"``) how the point model was chosen:
        ``{"chosen", "by": "calibration WAPE", "wape": {model: WAPE on the calibration
        window, or None}, "reason"}``
    repairs : DataFrame, one row per point model (``kind`` = ``"point"``) and per interval
        method (``kind`` = ``"interval"``): ``bins``, ``repaired_negative_point``,
        ``repaired_negative_lower``, ``repaired_negative_upper``, ``repaired_crossing``,
        ``point_outside_band`` (:mod:`analytics.envelope.repair`). Every forecast in
        ``series`` and ``test`` is already repaired: ``0 <= <method>_lo <= yhat <= <method>_hi``
        on every test row, and every coverage, width and interval score is measured on the
        repaired band.
    """

    series: pd.DataFrame
    test: pd.DataFrame
    point_metrics: pd.DataFrame
    interval_metrics: pd.DataFrame
    mae_gain: dict
    split: dict
    hourly: pd.DataFrame
    by_regime: pd.DataFrame
    rolling: pd.DataFrame
    alarm: dict
    params: EnvelopeParams = field(default_factory=EnvelopeParams)
    repairs: pd.DataFrame = field(default_factory=lambda: repair.repairs_frame([]))
    base_choice: dict | None = None


@dataclass(frozen=True)
class _Windows:
    """Row positions of a run: fit rows with full features, calibration rows with full
    features, test rows (all with full features)."""

    fit: np.ndarray
    cal: np.ndarray
    test: np.ndarray


def _windows(split, feats: forecast.Features, alpha: float) -> _Windows:
    """Usable rows of each window; ValueError when a window is too short for ``alpha``."""
    fit_rows = np.arange(split.fit.start, split.fit.stop)
    cal = np.arange(split.calibration.start, split.calibration.stop)
    cal = cal[feats.valid[cal]]
    test = np.arange(split.test.start, split.test.stop)
    if not feats.valid[test].all():
        raise ValueError("the test window starts before the features have enough history; "
                         "use a longer series or a larger fit fraction")
    # CQR conformalizes each tail at alpha / 2 (MAPIE needs more than 2 / alpha calibration
    # scores); split conformal needs 1 / alpha + 1: the stricter one decides
    need = int(np.ceil(max(2 / alpha, 1 / (1 - alpha) + 1)))
    if len(cal) < need:
        smallest = f"; the smallest alpha it supports is {2 / len(cal):.3g}" \
            if len(cal) > 2 else ""
        raise ValueError(f"only {len(cal)} calibration bins with full features; alpha = "
                         f"{alpha:g} needs at least {need}{smallest}: use a longer series, "
                         "finer bins or a larger alpha")
    fit_ok = fit_rows[feats.valid[fit_rows]]
    if len(fit_ok) < 20:
        raise ValueError(f"only {len(fit_ok)} fit bins with full features; need at least 20")
    return _Windows(fit_ok, cal, test)


def _point_metrics(y: np.ndarray, preds: dict[str, np.ndarray], test: np.ndarray,
                   params: EnvelopeParams) -> tuple[pd.DataFrame, dict]:
    """WAPE / MAE / RMSE of every model that forecasts the whole test window, and the
    block-bootstrap interval of the MAE gain of the base model over the baseline (block length
    by the Politis-White rule, :func:`analytics.envelope.forecast.block_bootstrap_mae_diff`)."""
    rows = []
    for name, p in preds.items():
        if np.isfinite(p[test]).all():
            rows.append({"model": name, "wape": forecast.wape(y[test], p[test]),
                         "mae": forecast.mae(y[test], p[test]),
                         "rmse": forecast.rmse(y[test], p[test])})
    rng = np.random.default_rng(params.seed)
    finite = {m for m, p in preds.items() if np.isfinite(p[test]).all()}
    baseline = params.baseline if params.baseline in finite else "persistence"
    gain = forecast.block_bootstrap_mae_diff(  # block length: Politis-White (issue 18 item 8)
        y[test] - preds[baseline][test], y[test] - preds[params.base_model][test],
        None, rng, params.n_boot,
    )
    gain.update({"baseline": baseline, "model": params.base_model})
    return pd.DataFrame(rows), gain


def residual_stream(series: pd.DataFrame, base_model: str) -> pd.DataFrame:
    """The base model's out-of-sample residual stream of a run, in time order.

    The calibration bins the model forecasts (full features), then every test bin: the model
    was fitted on the fit window only, so none of these residuals is in sample. The envelope's
    rolling and ACI methods are seeded with the calibration part and refreshed with the test
    part (:func:`run_envelope` cuts its calibration and test windows from this frame), and the
    capacity path (:func:`analytics.decisions.capacity.plan`) reads the same frame, so both
    see the same residuals (issue 18 item 9: the capacity path used to seed its window with
    in-sample fit residuals).

    Parameters
    ----------
    series : :attr:`EnvelopeResult.series` (``ts``, ``y``, ``part`` and the model columns)
    base_model : the model column whose residuals are streamed

    Returns
    -------
    DataFrame (n_cal + n_test rows): ``row`` (position in ``series``), ``ts``, ``part``
    (``calibration`` / ``test``), ``y``, ``yhat`` and ``residual`` = ``y - yhat``
    (:func:`analytics.envelope.online.residuals`), in the target's unit.
    """
    part = series["part"].to_numpy()
    yhat = series[base_model].to_numpy(float)
    rows = np.flatnonzero(((part == "calibration") & np.isfinite(yhat)) | (part == "test"))
    y = series["y"].to_numpy(float)[rows]
    return pd.DataFrame({"row": rows, "ts": series["ts"].to_numpy()[rows], "part": part[rows],
                         "y": y, "yhat": yhat[rows], "residual": residuals(y, yhat[rows])})


def interval_bands(data: IntervalData, params: EnvelopeParams) -> dict[str, Intervals]:
    """Every registered interval method (:data:`analytics.envelope.registry.METHODS`, in order)
    on one run's windows.

    Raises
    ------
    ValueError : a method cannot be fitted (MAPIE / scikit-learn refusing a tiny or degenerate
        grid)
    """
    bands = {}
    for name, method in METHODS.items():
        try:
            bands[name] = method.from_params(params).predict_interval(data)
        except ValueError as exc:
            raise ValueError(f"the intervals cannot be fitted on this grid: {exc}") from exc
    return bands


def _measure(out: pd.DataFrame, bands: dict[str, Intervals], alpha: float, per_day: int,
             raw_point: np.ndarray) -> tuple[list[dict], list, list, list, list[dict]]:
    """Repair each band (:func:`analytics.envelope.repair.repair_band`: sorted, clipped at 0,
    extended to the point ``out["yhat"]``), write ``<method>_lo`` / ``_hi`` into ``out`` and
    measure the repaired band: summary rows, per-hour, per-regime and rolling coverage frames,
    and one repair-count row per method."""
    metric_rows, hourly, by_regime, rolling, repair_rows = [], [], [], [], []
    y_test = out["y"].to_numpy()
    point = out["yhat"].to_numpy()
    window = min(per_day, max(12, len(out) // 4))
    for m, band in bands.items():
        lo, hi, counts = repair.repair_band(point, band.lower, band.upper, raw_point)
        repair_rows.append({"kind": "interval", "method": m, **counts})
        out[f"{m}_lo"], out[f"{m}_hi"] = lo, hi
        hit = metrics.covered(y_test, lo, hi)
        metric_rows.append({"method": m, **metrics.summary(y_test, lo, hi, alpha)})
        hourly.append(metrics.coverage_by(out["hour"].to_numpy(), hit).assign(method=m))
        by_regime.append(metrics.coverage_by(out["regime"].to_numpy(), hit).assign(method=m))
        rolling.append(metrics.rolling_coverage(out["ts"], hit, window).assign(method=m))
    return metric_rows, hourly, by_regime, rolling, repair_rows


def run_envelope(grid: pd.DataFrame, bin_s: int, params: EnvelopeParams | None = None
                 ) -> EnvelopeResult:
    """Fit point models, build every interval method, and measure them on the test window.

    Pure: reads nothing from the store. Demand is never negative: every point forecast is
    clipped at 0 before it is measured or wrapped by an interval method, and every band is
    repaired to ``0 <= lower <= point <= upper`` (:mod:`analytics.envelope.repair`); the
    repairs are counted in :attr:`EnvelopeResult.repairs`, and coverage is measured on the
    repaired band.

    Parameters
    ----------
    grid : complete grid with ``ts`` and ``target`` (from :func:`analytics.services.demand.demand_grid`)
    bin_s : bin width in seconds
    params : see :class:`EnvelopeParams`

    Raises
    ------
    ValueError : too few bins for a split, or a calibration window without usable rows
    """
    params = params or EnvelopeParams()
    with forecast.single_threaded():  # small fits: one thread each (issue 15 profile)
        return _run_envelope(grid, bin_s, params)


def _parts(n: int, split) -> np.ndarray:
    """``"fit"`` / ``"calibration"`` / ``"test"`` per bin of a :func:`chronological_split`."""
    part = np.empty(n, dtype=object)
    part[split.fit], part[split.calibration], part[split.test] = "fit", "calibration", "test"
    return part


def split_preview(grid: pd.DataFrame, bin_s: int, params: EnvelopeParams | None = None
                  ) -> pd.DataFrame:
    """The bins an envelope of ``grid`` would be fitted, calibrated and tested on, before any
    fit: ``ts``, ``y`` (the target) and ``part`` (fit / calibration / test), one row per bin,
    from the same :func:`~analytics.envelope.grid.chronological_split` as :func:`run_envelope`
    (paper split 42/9/10 days when the series is long enough, else fractions). Cheap: pages
    draw it while the envelope is fitted.

    Raises
    ------
    ValueError
        Too few bins for a split (as :func:`run_envelope`).
    """
    params = params or EnvelopeParams()
    n = len(grid)
    split = chronological_split(n, bin_s, params.split_days, params.split_frac)
    return pd.DataFrame({"ts": pd.to_datetime(grid["ts"]).reset_index(drop=True),
                         "y": grid["target"].to_numpy(dtype=float), "part": _parts(n, split)})


def _run_envelope(grid: pd.DataFrame, bin_s: int, params: EnvelopeParams) -> EnvelopeResult:
    """:func:`run_envelope` under the caller's thread limits."""
    from analytics.envelope.estimators import NonNegative  # scikit-learn: only where it fits

    y = grid["target"].to_numpy(dtype=float)
    ts = pd.to_datetime(grid["ts"]).reset_index(drop=True)
    n = len(y)
    split = chronological_split(n, bin_s, params.split_days, params.split_frac)
    feats = forecast.make_features(y, ts, bin_s, params.horizon)
    fit_rows = np.arange(split.fit.start, split.fit.stop)
    rows = _windows(split, feats, params.alpha)  # before any fit: a refusal is instant
    raw_preds, fitted = forecast.point_forecasts(y, feats, fit_rows, params.seed)
    preds, point_repairs = repair.clip_points(raw_preds)
    choice = None
    if params.base_model == forecast.AUTO:
        choice = forecast.auto_base_model(y, preds, split.calibration)
        params = replace(params, base_model=choice["chosen"])

    series = pd.DataFrame({"ts": ts, "y": y, "part": _parts(n, split), **preds})
    stream = residual_stream(series, params.base_model)  # the windows every method reads
    cal = stream.loc[stream["part"] == "calibration", "row"].to_numpy()
    test = stream.loc[stream["part"] == "test", "row"].to_numpy()
    point_metrics, gain = _point_metrics(y, preds, test, params)

    X, base = feats.X, NonNegative(fitted[params.base_model])
    yhat = preds[params.base_model]
    data = IntervalData(params.alpha, params.seed, base, X[rows.fit], y[rows.fit], X[cal],
                        y[cal], yhat[cal], ts[cal], X[test], y[test], yhat[test], ts[test])
    bands = interval_bands(data, params)
    out = pd.DataFrame({"ts": ts[test].to_numpy(), "y": y[test],
                        "hour": ts[test].dt.hour.to_numpy(), "yhat": yhat[test]})
    out["regime"] = regimes(ts[test], yhat[test], tercile_edges(yhat[cal]))
    for m, band in bands.items():  # per-bin extras, e.g. ACI's alpha_t path -> aci_alpha
        for key, value in band.extras.items():
            if isinstance(value, np.ndarray) and value.shape == (len(test),):
                out[f"{m}_{key}"] = value
    metric_rows, hourly, by_regime, rolling, band_repairs = _measure(
        out, bands, params.alpha, feats.per_day, raw_preds[params.base_model][test])

    stream = np.concatenate([cal, test])
    alarm = metrics.shift_alarm(base, X[stream], y[stream], seed=params.seed)
    alarm["ts"] = ts[stream].to_numpy()
    alarm["test_start"] = int(len(cal))

    return EnvelopeResult(
        series=series, test=out, point_metrics=point_metrics,
        interval_metrics=pd.DataFrame(metric_rows), mae_gain=gain,
        split={"mode": split.mode, **split.bounds(ts)},
        hourly=pd.concat(hourly, ignore_index=True).rename(columns={"group": "hour"}),
        by_regime=pd.concat(by_regime, ignore_index=True).rename(columns={"group": "regime"}),
        rolling=pd.concat(rolling, ignore_index=True), alarm=alarm, params=params,
        repairs=repair.repairs_frame(point_repairs + band_repairs), base_choice=choice,
    )


def _defined(value: float, path: str, reason: str, reasons: dict[str, str]) -> float | None:
    """``value``, or None with ``reasons[path] = reason`` when it is not a finite number."""
    if value is not None and np.isfinite(value):
        return float(value)
    reasons[path] = reason
    return None


def _repairs_json(repairs: pd.DataFrame) -> dict:
    """``{"point": {model: counts}, "intervals": {method: counts}}`` with int counts."""
    doc: dict[str, dict] = {"point": {}, "intervals": {}}
    for row in repairs.to_dict("records"):
        kind = "point" if row.pop("kind") == "point" else "intervals"
        name = row.pop("method")
        doc[kind][name] = {k: int(v) for k, v in row.items()}
    return doc


def to_json(result: EnvelopeResult) -> dict:
    """The CLI document: split, point metrics, MAE gain interval, interval metrics, alarm, and
    ``repairs`` (``{"point": {model: counts}, "intervals": {method: counts}}``, the counts of
    :attr:`EnvelopeResult.repairs`; coverage is measured on the repaired band).

    Strict JSON values only: an undefined metric is null and ``null_reasons`` maps its path
    (e.g. ``point.hgb.wape``) to why (zero demand in the test window; every interval unbounded).
    """
    alarm = result.alarm
    first = alarm["first_alarm"]
    reasons: dict[str, str] = {}
    point = {r.model: {"wape": _defined(r.wape, f"point.{r.model}.wape", forecast.WAPE_UNDEFINED,
                                        reasons),
                       "mae": r.mae, "rmse": r.rmse}
             for r in result.point_metrics.itertuples()}
    unbounded = "every test interval is unbounded (ACI alpha_t reached 0); see infinite_bins"
    intervals = {r.method: {"coverage": r.coverage,
                            "mean_width": _defined(r.mean_width, f"intervals.{r.method}.mean_width",
                                                   unbounded, reasons),
                            "infinite_bins": r.infinite_bins,
                            "winkler": _defined(r.winkler, f"intervals.{r.method}.winkler",
                                                "unbounded intervals have an infinite interval "
                                                "score", reasons)}
                 for r in result.interval_metrics.itertuples()}
    choice = {} if result.base_choice is None else {"base_model_choice": result.base_choice}
    return {
        "split": result.split,
        "alpha": result.params.alpha,
        "horizon_bins": result.params.horizon,
        **choice,
        "point": point,
        "mae_gain_ci": result.mae_gain,
        "intervals": intervals,
        "null_reasons": reasons,
        "repairs": _repairs_json(result.repairs),
        "shift_alarm": {
            "threshold": alarm["threshold"],
            "max_martingale": float(np.max(alarm["martingale"])),
            "first_alarm_ts": None if first is None else pd.Timestamp(alarm["ts"][first]).isoformat(),
        },
    }


@forecast.one_thread  # small fits: one thread each (issue 15 profile)
def cold_start(source: pd.DataFrame, target: pd.DataFrame, bin_s: int,
               k_hours: tuple[int, ...] = (6, 12, 24, 48), params: EnvelopeParams | None = None
               ) -> pd.DataFrame:
    """Cold start under cross-trace shift: fit on one trace, calibrate on the first k hours of
    another, measure coverage on the rest of it.

    The envelopes paper's cold-start setting (title: "under Cold Start and Cross-Cloud Shift").
    Traces differ in unit and scale (tokens vs GPU-seconds), so each is divided by its own
    scale known at forecast time - the source by its mean, the target by the mean of its first
    ``k`` hours - and intervals are mapped back to the target's unit. Features are restricted to
    what ``k`` hours of target history allow (no same-bin-yesterday below one day).

    Methods compared on the target's bins after hour ``k``:

    - ``source_calibrated``: split conformal calibrated on the source's last 15 % (no target data)
    - ``split``: split conformal calibrated on the target's first ``k`` hours
    - ``aci``: ACI started from those ``k`` hours of residuals (adapts as target data arrive)

    Parameters
    ----------
    source, target : grids with ``ts`` and ``target``
    k_hours : calibration lengths to try

    Returns
    -------
    DataFrame with k_hours, method, coverage, mean_width (target unit), n_calibration, n_eval

    Raises
    ------
    ValueError : the target is shorter than the largest ``k`` plus one day
    """
    params = params or EnvelopeParams()
    if not k_hours or min(k_hours) < 1:
        raise ValueError("calibration lengths must be at least 1 hour")
    per_hour = max(1, int(round(3600 / bin_s)))
    y_s = source["target"].to_numpy(float)
    y_t = target["target"].to_numpy(float)
    if len(y_t) < (max(k_hours) + 24) * per_hour:
        raise ValueError(f"the target has {len(y_t) / per_hour:.0f} h of bins; need at least "
                         f"{max(k_hours) + 24} h for k up to {max(k_hours)} h")
    s_scale = y_s.mean() or 1.0
    rows = []
    for k in k_hours:
        n_cal = k * per_hour
        t_scale = y_t[:n_cal].mean() or 1.0
        fs = forecast.make_features(y_s / s_scale, source["ts"], bin_s, params.horizon, n_cal)
        ft = forecast.make_features(y_t / t_scale, target["ts"], bin_s, params.horizon, n_cal)
        n_fit = int(len(y_s) * 0.85)
        fit_rows = np.flatnonzero(fs.valid[:n_fit])
        if len(fit_rows) < 50:
            raise ValueError(f"the source trace has {len(fit_rows)} usable bins at this bin "
                             "width; fit on a longer trace")
        model = forecast.make_model(params.base_model, params.seed)
        model.fit(fs.X[fit_rows], y_s[fit_rows] / s_scale)
        src_cal = np.arange(n_fit, len(y_s))[fs.valid[n_fit:]]
        cal = np.flatnonzero(ft.valid[:n_cal])
        if len(cal) < 11 or len(np.arange(n_fit, len(y_s))[fs.valid[n_fit:]]) < 11:
            raise ValueError(f"{k} h gives {len(cal)} usable calibration bins; need at least "
                             "11 (use finer bins or a larger k)")
        ev = np.arange(n_cal, len(y_t))
        yt_n = y_t / t_scale
        yhat_ev = model.predict(ft.X[ev])
        bands = {
            "source_calibrated": split_conformal(
                model, fs.X[src_cal], y_s[src_cal] / s_scale, ft.X[ev], params.alpha),
            "split": split_conformal(model, ft.X[cal], yt_n[cal], ft.X[ev],
                                               params.alpha),
        }
        init = yt_n[cal] - model.predict(ft.X[cal])
        lo, hi, _ = online_conformal(yt_n[ev], yhat_ev, init, params.alpha,
                                               params.aci_gamma)
        bands["aci"] = (lo, hi)
        for method, (lo, hi) in bands.items():
            rows.append({"k_hours": k, "method": method,
                         "coverage": metrics.coverage(yt_n[ev], lo, hi),
                         "mean_width": metrics.mean_width(lo, hi) * t_scale,
                         "n_calibration": int(len(cal)), "n_eval": int(len(ev))})
    return pd.DataFrame(rows)
