"""An engine's own ``/metrics`` scraped without a Prometheus (issue 29 item 1, and the live
part of "Real parts in tests"): an exporter written with ``prometheus_client`` (vLLM's metric
names, served over HTTP) replays the BurstGPT week's last days on the test's clock; headroom's
``follow`` scrapes it every 15 s of that clock. The bins equal the trace's; the exporter's
restart (its counters from 0) changes no bin; a x3 surge from a known bin raises the alarm at
its 4th bin and not before; a scrape that fails is retried and its bins are gaps, said."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from harness import http_server
from livedata import HISTORY, MODEL, week_grids

from analytics.live.follow import LiveConfig
from analytics.live.scrape import ScrapeSource
from analytics.services import live as live_service


class Engine:
    """The exporter's state on the test's clock: the tokens of each of the week's minutes,
    counted 1 s into the minute (a scrape sees them in the minute's own bin), x3 from
    ``surge_s``, counted from 0 again after ``restart_s`` (a restart)."""

    def __init__(self, minutes: pd.DataFrame, surge_s: float, restart_s: float):
        start = ((pd.to_datetime(minutes["ts"]) - pd.Timestamp(0))
                 / pd.Timedelta(seconds=1)).to_numpy()
        self.m_end = start + 1  # when a minute's tokens show in the counter
        tokens = minutes["target"].to_numpy(float)
        self.cum = np.concatenate([[0.0], np.cumsum(
            np.where(start >= surge_s, 3 * tokens, tokens))])
        self.restart_s, self.now, self.down = restart_s, 0.0, False

    def tokens(self) -> float:
        done = self.cum[np.searchsorted(self.m_end, self.now, side="right")]
        if self.now >= self.restart_s:
            done -= self.cum[np.searchsorted(self.m_end, self.restart_s, side="right")]
        return float(done)


def _exposition(engine: Engine):
    """``http_server``'s answer: the engine's counters in the text format written by
    ``prometheus_client`` (a custom collector on the test's clock), or 503 while it is down."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily

    class Collector:
        def collect(self):
            for name, value in (("vllm:prompt_tokens", engine.tokens()),
                                ("vllm:generation_tokens", 0.0)):
                fam = CounterMetricFamily(name, "tokens", labels=["model_name"])
                fam.add_metric([MODEL], value)
                yield fam

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return lambda path: ((503, b"down", "text/plain") if engine.down
                         else (200, generate_latest(registry), "text/plain; version=0.0.4"))


def test_scraped_engine_bins_equal_the_trace_through_a_restart_and_a_surge(live_week,
                                                                          tmp_path):
    db = tmp_path / "s.duckdb"
    db.write_bytes(live_week[0].read_bytes())
    minutes, grid = week_grids(db)
    grid["ts"] = pd.to_datetime(grid["ts"])
    # the live part: 08:00-11:30 of the week's 6th day (the history: every bin before it)
    split = grid["ts"].iloc[0] + pd.Timedelta(days=5, hours=8)
    t0 = (split - pd.Timestamp(0)).total_seconds()
    # the restart half a second into a bin, before its first minute's tokens show (tokens the
    # old process counted after its last scrape are lost to any scraper: none here)
    surge_s, restart_s = t0 + 3 * 3600, t0 + 1800.5
    engine = Engine(minutes, surge_s, restart_s)
    with http_server(_exposition(engine)) as url:
        engine.now = t0 - 30
        source = ScrapeSource(f"{url}/metrics", clock=lambda: engine.now)
        f = live_service.follower(db, source, LiveConfig(MODEL, HISTORY, refit_every_s=0,
                                                         refit_on_alarm=False), "scraped", split,
                                  clock=lambda: engine.now)
        events = []

        def sleep(s):  # the test's clock: time passes only when the follower waits
            engine.now += s
            # the engine does not answer for two minutes in the second hour
            engine.down = t0 + 5400 <= engine.now < t0 + 5520

        until = split + pd.Timedelta(hours=3, minutes=30)
        rows = list(live_service.follow(f, until, clock=lambda: engine.now, sleep=sleep,
                                        on_event=events.append))
    assert len(rows) == 42 and rows[0]["ts"] == split.isoformat()
    live = grid[(grid["ts"] >= split) & (grid["ts"] < until)]
    surged = live["ts"] >= pd.Timestamp(surge_s, unit="s")
    want = live["target"].to_numpy() * np.where(surged, 3, 1)
    got = np.array([np.nan if r["demand"] is None else r["demand"] for r in rows])
    gaps = [i for i, r in enumerate(rows) if r["demand"] is None]
    # the engine down for 2 minutes (HTTP 503) from 01:30 of the live part: the step over
    # it cannot be placed in time, so the two bins it touches are gaps, said; no other
    assert gaps == [17, 18] and all("a scrape gap" in rows[i]["gap_reason"] for i in gaps)
    assert np.allclose(got[~np.isnan(got)], want[~np.isnan(got)])  # token for token
    assert sum(r["resets"] for r in rows) == 1  # the exporter's restart, in one bin
    assert rows[6]["resets"] == 1 and rows[6]["demand"] == pytest.approx(want[6])
    assert events and all("HTTP 503" in e["error"] for e in events)
    first = int(np.argmax(surged.to_numpy()))
    alarms = [i for i, r in enumerate(rows) if r["alarm"]]
    assert alarms and alarms[0] == first + 3 and not any(r["alarm"] for r in rows[:first + 3])


def test_an_engine_down_for_good_still_ends_at_until_with_its_bins_as_gaps(live_week,
                                                                          tmp_path):
    """Break-it review: a scrape that fails skipped the poll, so ``--to`` was never reached
    and no bin closed while the engine was down. Now the bins close past the grace as gaps."""
    db = tmp_path / "s.duckdb"
    db.write_bytes(live_week[0].read_bytes())
    minutes, grid = week_grids(db)
    grid["ts"] = pd.to_datetime(grid["ts"])
    split = grid["ts"].iloc[0] + pd.Timedelta(days=5, hours=8)
    t0 = (split - pd.Timestamp(0)).total_seconds()
    engine = Engine(minutes, surge_s=float("inf"), restart_s=float("inf"))
    with http_server(_exposition(engine)) as url:
        engine.now = t0 - 30
        source = ScrapeSource(f"{url}/metrics", clock=lambda: engine.now)
        f = live_service.follower(db, source, LiveConfig(MODEL, HISTORY, refit_every_s=0,
                                                         refit_on_alarm=False), "down", split,
                                  clock=lambda: engine.now)

        def sleep(s):
            engine.now += s
            engine.down = engine.now >= t0 + 900  # from the 4th bin on, never again

        until = split + pd.Timedelta(minutes=40)
        events = []
        rows = list(live_service.follow(f, until, clock=lambda: engine.now, sleep=sleep,
                                        on_event=events.append))
    assert len(rows) == 8 and rows[-1]["ts"] == (until - pd.Timedelta(minutes=5)).isoformat()
    assert all(r["demand"] is not None for r in rows[:2])
    assert all(r["demand"] is None and r["gap_reason"] for r in rows[4:])
    assert events and all("HTTP 503" in e["error"] for e in events)
    assert engine.now < (until - pd.Timestamp(0)).total_seconds() + 600  # no endless wait
