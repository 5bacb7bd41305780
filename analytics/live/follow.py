"""Following a running fleet: bins closed as time passes, stored as they close, resumed after
a restart (issue 29 items 2, 3 and 8; the reliability paragraph).

A :class:`Follower` holds one live run (:mod:`analytics.store.live`): the envelope started from
the stored history, then every stored bin of the run replayed through it (a restart resumes
where the run stopped, with the same band, ACI step and alarm state: the replay is the same
arithmetic as the first pass). :meth:`Follower.poll` closes every bin that ended at least
``lag_s`` before ``now`` and is not stored yet: a follower that was stopped, or could not
reach Prometheus, back-fills what it missed from the stored samples (``/api/v1/query`` over
the missed span, at most :data:`analytics.services.live.MAX_WINDOW` per poll). The source is
read before the envelope steps and the bins are stored in one transaction, so a source that
does not answer changes nothing, and a store that refuses the write leaves the follower to
be rebuilt from what is stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import pandas as pd

from analytics.envelope import forecast
from analytics.live import bins as live_bins
from analytics.live.envelope import LiveEnvelope
from analytics.live.source import PrometheusSource


@dataclass(frozen=True)
class LiveConfig:
    """One live run's options: the model's ``model_name`` label, the engine whose metric names
    are read, the stored ``history`` dataset the envelope starts from, the bin width (s), the
    miscoverage, the point model, the alarm's run length and the target's weights."""

    model: str
    history: str
    engine: str = "vllm"
    bin_s: int = 300
    alpha: float = 0.1
    base_model: str = "hgb"
    k_above: int = 4
    w_prompt: float = 1.0
    w_completion: float = 1.0

    def as_dict(self) -> dict:
        return asdict(self)


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

    Raises
    ------
    ValueError : a history too short, or a stored run of that name with other options
    """

    def __init__(self, connect: Callable, source: PrometheusSource, config: LiveConfig,
                 name: str, history: pd.DataFrame, first_ts: pd.Timestamp, lag_s: float = 30.0):
        from analytics import store

        self.connect, self.source, self.config, self.name = connect, source, config, name
        self.lag_s, self.step = float(lag_s), pd.Timedelta(seconds=config.bin_s)
        self.history, self.first_ts = history, pd.Timestamp(first_ts)
        LiveEnvelope.split(history, config.bin_s, config.alpha, config.k_above)
        with connect(True) as con:
            store.start_live_run(con, name, config.as_dict(), self.first_ts.to_pydatetime())
        self._build()

    def _build(self) -> None:
        """The envelope from the history, with every stored bin of the run replayed."""
        from analytics import store

        c = self.config
        self.env = LiveEnvelope(self.history, c.bin_s, alpha=c.alpha, base_model=c.base_model,
                                k_above=c.k_above)
        with self.connect(False) as con:
            stored = store.live_bins(con, self.name)
        self.next_ts = self.first_ts
        with forecast.single_threaded():
            for row in stored.itertuples(index=False):
                demand = None if pd.isna(row.demand) else float(row.demand)
                self.env.step(pd.Timestamp(row.ts), demand, row.gap_reason)
                self.next_ts = pd.Timestamp(row.ts) + self.step
        self.resumed_bins = len(stored)
        self.last = stored.iloc[-1].to_dict() if len(stored) else None

    def due_end(self, now_s: float) -> pd.Timestamp:
        """The end of the last bin closed by ``now_s`` (UNIX s) with ``lag_s`` to spare."""
        b = self.config.bin_s
        return pd.Timestamp(math.floor((now_s - self.lag_s) / b) * b, unit="s")

    def poll(self, now_s: float, max_bins: int | None = None,
             until: pd.Timestamp | None = None) -> list[dict]:
        """Close, judge and store the bins due by ``now_s`` (UNIX s) that are not stored yet,
        oldest first (at most ``max_bins``, none that ends after ``until``, and at most
        :data:`~analytics.services.live.MAX_WINDOW` of them); returns their records
        (:func:`analytics.services.live.live_window`'s fields).

        Raises analytics.live.source.SourceError (nothing stepped, nothing stored) and
        store errors (the follower rebuilds itself from the store before it raises)."""
        from analytics import store
        from analytics.services.live import MAX_WINDOW, _epoch_s, bin_records

        end = min(self.due_end(now_s), self.next_ts + MAX_WINDOW)
        if max_bins is not None:
            end = min(end, self.next_ts + max_bins * self.step)
        if until is not None:
            end = min(end, pd.Timestamp(until))
        if end <= self.next_ts:
            return []
        c = self.config
        start_s, end_s = _epoch_s(self.next_ts.to_pydatetime()), _epoch_s(end.to_pydatetime())
        series = self.source.counters(c.engine, c.model, start_s - 2 * c.bin_s, end_s)
        frame = live_bins.demand_bins(series, start_s, end_s, c.bin_s, c.w_prompt,
                                      c.w_completion)
        with forecast.single_threaded():
            records = list(bin_records(self.env, frame, self.next_ts, end, self.step, c.model))
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
