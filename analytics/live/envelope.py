"""The envelope of a running fleet, updated bin by bin (issue 29 item 3).

Fitted once on stored history (a trace ingested earlier, or the live series' own past): the
point model (:data:`analytics.envelope.forecast.LEARNED`, ``"auto"``: the one with the lowest
WAPE on the calibration window) is fitted on the first part of the history, and its signed
residuals on the last :attr:`LiveEnvelope.cal_frac` are ACI's starting window (Gibbs & Candes
2021; :class:`analytics.envelope.online.OnlineConformal`, the same steps as the offline ACI
of the Demand and Coverage pages, so online and offline agree bin for bin on one series).
Then, as each bin closes: the one-bin-ahead forecast from the history and the bins so far, the
band, and after the demand is known the ACI update, the coverage so far (a measured number)
and the alarm: demand above the upper bound ``k_above`` bins in a row. A one-bin-ahead
forecast reads the last bins, so a surge would lift the next forecasts and hide itself; while
demand is above the band (before the alarm), the forecasts read the upper bound in place of
the bins above it, so a lasting surge stays above the band and raises the alarm at its
``k_above``-th bin, while a single high bin does not. After the alarm the forecasts read the
demand again (the band follows the new level).

The shift martingale (MAPIE ``OnlineMartingaleTest``, the test of the Coverage page's shift
alarm, run on the live bins) is reported with each bin (``martingale``, ``martingale_over``)
but raises no alarm unless ``martingale_alarm``: on demand with a daily cycle the absolute
residuals are not exchangeable by design (measured on the BurstGPT week: it crossed its
threshold at the 52nd live bin with no surge, and fed the calibration bins too, before the
first live bin). A bin whose demand is unknown (a gap in the source) gets a forecast and a band
but no update, and is counted apart.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics.envelope import forecast
from analytics.envelope.online import OnlineConformal, residuals

#: Scores the shift test's p-values are against (two weeks of 5-minute bins): memory stays
#: bounded however long the live road runs.
SCORE_WINDOW = 4032


@dataclass(frozen=True)
class LiveBin:
    """One closed bin: ``ts`` (start, naive UTC), ``demand`` (the target; None in a gap),
    ``point``, ``lower``, ``upper`` (the band, clipped at 0), ``alpha_t``, ``covered`` (None
    in a gap), ``above`` (demand above the upper bound), ``alarm`` and ``alarm_reason`` (None,
    or why), ``martingale`` (the shift test's value after this bin; ``martingale_over``: above
    its threshold), ``coverage_so_far`` (share
    of the live bins with known demand inside their band; None before the first) and
    ``gap_reason``."""

    ts: pd.Timestamp
    demand: float | None
    point: float
    lower: float
    upper: float
    alpha_t: float
    covered: bool | None
    above: bool
    alarm: bool
    coverage_so_far: float | None
    gap_reason: str | None = None
    alarm_reason: str | None = None
    martingale: float | None = None
    martingale_over: bool = False

    def as_dict(self) -> dict:
        """Strict-JSON values (ISO time, None for undefined)."""
        return {"ts": self.ts.isoformat(), "demand": self.demand, "point": self.point,
                "lower": self.lower, "upper": self.upper, "alpha_t": self.alpha_t,
                "covered": self.covered, "above": self.above, "alarm": self.alarm,
                "alarm_reason": self.alarm_reason, "martingale": self.martingale,
                "martingale_over": self.martingale_over,
                "coverage_so_far": self.coverage_so_far, "gap_reason": self.gap_reason}


class LiveEnvelope:
    """ACI over live bins, started from stored history.

    Parameters
    ----------
    history : DataFrame ``ts`` (bin starts, complete grid), ``target`` (weighted tokens)
    bin_s : bin width (s)
    alpha : target miscoverage (the band aims at ``1 - alpha`` coverage)
    base_model : a learned model name, or ``"auto"``
    gamma : ACI step size
    k_above : bins in a row above the upper bound that raise the alarm
    cal_frac : share of the history (its end) whose residuals start ACI's window
    seed : seed of the point model
    martingale_alarm : let the shift martingale raise the alarm too (see the module doc)

    Raises
    ------
    ValueError : ``alpha`` not in (0, 1), ``k_above`` or ``bin_s`` below 1, or a history too
        short to fit and calibrate on (fewer than 2 days of bins with full features in the fit
        part, or fewer than ``2 / alpha`` calibration bins)
    """

    @staticmethod
    def split(history: pd.DataFrame, bin_s: int, alpha: float = 0.1, k_above: int = 4,
              cal_frac: float = 0.2):
        """``(y, features, fit rows, calibration rows)`` of ``history``, or the ValueError
        :class:`LiveEnvelope` raises, without fitting (callers check before a slow read)."""
        if not 0 < alpha < 1:
            raise ValueError(f"alpha {alpha!r} must be strictly between 0 and 1")
        if int(k_above) < 1 or int(bin_s) < 1:
            raise ValueError(f"k_above ({k_above!r}) and bin_s ({bin_s!r}) must be >= 1")
        y = np.asarray(history["target"], float)
        feats = forecast.make_features(y, pd.Series(pd.to_datetime(history["ts"])), int(bin_s), 1)
        n = len(y)
        n_cal = int(round(n * cal_frac))
        fit_rows = np.arange(0, n - n_cal)
        cal = np.arange(n - n_cal, n)
        cal = cal[feats.valid[cal]]
        fit_ok = fit_rows[feats.valid[fit_rows]]
        if fit_ok.size < 2 * feats.per_day or cal.size < max(2 / alpha, 10):
            raise ValueError(f"the history has {n} bins ({fit_ok.size} to fit on with full "
                             f"features, {cal.size} to calibrate on): the live envelope needs "
                             f"2 days to fit and {max(2 / alpha, 10):.0f} calibration bins")
        return y, feats, fit_rows, cal

    def __init__(self, history: pd.DataFrame, bin_s: int, alpha: float = 0.1,
                 base_model: str = "hgb", gamma: float = 0.005, k_above: int = 4,
                 cal_frac: float = 0.2, seed: int = 0, martingale_alarm: bool = False):
        y, feats, fit_rows, cal = self.split(history, bin_s, alpha, k_above, cal_frac)
        self.bin_s, self.alpha, self.k_above = int(bin_s), float(alpha), int(k_above)
        self.martingale_alarm = bool(martingale_alarm)
        self.ts = list(pd.to_datetime(history["ts"]))
        self.y = list(y)
        self.names = feats.names
        n = len(y)
        models = forecast.LEARNED if base_model == forecast.AUTO else (base_model,)
        preds, fitted = forecast.point_forecasts(y, feats, fit_rows, seed, models=models)
        if base_model == forecast.AUTO:
            self.choice = forecast.auto_base_model(y, preds, slice(int(cal[0]), n))
            base_model = self.choice["chosen"]
        else:
            self.choice = None
        self.base_model, self.model = base_model, fitted[base_model]
        self.aci = OnlineConformal(residuals(y[cal], preds[base_model][cal]), alpha, gamma,
                                   floor=0.0)
        self.known = self.inside = self.run_above = 0
        self.window_bins = (15 if "same_bin_7d" in self.names else 2) * feats.per_day + 8
        from mapie.exchangeability_testing import OnlineMartingaleTest
        from mapie.regression import SplitConformalRegressor

        scr = SplitConformalRegressor(self.model, confidence_level=0.5, prefit=True)
        self.shift = OnlineMartingaleTest(scr, task="regression", test_level=0.05, warn=False,
                                          burn_in=1, random_state=seed)
        # the test starts with the live bins: it watches for a change in them (fed the
        # calibration bins too, it sat above its threshold before the first live bin on the
        # BurstGPT week: the history's own drift, not news)

    def _point(self) -> tuple[float, np.ndarray]:
        """The one-bin-ahead forecast of the next bin from the history and the bins so far
        (the features of the fit, from the last :attr:`window_bins`), and its feature row."""
        nxt = self.ts[-1] + pd.Timedelta(seconds=self.bin_s)
        y = np.append(np.asarray(self.y[-self.window_bins:]), 0.0)
        ts = pd.Series([*self.ts[-(len(y) - 1):], nxt])
        feats = forecast.make_features(y, ts, self.bin_s, 1)
        if "same_bin_7d" in self.names and "same_bin_7d" not in feats.names:
            feats = forecast.make_features(np.append(np.zeros(14 * feats.per_day), y),
                                           pd.Series(pd.date_range(end=nxt, periods=len(y)
                                                                   + 14 * feats.per_day,
                                                                   freq=f"{self.bin_s}s")),
                                           self.bin_s, 1)
        cols = [feats.names.index(c) for c in self.names]
        row = feats.X[-1, cols]
        return float(self.model.predict(row[None, :])[0]), row

    def _shift_update(self, score: float) -> None:
        """One bin into the shift test: its conformity score (the absolute residual of the raw
        forecast, what MAPIE's split conformal scores the prefit model by), the conformal
        p-value against the scores so far and the jumper martingale's update, by the test's
        own public steps (``OnlineMartingaleTest.update`` would predict the bin again)."""
        test = self.shift
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = test.compute_p_value(current_conformity_score=score,
                                     conformity_score_history=np.asarray(
                                         test.conformity_score_history, dtype=float))
            test.update_simple_jumper_martingale(p)
        test.conformity_score_history.append(score)
        test.pvalue_history.append(float(p))
        # bounded memory over weeks of bins: the p-values are against the last SCORE_WINDOW
        # scores; only the martingale's last value is read
        for kept, n in ((test.conformity_score_history, SCORE_WINDOW),
                        (test.pvalue_history, 1), (test.martingale_value_history, 1)):
            if len(kept) > 2 * max(n, 64):
                del kept[:-n]

    def step(self, ts, demand: float | None, gap_reason: str | None = None) -> LiveBin:
        """Close the bin that starts at ``ts`` (the one after the last): forecast it, give its
        band, then take its ``demand`` (None: unknown, a gap) and update. Raises ValueError for
        a bin that is not the next one. Call it inside
        :func:`analytics.envelope.forecast.single_threaded` (held for the whole window: the
        thread limit costs milliseconds to set, more than a bin's forecast)."""
        ts = pd.Timestamp(ts)
        expected = self.ts[-1] + pd.Timedelta(seconds=self.bin_s)
        if ts != expected:
            raise ValueError(f"bin {ts} is not the next one ({expected}): bins close in order")
        raw, row = self._point()
        point = max(raw, 0.0)
        lo, hi, alpha_t = self.aci.interval(point)
        lower, upper = max(lo, 0.0), max(hi, 0.0)
        covered = above = None
        if demand is not None and np.isfinite(demand):
            miss = self.aci.observe(float(demand), point, lo, hi)
            covered, above = not miss, bool(demand > upper)
            self.known += 1
            self.inside += covered
            self.run_above = self.run_above + 1 if above else 0
            # above the band before the alarm: later forecasts read the bound (module doc)
            held = above and self.run_above < self.k_above
            self.y.append(float(upper) if held and np.isfinite(upper) else float(demand))
            self._shift_update(abs(float(demand) - raw))
        else:
            self.y.append(point)  # features of later bins read the forecast in its place
        self.ts.append(ts)
        if len(self.y) > 2 * self.window_bins:  # only the last window feeds the features
            del self.y[:-self.window_bins], self.ts[:-self.window_bins]
        history = self.shift.martingale_value_history
        mart = float(history[-1]) if len(history) else 1.0
        reasons = []
        if self.run_above >= self.k_above:
            reasons.append(f"demand above the band {self.run_above} bins in a row")
        over = mart > self.shift.reject_threshold
        if over and self.martingale_alarm:
            reasons.append(f"shift martingale {mart:.3g} above {self.shift.reject_threshold:g}: "
                           "the residuals stopped looking exchangeable")
        return LiveBin(ts, None if covered is None else float(demand), point, lower,
                       upper if np.isfinite(upper) else None, alpha_t, covered, bool(above),
                       bool(reasons), self.inside / self.known if self.known else None,
                       gap_reason, "; ".join(reasons) or None, mart, bool(over))
