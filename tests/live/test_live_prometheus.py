"""Issue 29 (first slice): a real trace turned into engine counters, back-filled into a real
Prometheus TSDB (``promtool``), read back through the HTTP API: the bins equal the ingested
trace's token for token (a counter reset changes no bin), and the live envelope's forecasts,
band and coverage equal the offline ones on the same series."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from harness import (
    counter_openmetrics,
    http_server,
    prometheus_server,
    seed,
    shared,
    strict_loads,
)

from analytics import cli, store
from analytics.envelope import forecast
from analytics.envelope.online import online_conformal, residuals
from analytics.ingest.formats import parse_file
from analytics.live.bins import demand_bins
from analytics.live.envelope import LiveEnvelope
from analytics.live.source import PrometheusSource, SourceError
from analytics.services import demand

AZURE = "azure_llm/AzureLLMInferenceTrace_conv.csv"
WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def cumulative_at(event_s: np.ndarray, tokens: np.ndarray, at_s: np.ndarray) -> np.ndarray:
    """A counter sampled at ``at_s``: the tokens of every event strictly before each time."""
    order = np.argsort(event_s, kind="stable")
    cum = np.concatenate([[0.0], np.cumsum(tokens[order])])
    return cum[np.searchsorted(event_s[order], at_s, side="left")]


def test_bins_from_prometheus_equal_the_ingested_trace(tmp_path):
    frame = parse_file(shared(AZURE)).frame
    ts_s = frame["ts"].dt.epoch("us").to_numpy() / 1e6
    prompt = frame["prompt_tokens"].to_numpy().astype(float)
    completion = frame["completion_tokens"].to_numpy().astype(float)
    start = np.floor(ts_s.min() / 300) * 300
    end = np.ceil(ts_s.max() / 300) * 300 + 300
    scrapes = np.arange(start - 60, end + 1, 15.0)  # a 15-s scrape, from before the first bin
    p_vals, c_vals = cumulative_at(ts_s, prompt, scrapes), cumulative_at(ts_s, completion, scrapes)
    # the engine restarts right after the scrape in the middle: its counters count from 0 again
    cut = len(scrapes) // 2
    p_vals[cut + 1:] -= p_vals[cut]
    c_vals[cut + 1:] -= c_vals[cut]
    text = counter_openmetrics({("vllm:prompt_tokens", MODEL): (scrapes, p_vals),
                                ("vllm:generation_tokens", MODEL): (scrapes, c_vals)})
    db = tmp_path / "s.duckdb"
    seed(db, AZURE)
    con = store.connect(db, read_only=True)
    try:
        grid = demand.grid(con, demand.GridRequest("AzureLLMInferenceTrace_conv", 300))
    finally:
        con.close()
    with prometheus_server(tmp_path / "prom", text) as url:
        series = PrometheusSource(url).counters("vllm", MODEL, start - 120, end)
        with pytest.raises(SourceError, match="refused the connection"):
            PrometheusSource("http://127.0.0.1:9", timeout_s=1).counters("vllm", MODEL, start, end)
    assert {s.name for s in series} == {"vllm:prompt_tokens_total", "vllm:generation_tokens_total"}
    bins = demand_bins(series, start, end, 300)
    assert int(bins["resets"].sum()) == 2  # one per counter, in one bin
    assert not bins["gap"].any()
    got = bins.set_index("ts")["target"]
    want = grid.set_index(pd.to_datetime(grid["ts"]))["target"]
    assert len(want) == 12 and got.reindex(want.index).tolist() == want.tolist()  # token for token
    assert float(got.sum()) == float(prompt.sum() + completion.sum())


def test_live_envelope_equals_the_offline_aci_on_the_same_series(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    seed(db, WEEK)
    con = store.connect(db, read_only=True)
    try:
        grid = demand.grid(con, demand.GridRequest("burstgpt1_week1_per_minute_tps", 300))
        minutes = demand.grid(con, demand.GridRequest("burstgpt1_week1_per_minute_tps", 60))
    finally:
        con.close()
    grid["ts"] = pd.to_datetime(grid["ts"])
    split = grid["ts"].iloc[0] + pd.Timedelta(days=5)
    live = grid[grid["ts"] >= split]
    # the per-minute series as an engine's counter, scraped at every minute boundary; a surge
    # (x3) from a known bin on, to raise the alarm
    m_ts = ((pd.to_datetime(minutes["ts"]) - pd.Timestamp(0)) / pd.Timedelta(seconds=1)).to_numpy()
    tokens = minutes["target"].to_numpy(float)
    surge_at = (split + pd.Timedelta(hours=34)).timestamp()  # 10:00 of the 2nd live day
    scrapes = np.arange(m_ts[0], m_ts[-1] + 61, 60.0)
    values = cumulative_at(m_ts, np.where(m_ts >= surge_at, 3 * tokens, tokens), scrapes)
    text = counter_openmetrics({("vllm:prompt_tokens", MODEL): (scrapes, values),
                                ("vllm:generation_tokens", MODEL): (scrapes, 0 * values)})
    end = live["ts"].iloc[-1] + pd.Timedelta(minutes=5)
    with prometheus_server(tmp_path / "prom", text) as url:
        rc = cli.main(["--db", str(db), "live", "--prometheus", url, "--model", MODEL,
                       "--history", "burstgpt1_week1_per_minute_tps",
                       "--from", split.isoformat(), "--to", end.isoformat()])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    rows = [json.loads(line) for line in out]  # JSON Lines, strict
    for line in out:
        strict_loads(line)
    assert len(rows) == len(live) == 576
    surged = pd.to_datetime([r["ts"] for r in rows]) >= pd.Timestamp(surge_at, unit="s")
    gaps = [(r["ts"], r["gap_reason"]) for r in rows if r["demand"] is None]
    assert not gaps, gaps[:3]
    demand_live = np.array([r["demand"] for r in rows])
    want = live["target"].to_numpy() * np.where(surged, 3, 1)
    assert np.allclose(demand_live, want, rtol=0, atol=1e-6)  # the bins are the store's
    # the offline road on the same series: one fit, forecasts from the whole series, ACI
    hist = grid[grid["ts"] < split]
    env = LiveEnvelope(hist, 300)
    # the series the forecasts read: a bin above the band reads as its upper bound until the
    # alarm (the module's rule, so that a surge cannot hide itself)
    fed, run = [], 0
    for r in rows:
        run = run + 1 if r["above"] else 0
        fed.append(r["upper"] if r["above"] and run < 4 else r["demand"])
    y = np.concatenate([hist["target"].to_numpy(), fed])
    feats = forecast.make_features(y, pd.concat([hist["ts"], live["ts"]]), 300, 1)
    rows_live = np.arange(len(hist), len(y))
    with forecast.single_threaded():
        yhat = np.maximum(env.model.predict(feats.X[rows_live]), 0.0)
    assert np.allclose([r["point"] for r in rows], yhat, rtol=1e-9, atol=1e-6)
    n = len(hist)
    cal = np.arange(n - round(n * 0.2), n)
    cal = cal[feats.valid[cal]]
    with forecast.single_threaded():
        yhat_cal = env.model.predict(feats.X[cal])
    lo, hi, _ = online_conformal(demand_live, yhat, residuals(y[cal], yhat_cal), 0.1, 0.005,
                                 floor=0.0)
    inside = (np.maximum(lo, 0) <= demand_live) & (demand_live <= np.maximum(hi, 0))
    assert rows[-1]["coverage_so_far"] == pytest.approx(inside.mean(), abs=1e-12)
    assert 0.75 < inside[~surged].mean() <= 1.0  # the calibrated band holds before the surge
    # the alarm (default: 4 bins in a row above the band): at the surge's 4th bin, not before
    # (the two days' longest natural run above the band is 3 bins)
    alarms = [i for i, r in enumerate(rows) if r["alarm"]]
    first = int(np.argmax(surged))
    assert alarms and alarms[0] == first + 3
    assert "above the band 4 bins in a row" in rows[first + 3]["alarm_reason"]
    assert not any(r["alarm"] for r in rows[:first])


def test_live_refusals_are_plain(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    seed(db, WEEK)
    rc = cli.main(["--db", str(db), "live", "--model", MODEL, "--history",
                   "burstgpt1_week1_per_minute_tps", "--to", "2023-01-09T00:00:00"])
    assert rc == 2 and "no Prometheus server" in strict_loads(capsys.readouterr().out)["error"]
    rc = cli.main(["--db", str(db), "live", "--prometheus", "http://127.0.0.1:9", "--model", MODEL,
                   "--history", "burstgpt1_week1_per_minute_tps", "--from",
                   "2023-01-10T00:00:00", "--to", "2023-01-11T00:00:00"])
    assert rc == 2 and "right after the history" in strict_loads(capsys.readouterr().out)["error"]
    rc = cli.main(["--db", str(db), "live", "--prometheus", "http://127.0.0.1:9", "--model", MODEL,
                   "--history", "burstgpt1_week1_per_minute_tps", "--from",
                   "2023-01-03T00:00:00", "--to", "2023-01-04T00:00:00"])
    assert rc == 2 and "needs 2 days to fit" in strict_loads(capsys.readouterr().out)["error"]
    rc = cli.main(["--db", str(db), "live", "--prometheus", "http://127.0.0.1:9", "--model", MODEL,
                   "--history", "burstgpt1_week1_per_minute_tps", "--to", "2023-01-10T00:00:00",
                   "--timeout-s", "1"])
    doc = strict_loads(capsys.readouterr().out)
    assert rc == 2 and "refused the connection" in doc["error"] and "127.0.0.1:9" in doc["error"]


def test_a_window_past_the_bound_is_refused_before_any_fit(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    seed(db, WEEK)
    rc = cli.main(["--db", str(db), "live", "--prometheus", "http://127.0.0.1:9", "--model", MODEL,
                   "--history", "burstgpt1_week1_per_minute_tps", "--to", "2023-03-01T00:00:00"])
    assert rc == 2 and "longer than 31 days" in strict_loads(capsys.readouterr().out)["error"]


def _series(name, kind, ts, values):
    from analytics.live.source import Series

    return Series(name, kind, (("model_name", "m"),), np.asarray(ts, float),
                  np.asarray(values, float))


def test_bins_name_gaps_and_never_count_a_missing_scrape_as_zero():
    # scrapes every 60 s over 25 minutes, none between minutes 6 and 16 (Prometheus was down)
    t = np.array([0, 60, 120, 180, 240, 300, 360, 960, 1020, 1080, 1140, 1200, 1260, 1320,
                  1380, 1440, 1500], float) + 1_700_000_100  # a multiple of 300 s
    v = np.arange(len(t), dtype=float) * 10
    bins = demand_bins([_series("vllm:prompt_tokens_total", "prompt", t, v)], t[0], t[-1], 300)
    # (5, 10] min has a sample (6) but the 600-s step from it reaches into (15, 20]: the
    # tokens of that step cannot be placed, so the bins it touches are gaps; (10, 15] has none
    assert bins["gap"].tolist() == [False, True, True, True, False]
    assert "no sample for 600 s here (a scrape gap)" in bins["gap_reason"][1]
    assert "no sample of vllm:prompt_tokens_total" in bins["gap_reason"][2]
    assert np.isnan(bins["target"][1]) and bins["target"][0] == 50.0 == bins["target"][4]
    # a series that starts inside a bin: that bin's earlier tokens are unknown
    late = demand_bins([_series("vllm:prompt_tokens_total", "prompt", t[3:], v[3:])], t[0],
                       t[-1], 300)
    assert late["gap"][0] and "starts inside this bin" in late["gap_reason"][0]
    # no series at all: every bin is a gap, never zero demand
    none = demand_bins([], t[0], t[-1], 300)
    assert none["gap"].all() and none["target"].isna().all()


ANSWERS = {  # what a broken or foreign server answers, and what the refusal must name
    "list": ("[1, 2]", "a JSON list"),
    "no_data": ('{"status": "success"}', "without a data object (data is null)"),
    "data_null": ('{"status": "success", "data": null}', "data is null"),
    "result_null": ('{"status": "success", "data": {"resultType": "matrix", "result": null}}',
                    "result is null, not a list of series"),
    "metric_null": ('{"status": "success", "data": {"resultType": "matrix", "result": '
                    '[{"metric": null, "values": []}]}}', "series 0 of the answer"),
    "bad_pair": ('{"status": "success", "data": {"resultType": "matrix", "result": '
                 '[{"metric": {"__name__": "vllm:prompt_tokens_total"}, "values": [[1]]}]}}',
                 "is not a [time, value] pair"),
    "bad_stamp": ('{"status": "success", "data": {"resultType": "matrix", "result": '
                  '[{"metric": {"__name__": "vllm:prompt_tokens_total"}, '
                  '"values": [["soon", "1"]]}]}}', "sample time 'soon' is not a UNIX time"),
    "nan": ('{"status": "success", "data": {"resultType": "matrix", "result": '
            '[{"metric": {"__name__": "vllm:prompt_tokens_total"}, '
            '"values": [[1700000000, "NaN"]]}]}}', "'NaN' is not a finite number >= 0"),
    "vector": ('{"status": "success", "data": {"resultType": "vector", "result": []}}',
               "'vector'"),
    "error": ('{"status": "error", "errorType": "bad_data", "error": "parse error"}',
              "bad_data: parse error"),
}


@pytest.fixture(scope="module")
def foreign_server():
    """A real HTTP server on loopback that answers /api/v1/query with the body named by the
    first path segment (a stand-in for a broken or foreign server: no Prometheus answers so)."""
    with http_server(lambda path: (200, ANSWERS[path.split("/")[1]][0].encode(),
                                   "application/json")) as url:
        yield url


def test_a_scraped_engine_checks_only_the_followed_models_series():
    from analytics.live.scrape import ScrapeSource

    text = ('vllm:prompt_tokens_total{model_name="m"} 100\n'
            'vllm:prompt_tokens_total{model_name="other"} NaN\n')
    with http_server(lambda path: (200, text.encode(), "text/plain")) as url:
        ScrapeSource(f"{url}/metrics", model="m").scrape()  # the other model's NaN: not ours
        with pytest.raises(SourceError, match="'other'.*is not a finite number >= 0"):
            ScrapeSource(f"{url}/metrics").scrape()  # every model's series: refused


@pytest.mark.parametrize("answer", sorted(ANSWERS))
def test_a_garbled_answer_is_refused_naming_what_is_wrong(foreign_server, answer):
    source = PrometheusSource(f"{foreign_server}/{answer}", timeout_s=5)
    with pytest.raises(SourceError) as err:
        source.counters("vllm", MODEL, 1_700_000_000, 1_700_000_600)
    assert ANSWERS[answer][1] in str(err.value)


def test_a_garbled_answer_and_bad_options_end_in_exit_2_before_any_fit(
        tmp_path, capsys, foreign_server, monkeypatch):
    db = tmp_path / "s.duckdb"
    seed(db, WEEK)
    fits = []
    monkeypatch.setattr(LiveEnvelope, "__init__", lambda *a, **k: fits.append(1))
    base = ["--db", str(db), "live", "--model", MODEL, "--history",
            "burstgpt1_week1_per_minute_tps", "--to", "2023-01-10T00:00:00"]
    rc = cli.main([*base, "--prometheus", f"{foreign_server}/result_null"])
    doc = strict_loads(capsys.readouterr().out)
    assert rc == 2 and "result is null" in doc["error"] and fits == []
    rc = cli.main([*base, "--prometheus", "http://127.0.0.1:9", "--w-prompt", "0",
                   "--w-completion", "0"])
    assert rc == 2 and "both 0" in strict_loads(capsys.readouterr().out)["error"]
    rc = cli.main([*base, "--prometheus", "http://127.0.0.1:9", "--timeout-s", "2"])
    doc = strict_loads(capsys.readouterr().out)
    assert rc == 2 and "refused the connection" in doc["error"]
    for bad in (["--alpha", "1.5"], ["--alpha", "0"], ["--w-prompt", "nan"],
                ["--w-completion", "-1"], ["--k-above", "0"], ["--bin-s", "-300"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main([*base, "--prometheus", "http://127.0.0.1:9", *bad])
        assert exit_.value.code == 2, bad
        assert "must be" in capsys.readouterr().err, bad
    with pytest.raises(SystemExit):
        cli.main([*base[:4], " ", *base[5:], "--prometheus", "http://127.0.0.1:9"])
    assert "give a name that is not blank" in capsys.readouterr().err
    # the break-it review's: each a plain refusal (exit 2), before any fit
    follow = base[:-2] + ["--follow"]
    for args, said in (
            ([*follow, "--prometheus", "http://127.0.0.1:9"], "more than 31 days of bins"),
            ([*follow, "--scrape", "http://127.0.0.1:9/metrics"], "no past samples"),
            ([*base, "--prometheus", "http://user:secret@127.0.0.1:9"], "holds credentials"),
            ([*base, "--prometheus", "http://127.0.0.1:99999"], "not a valid URL"),
            ([*base, "--prometheus", "http://[::1"], "not a valid URL"),
            ([*base[:-2], "--prometheus", "http://127.0.0.1:9", "--to", "2023-01-09T00:00:00",
              "--from", "2023-01-09T01:00:00"], "is not after --from")):
        rc = cli.main(args)
        doc = strict_loads(capsys.readouterr().out)
        assert rc == 2 and said in doc["error"] and "secret" not in doc["error"], (args, doc)
    for bad in (["--run", " "], ["--refit-every-h", "1e300"], ["--carbon-site", ""]):
        with pytest.raises(SystemExit):
            cli.main([*base, "--prometheus", "http://127.0.0.1:9", *bad])
        capsys.readouterr()
    for out in ("", str(tmp_path / "s.duckdb" / "sub")):  # blank, and a folder under a file
        rc = cli.main(["live-config", "--out", out])
        doc = strict_loads(capsys.readouterr().out)
        assert rc == 2 and doc["error"].startswith("--out"), doc
    assert fits == []


def test_an_overflowing_counter_is_a_gap_that_says_so_without_a_warning():
    import warnings

    t = np.arange(0.0, 601.0, 15.0)
    values = np.where(np.arange(len(t)) % 2, 0.0, 1e308)  # 1e308, reset to 0, 1e308 ...
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning would fail here
        bins = demand_bins([_series("vllm:prompt_tokens_total", "prompt", t, values)],
                           0.0, 600.0, 300)
    assert bins["gap"].all() and bins["target"].isna().all()
    assert all("not a finite number" in r for r in bins["gap_reason"])
