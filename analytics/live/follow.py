"""Following a running fleet: bins closed as time passes, stored as they close, resumed after
a restart (issue 29 items 2, 3 and 8; the reliability paragraph).

A :class:`Follower` holds one live run (:mod:`analytics.store.live`): the envelope started from
the stored history, then every stored bin of the run replayed through it (a restart resumes
where the run stopped, with the same band, ACI step and alarm state: the replay is the same
arithmetic as the first pass). :meth:`Follower.poll` closes every bin that ended at least
``lag_s`` before ``now`` and is not stored yet: a follower that was stopped, or could not
reach Prometheus, back-fills what it missed from the stored samples (``/api/v1/query`` over
the missed span, at most :data:`MAX_WINDOW` per poll). The source is
read before the envelope steps and the bins are stored in one transaction, so a source that
does not answer changes nothing, and a store that refuses the write leaves the follower to
be rebuilt from what is stored.

Energy per token (item 6): with ``energy_selector`` (PromQL label matchers naming the GPUs that
serve the model: operator configuration), each bin also gets the energy those GPUs used, from
DCGM's cumulative energy counter (``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, mJ; increases per
bin with resets handled like the token counters, gaps named): ``energy_j``, ``j_per_token``
(over prompt + completion tokens), ``j_per_output_token`` (over completion tokens, ML.ENERGY's
measure) and, with a ``carbon_site`` whose hourly carbon intensity the store holds,
``gco2_per_kwh`` of the bin's hour and ``gco2_per_token`` = ``j_per_token`` / 3.6e6 x it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import pandas as pd

from analytics.envelope import forecast
from analytics.live import bins as live_bins
from analytics.live.envelope import LiveEnvelope
from analytics.live.serving_stats import COLUMNS as SERVING_COLUMNS
from analytics.live.serving_stats import serving_bins
from analytics.live.source import ENERGY_COUNTER, POWER_GAUGE, PrometheusSource


@dataclass(frozen=True)
class LiveConfig:
    """One live run's options: the model's ``model_name`` label, the engine whose metric names
    are read, the stored ``history`` dataset the envelope starts from, the bin width (s), the
    miscoverage, the point model, the alarm's run length, the target's weights, the GPUs and
    site of energy per token, and when the envelope is refitted (every ``refit_every_s`` of
    live bins, 0: never; and at an alarm's first bin)."""

    model: str
    history: str
    engine: str = "vllm"
    bin_s: int = 300
    alpha: float = 0.1
    base_model: str = "hgb"
    k_above: int = 4
    w_prompt: float = 1.0
    w_completion: float = 1.0
    energy_selector: str | None = None
    carbon_site: str | None = None
    carbon_basis: str | None = None
    refit_every_s: int = 86400
    refit_on_alarm: bool = True

    def as_dict(self) -> dict:
        return asdict(self)


#: The longest window one read covers (a bounded route: 31 days of 5-minute bins are 8,928).
MAX_WINDOW = pd.Timedelta(days=31)
#: Joules in a kilowatt-hour.
J_PER_KWH = 3.6e6
#: Seconds past a bin's due time (its end + ``lag_s``) it waits for a sample at or after its
#: end before it closes without one (then as a gap, with the reason).
GRACE_S = 300.0
#: Days of bins a refit reads at most (the history and the live bins so far): memory and fit
#: time stay bounded however long a run lasts.
REFIT_MAX_DAYS = 28


def epoch_s(t) -> float:
    """``t`` (a naive time is UTC) in UNIX seconds."""
    t = pd.Timestamp(t)
    return (t if t.tzinfo else t.tz_localize("UTC")).timestamp()


def window_frame(source: PrometheusSource, config: LiveConfig, start_s: float,
                 end_s: float, read_until_s: float | None = None) -> pd.DataFrame:
    """The bins ``[start_s, end_s)`` of ``config``'s model from ``source``
    (:func:`analytics.live.bins.demand_bins`; samples from two bins before, as baselines, to
    ``read_until_s``, default ``end_s``: a later sample places the last bin's increase and
    tells the follower the bin is complete), with ``energy_j``, ``energy_gap_reason`` and
    ``energy_basis`` (DCGM's energy counter, or else its power gauge integrated over time)
    when the config names the GPUs (``energy_selector``; else None) and the serving stats of
    :func:`analytics.live.serving_stats.serving_bins` (None where the engine does not expose
    them). Raises SourceError."""
    c = config
    until = max(end_s, read_until_s or end_s)
    series = source.counters(c.engine, c.model, start_s - 2 * c.bin_s, until)
    frame = live_bins.demand_bins(series, start_s, end_s, c.bin_s, c.w_prompt, c.w_completion)
    served = serving_bins(source.serving(c.engine, c.model, start_s - 2 * c.bin_s, until),
                          start_s, end_s, c.bin_s)
    for col in SERVING_COLUMNS:
        frame[col] = served[col].to_numpy(object)
    frame["energy_j"], frame["energy_gap_reason"], frame["energy_basis"] = None, None, None
    if c.energy_selector:
        energy = source.energy(c.energy_selector, start_s - 2 * c.bin_s, until)
        power = [] if energy else source.power(c.energy_selector, start_s - 2 * c.bin_s, until)
        if energy:  # mJ counters: the same increases, resets and gaps as the token counters
            e = live_bins.demand_bins(energy, start_s, end_s, c.bin_s, 1e-3, 0.0)
            frame["energy_j"] = e["target"].to_numpy()
            frame["energy_gap_reason"] = e["gap_reason"].to_numpy()
            frame["energy_basis"] = ENERGY_COUNTER
        elif power:  # no energy counter: the power gauge (W) integrated over each bin
            joules, why = live_bins.power_energy_bins(power, start_s, end_s, c.bin_s)
            frame["energy_j"] = joules
            frame["energy_gap_reason"] = why
            frame["energy_basis"] = f"{POWER_GAUGE} x time"
        else:
            frame["energy_gap_reason"] = (f"no {ENERGY_COUNTER} or {POWER_GAUGE} series "
                                          f"matches {c.energy_selector}")
    return frame


def _ratio(num, den):
    return None if num is None or den is None or not den > 0 else float(num) / float(den)


def bin_records(env: LiveEnvelope, frame: pd.DataFrame, first_live, end_ts, step,
                config: LiveConfig, carbon: pd.Series | None = None):
    """One record per bin of ``frame`` in ``[first_live, end_ts)``, the envelope stepped on
    each (:func:`bin_record`)."""
    for row in frame.itertuples(index=False):
        if row.ts < first_live or row.ts + step > end_ts:
            continue
        yield bin_record(env, row, config, carbon)


def bin_record(env: LiveEnvelope, row, config: LiveConfig,
               carbon: pd.Series | None = None) -> dict:
    """Close one bin (``row`` of :func:`window_frame`) on ``env``: its record,
    :class:`~analytics.live.envelope.LiveBin`'s fields and ``model``, ``prompt_tokens``,
    ``completion_tokens``, ``samples``, ``resets``, ``base_model``, ``energy_j``,
    ``j_per_token``, ``j_per_output_token``, ``energy_gap_reason``, ``gco2_per_kwh``,
    ``gco2_per_token`` and the serving stats (:data:`analytics.live.serving_stats.COLUMNS`)
    (None where unknown; ``carbon``: hourly gCO2/kWh by hour start)."""
    demand_v = None if row.gap else float(row.target)
    b = env.step(row.ts, demand_v, row.gap_reason)
    prompt = None if row.gap else float(row.prompt_tokens)
    completion = None if row.gap else float(row.completion_tokens)
    energy = None if row.energy_j is None or pd.isna(row.energy_j) else float(row.energy_j)
    per_token = _ratio(energy, None if prompt is None else prompt + completion)
    ci = None if carbon is None else carbon.get(row.ts.floor("h"))
    ci = None if ci is None or pd.isna(ci) else float(ci)
    return {**b.as_dict(), "model": config.model, "prompt_tokens": prompt,
            "completion_tokens": completion, "samples": int(row.samples),
            "resets": int(row.resets), "base_model": env.base_model,
            "energy_j": energy, "j_per_token": per_token,
            "j_per_output_token": _ratio(energy, completion),
            "energy_gap_reason": None if energy is not None else row.energy_gap_reason,
            "energy_basis": None if energy is None else row.energy_basis,
            "gco2_per_kwh": ci,
            "gco2_per_token": None if per_token is None or ci is None
            else per_token / J_PER_KWH * ci, "refit": None,
            **{col: _known(getattr(row, col)) for col in SERVING_COLUMNS}}


def _known(value) -> float | None:
    """A serving stat as stored and printed: a finite float, or None (unknown)."""
    return None if value is None or pd.isna(value) or not math.isfinite(float(value)) \
        else float(value)


class Follower:
    """A live run, followed.

    Parameters
    ----------
    connect : ``connect(write)`` opens a short-lived store connection (a context manager), so
        no connection is held between polls (the app and other commands share the store)
    source : the operator's Prometheus
    config : the run's options
    name : the run's name in the store
    history : DataFrame ``ts``, ``target`` of the stored history on the run's bins
    first_ts : the first live bin (the bin after the history's last)
    lag_s : seconds after a bin's end before it is read (the source's scrape and ingest delay)
    carbon : hourly carbon intensity (gCO2/kWh) of ``config.carbon_site`` by hour start, or
        None

    Raises
    ------
    ValueError : a history too short, or a stored run of that name with other options
    """

    def __init__(self, connect: Callable, source: PrometheusSource, config: LiveConfig,
                 name: str, history: pd.DataFrame, first_ts: pd.Timestamp, lag_s: float = 30.0,
                 carbon: pd.Series | None = None):
        from analytics import store

        self.connect, self.source, self.config, self.name = connect, source, config, name
        self.lag_s, self.step = float(lag_s), pd.Timedelta(seconds=config.bin_s)
        self.history, self.first_ts = history, pd.Timestamp(first_ts)
        self.carbon = carbon
        LiveEnvelope.split(history, config.bin_s, config.alpha, config.k_above)
        with connect(True) as con:
            store.start_live_run(con, name, config.as_dict(), self.first_ts.to_pydatetime())
        self._build()

    def _build(self) -> None:
        """The envelope from the history, with every stored bin of the run replayed (its
        refits redone at the same bins: the replay is the first pass's arithmetic)."""
        from analytics import store

        c = self.config
        self.env = LiveEnvelope(self.history, c.bin_s, alpha=c.alpha, base_model=c.base_model,
                                k_above=c.k_above)
        self.live_ts, self.live_y, self.since_refit, self.refits = [], [], 0, 0
        self.alarm_was_up, self.known_since_refit = False, 0
        with self.connect(False) as con:
            stored = store.live_bins(con, self.name)
        self.next_ts = self.first_ts
        with forecast.single_threaded():
            for row in stored.itertuples(index=False):
                demand = None if pd.isna(row.demand) else float(row.demand)
                b = self.env.step(pd.Timestamp(row.ts), demand, row.gap_reason)
                self._after(b.ts, b.demand, b.point, b.alarm)
                self.next_ts = pd.Timestamp(row.ts) + self.step
        self.resumed_bins = len(stored)
        self.last = stored.iloc[-1].to_dict() if len(stored) else None

    def _after(self, ts, demand: float | None, point: float, alarm: bool) -> str | None:
        """Keep a closed bin for later refits and refit when it is due (:data:`LiveConfig`:
        the schedule, or an alarm's first bin) and at least half the bins since the last
        refit have known demand (gaps give nothing to fit); returns the refit's reason, or
        None."""
        self.live_ts.append(pd.Timestamp(ts))
        self.live_y.append(point if demand is None else demand)  # a gap reads its forecast
        keep = REFIT_MAX_DAYS * 86400 // self.config.bin_s
        if len(self.live_ts) > 2 * keep:
            del self.live_ts[:-keep], self.live_y[:-keep]
        self.since_refit += 1
        self.known_since_refit += demand is not None
        c = self.config
        why = None
        if alarm and c.refit_on_alarm and not self.alarm_was_up:
            why = "the alarm"
        elif c.refit_every_s and self.since_refit * c.bin_s >= c.refit_every_s:
            why = f"the schedule (every {c.refit_every_s / 3600:g} h of live bins)"
        self.alarm_was_up = alarm
        if why is None:
            return None
        if 2 * self.known_since_refit < self.since_refit:  # mostly gaps: nothing new to fit
            self.since_refit = self.known_since_refit = 0
            return None
        hist = pd.concat([self.history[["ts", "target"]],
                          pd.DataFrame({"ts": self.live_ts, "target": self.live_y})],
                         ignore_index=True).tail(max(len(self.history), keep))
        new = LiveEnvelope(hist, c.bin_s, alpha=c.alpha, base_model=c.base_model,
                           k_above=c.k_above)
        new.known, new.inside = self.env.known, self.env.inside  # coverage is the run's
        self.env, self.since_refit, self.known_since_refit = new, 0, 0
        self.refits += 1
        return (f"refitted after this bin on {len(hist):,} bins (the history and the live "
                f"bins so far): {why}")

    def _ready_end(self, last_sample_s: float | None, now_s: float) -> pd.Timestamp:
        """The end of the last bin that may close: one the source has a sample at or after
        the end of (its last increase is counted), or, :data:`GRACE_S` past its due time, any
        (a source that stopped answering: its bins are gaps, said)."""
        by_grace = self.due_end(now_s - GRACE_S)
        if last_sample_s is None:
            return by_grace
        b = self.config.bin_s
        return max(pd.Timestamp(math.floor(last_sample_s / b) * b, unit="s"), by_grace)

    def due_end(self, now_s: float) -> pd.Timestamp:
        """The end of the last bin closed by ``now_s`` (UNIX s) with ``lag_s`` to spare."""
        b = self.config.bin_s
        return pd.Timestamp(math.floor((now_s - self.lag_s) / b) * b, unit="s")

    def poll(self, now_s: float, max_bins: int | None = None,
             until: pd.Timestamp | None = None) -> list[dict]:
        """Close, judge and store the bins due by ``now_s`` (UNIX s) that are not stored yet,
        oldest first (at most ``max_bins``, none that ends after ``until``, and at most
        :data:`MAX_WINDOW` of them); returns their records (:func:`bin_records`).

        Raises analytics.live.source.SourceError (nothing stepped, nothing stored) and
        store errors (the follower rebuilds itself from the store before it raises)."""
        from analytics import store

        end = min(self.due_end(now_s), self.next_ts + MAX_WINDOW)
        if max_bins is not None:
            end = min(end, self.next_ts + max_bins * self.step)
        if until is not None:
            end = min(end, pd.Timestamp(until))
        if end <= self.next_ts:
            return []
        # read a little past the window (not to now: a back-fill of an old window would read
        # years): a sample after a bin's end says the bin is complete
        frame = window_frame(self.source, self.config, epoch_s(self.next_ts), epoch_s(end),
                             min(now_s, epoch_s(end) + 2 * self.config.bin_s))
        end = min(end, self._ready_end(frame.attrs.get("last_sample_s"), now_s))
        records = []
        with forecast.single_threaded():
            for row in frame.itertuples(index=False):
                if row.ts < self.next_ts or row.ts + self.step > end:
                    continue
                rec = bin_record(self.env, row, self.config, self.carbon)
                rec["refit"] = self._after(row.ts, rec["demand"], rec["point"], rec["alarm"])
                records.append(rec)
        try:
            with self.connect(True) as con:
                store.save_live_bins(con, self.name, records)
        except BaseException:
            self._build()  # the envelope stepped past what is stored: start again from it
            raise
        if records:
            self.next_ts = pd.Timestamp(records[-1]["ts"]) + self.step
            self.last = records[-1]
        return records
