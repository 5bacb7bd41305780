"""``headroom live --follow`` (issue 29 items 2, 3, 8 and the reliability paragraph): bins are
closed as time passes and stored as they close; Prometheus stopped mid-run changes nothing and
loses no bin (back-filled when it answers again); a restarted follower resumes from the store
with the same band; and the stored run equals the one-shot window over the same span.

A real Prometheus (Debian ``prometheus``) serves the BurstGPT week as an engine's counters,
back-filled with ``promtool``; the follower's clock is the test's (the week is in the past),
so no test waits for a bin to close."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from harness import free_port, prometheus_server, strict_loads
from livedata import FLOOR_W, GPUS, HISTORY, J_PER_TOKEN, MODEL, SITE
from livedata import epoch as _s
from livedata import soon as _soon

from analytics import cli, store
from analytics.live.follow import LiveConfig
from analytics.live.source import SourceError
from analytics.services import live as live_service
from analytics.services.demand import demand_grid


def test_follow_stores_each_bin_loses_none_while_prometheus_is_down_and_resumes(
        live_week, tmp_path):
    db0, text, split = live_week
    db = tmp_path / "s.duckdb"
    db.write_bytes(db0.read_bytes())
    config = LiveConfig(MODEL, HISTORY, energy_selector=GPUS, carbon_site=SITE)
    port = free_port()
    lag = 30.0
    with prometheus_server(tmp_path / "prom", text, port=port) as url:
        f = live_service.follower(db, url, config, "r1", split, lag_s=lag, clock=_soon(split))
        assert f.first_ts == split and f.resumed_bins == 0
        got = f.poll(_s(split + pd.Timedelta(hours=2)) + lag)
        assert [r["ts"] for r in got][:1] == [split.isoformat()] and len(got) == 24
        assert f.poll(_s(split + pd.Timedelta(hours=2)) + lag) == []  # nothing new: nothing
        assert f.poll(_s(split + pd.Timedelta(hours=2, minutes=4)) + lag) == []  # not closed
    # Prometheus is down: the poll is refused and the store is as it was
    with pytest.raises(SourceError, match="refused the connection"):
        f.poll(_s(split + pd.Timedelta(hours=3)) + lag)
    con = store.connect(db, read_only=True)
    try:
        assert store.live_run(con, "r1")["bins"] == 24
    finally:
        con.close()
    with prometheus_server(tmp_path / "prom", None, port=port) as url:  # the same TSDB again
        back = f.poll(_s(split + pd.Timedelta(hours=3)) + lag)  # back-fills the missed hour
        assert len(back) == 12 and back[0]["ts"] == (split + pd.Timedelta(hours=2)).isoformat()
        # headroom restarts: a new follower resumes from the stored bins, the same band
        again = live_service.follower(db, url, config, "r1", lag_s=lag,  # no --from: resumes
                                      clock=_soon(split))
        assert again.resumed_bins == 36 and again.next_ts == split + pd.Timedelta(hours=3)
        more = again.poll(_s(split + pd.Timedelta(hours=4)) + lag)
        con = store.connect(db, read_only=True)
        try:
            one_shot = list(live_service.live_window(
                con, url, config, split, (split + pd.Timedelta(hours=4)).to_pydatetime()))
            stored = store.live_bins(con, "r1")
            series = store.live_run(con, "r1")["dataset"]  # the live series, a dataset
            grid = demand_grid(con, series, 300)
            ledger = store.dataset(con, series)
        finally:
            con.close()
    assert len(more) == 12 and len(stored) == len(one_shot) == 48
    # every bin was appended to the run's series as it closed, through the restarts
    assert (series, ledger["kind"], int(ledger["rows"])) == ("live-r1", "demand_series", 48)
    assert grid["ts"].tolist() == pd.to_datetime(stored["ts"]).tolist()
    assert grid["target"].tolist() == stored["demand"].tolist()
    keys = ("demand", "point", "lower", "upper", "alpha_t", "covered", "alarm",
            "coverage_so_far")
    for k in keys:  # the followed, stopped, back-filled and resumed run is the one-shot window
        assert stored[k].tolist() == pytest.approx([r[k] for r in one_shot], abs=1e-9), k
    assert not stored["gap_reason"].notna().any()
    # energy per token from the GPUs' counters, carbon from the site's stored hours (LCA)
    tokens = stored["prompt_tokens"] + stored["completion_tokens"]
    assert stored["energy_j"].tolist() == pytest.approx(
        (J_PER_TOKEN * tokens + FLOOR_W * 300).tolist(), rel=1e-9)
    per_token = np.where(tokens > 0, stored["energy_j"] / tokens.where(tokens > 0), np.nan)
    assert (tokens == 0).any()  # a bin without tokens has no J/token (None), not infinity
    assert stored["j_per_token"].tolist() == pytest.approx(per_token.tolist(), nan_ok=True)
    assert stored["j_per_output_token"].isna().all()  # the week's counters are prompt only
    con = store.connect(db, read_only=True)
    try:
        hours = store.site_hourly(con, "carbon_intensity", SITE, "LCA").set_index("ts")["value"]
    finally:
        con.close()
    ci = hours.reindex(pd.to_datetime(stored["ts"]).dt.floor("h")).to_numpy()
    assert stored["gco2_per_kwh"].tolist() == pytest.approx(ci.tolist())
    assert stored["gco2_per_token"].tolist() == pytest.approx(
        (stored["j_per_token"] / 3.6e6 * ci).tolist(), nan_ok=True)
    # a stored run with other options is refused, naming them
    with pytest.raises(ValueError, match="alpha 0.1, now 0.2"):
        live_service.follower(db, url, LiveConfig(MODEL, HISTORY, alpha=0.2), "r1",
            clock=_soon(split))


def test_cli_follow_until_a_time_prints_and_stores_the_bins_then_resumes(live_week, tmp_path, capsys,
                                                                       monkeypatch):
    from analytics.live.source import PrometheusSource

    db0, text, split = live_week
    asked = []  # a back-fill of a past window reads that window, not on to today (3 years)
    real_get = PrometheusSource._get
    monkeypatch.setattr(PrometheusSource, "_get",
                        lambda self, path, params: asked.append(params) or real_get(
                            self, path, params))
    db = tmp_path / "s.duckdb"
    db.write_bytes(db0.read_bytes())
    base = ["--db", str(db), "live", "--model", MODEL, "--history", HISTORY, "--follow",
            "--run", "cli"]
    with prometheus_server(tmp_path / "prom", text) as url:
        rc = cli.main([*base, "--prometheus", url, "--from", split.isoformat(), "--to",
                       (split + pd.Timedelta(hours=1)).isoformat()])
        first = [strict_loads(x) for x in capsys.readouterr().out.splitlines()]
        rc2 = cli.main([*base, "--prometheus", url, "--to",
                        (split + pd.Timedelta(hours=2)).isoformat()])
        second = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        rc3 = cli.main([*base, "--prometheus", url, "--from", split.isoformat(), "--to",
                        (split + pd.Timedelta(hours=3)).isoformat(), "--alpha", "0.2"])
        refused = strict_loads(capsys.readouterr().out)
    assert (rc, rc2, len(first), len(second)) == (0, 0, 12, 12)
    assert len(asked) <= 4, len(asked)  # one query per poll (a 6-h chunk), not 4,400
    assert second[0]["ts"] == (split + pd.Timedelta(hours=1)).isoformat()  # resumed, not redone
    assert rc3 == 2 and "was started with other options" in refused["error"]
    con = store.connect(db, read_only=True)
    try:
        run = store.live_run(con, "cli")
    finally:
        con.close()
    assert (run["bins"], run["config"]["model"]) == (24, MODEL)
    assert run["last_ts"] == (split + pd.Timedelta(hours=1, minutes=55)).to_pydatetime()


def test_follow_retries_a_silent_source_with_back_off_and_says_so(live_week, tmp_path):
    db0, _, split = live_week
    db = tmp_path / "s.duckdb"
    db.write_bytes(db0.read_bytes())
    f = live_service.follower(db, "http://127.0.0.1:9", LiveConfig(MODEL, HISTORY), "down",
                              split, timeout_s=1, clock=_soon(split))
    events, sleeps = [], []

    def sleep(s):
        sleeps.append(s)
        if len(sleeps) >= 5:
            raise KeyboardInterrupt  # stop the test's follow after five retries

    with pytest.raises(KeyboardInterrupt):
        list(live_service.follow(f, None, clock=lambda: _s(split) + 86400, sleep=sleep,
                                 on_event=events.append))
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert [e["retry_in_s"] for e in events] == sleeps
    assert all("refused the connection" in e["error"] for e in events)


def test_a_scheduled_refit_is_said_and_redone_on_resume(live_week, tmp_path):
    db0, text, split = live_week
    hourly = LiveConfig(MODEL, HISTORY, refit_every_s=3600)
    dbs = {k: tmp_path / f"{k}.duckdb" for k in ("straight", "resumed")}
    for db in dbs.values():
        db.write_bytes(db0.read_bytes())
    with prometheus_server(tmp_path / "prom", text) as url:
        a = live_service.follower(dbs["straight"], url, hourly, "r", split, clock=_soon(split))
        straight = a.poll(_s(split + pd.Timedelta(hours=2)) + 30)
        b = live_service.follower(dbs["resumed"], url, hourly, "r", split, clock=_soon(split))
        first = b.poll(_s(split + pd.Timedelta(hours=1, minutes=30)) + 30)
        b2 = live_service.follower(dbs["resumed"], url, hourly, "r",  # restarted: replays
            clock=_soon(split))
        replayed = b2.refits
        rest = b2.poll(_s(split + pd.Timedelta(hours=2)) + 30)
        con = store.connect(dbs["straight"], read_only=True)
        try:  # the same bins with one fixed envelope (the one-shot window does not refit)
            fixed = list(live_service.live_window(con, url, hourly, split,
                                                  (split + pd.Timedelta(hours=2)).to_pydatetime()))
        finally:
            con.close()
    said = [i for i, r in enumerate(straight) if r["refit"]]
    assert said == [11, 23]  # after each hour of live bins
    assert "the schedule (every 1 h of live bins)" in straight[11]["refit"]
    assert (replayed, b2.resumed_bins) == (1, 18)  # the replay redid the first refit
    resumed = first + rest
    for k in ("point", "lower", "upper", "alpha_t", "coverage_so_far"):
        assert [r[k] for r in resumed] == pytest.approx([r[k] for r in straight], abs=1e-9), k
    # an alarm's first bin refits too (once per alarm: not while it stays up)
    nxt = pd.Timestamp(straight[-1]["ts"])
    steps = [(nxt + k * pd.Timedelta(minutes=5), alarm) for k, alarm in
             enumerate((True, True, False, True), start=1)]
    said_alarm = [a._after(ts, 5e4, 1e4, alarm) for ts, alarm in steps]
    assert [w is not None and w.endswith("the alarm") for w in said_alarm] == \
        [True, False, False, True]
    # before the first refit the bands are the fixed envelope's, after it another fit's
    assert [r["upper"] for r in straight[:12]] == pytest.approx([r["upper"] for r in fixed[:12]])
    assert [r["point"] for r in straight[12:]] != pytest.approx([r["point"] for r in fixed[12:]])
