"""The Power page through AppTest: empty store explains itself; with a real job trace and the
BurstGPT per-minute series it simulates, its share sweep can be cancelled and run again, and
moving the inference share changes the metrics."""

from __future__ import annotations

from harness import metrics, new_app, seed, table_with


def test_power_page_without_jobs_says_how_to_add_them(app_env):
    at = new_app().run()
    at.switch_page("pages/power.py").run()
    assert not at.exception
    assert at.title[0].value == "Power"
    assert "No job trace" in at.info[0].value and "headroom ingest" in at.info[0].value


def test_power_page_simulates_and_share_changes_the_metrics(app_env):
    seed(app_env["db"], "mit_supercloud/slurm-log-queueing-clean.csv",
         "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")
    at = new_app().run()
    at.session_state["power_days"] = 1  # one measured day: the page's work, 7x cheaper
    at.switch_page("pages/power.py").run()
    assert not at.exception
    downloads = {b.key for b in at.get("download_button")}  # issue 19 item 12
    assert {"power_report", "dl_power_sweep_table_csv", "dl_power_sweep_table_parquet"} <= downloads
    assert at.title[0].value == "Power"
    assert at.selectbox(key="power_inference").value == "burstgpt1_week1_per_minute_tps"
    before = metrics(at)
    assert set(before) >= {"CV of total power", "p50 ramp 1min", "p50 ramp 15min"}
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # power over time, share sweep, daily profile
    # issue 19 item 9: a day of minutes drawn as 5-minute means with the per-minute min-max
    # band and a range slider, not 1,440 points per line (a week: 15-minute means)
    assert "5-minute mean, per-minute min-max band" in charts[0].proto.spec
    assert '"rangeslider"' in charts[0].proto.spec
    assert "Inference-share sweep" in charts[1].proto.spec and "SYNTHETIC" not in \
        charts[1].proto.spec
    # the verdict the caption states is the one the sweep table it comes from implies (a CV
    # minimum at an interior share), not just any sentence containing "U-shaped"
    caption = next(c.value for c in at.caption if c.value.startswith("On these inputs"))
    sweep = table_with(at, "inference_share")
    for u, g in sweep.groupby("utilization"):
        cv = g.sort_values("inference_share")["cv"].to_numpy()
        shares = g.sort_values("inference_share")["inference_share"].to_numpy()
        verdict = "U-shaped" if cv[1:-1].min() < min(cv[0], cv[-1]) else "not U-shaped"
        assert f"U={u:g}: CV is {verdict} (minimum at share {shares[cv.argmin()]:g})" in caption
    _cancel_then_run_the_sweep_again(at)

    at.slider(key="power_share").set_value(0.0).run()
    assert not at.exception
    after = metrics(at)
    assert after["CV of total power"] != before["CV of total power"]
    assert after["p50 ramp 1min"] == "0.00%"  # batch only: segments change power rarely
    assert after["inference shortfall"] == "0.0%"

    at.selectbox(key="power_inference").set_value("synthetic").run()
    assert not at.exception
    assert any("SYNTHETIC" in w.value for w in at.warning)
    assert all("SYNTHETIC" in c.proto.spec for c in at.get("plotly_chart"))


def _cancel_then_run_the_sweep_again(at):
    """Issue 19 item 5 (on the page the test above opened, sweep done): the sweep's bar says n
    of N with elapsed time and an ETA; a Cancel (its callback sets the flag before the rerun)
    leaves the page with a Run button instead of starting the sweep again; Run brings the
    (cached) sweep back."""
    from analytics.ui.progress import Progress

    assert at.button(key="power_sweep_cancel")
    at.session_state["power_sweep_cancelled"] = True  # what the Cancel button's callback does
    at.run()
    assert "Sweep cancelled." in [i.value for i in at.info]
    assert len(at.get("plotly_chart")) == 1  # the scenario's chart; no sweep, no daily profile
    at.button(key="power_sweep_run").click().run()
    assert not at.exception and len(at.get("plotly_chart")) == 3
    bar = Progress.__new__(Progress)  # the bar's text, on a clock 30 s after 3 of 12 steps
    bar.what, bar.t0 = "Sweep", __import__("time").monotonic() - 30
    assert bar.text(3, 12, "U 0.5").startswith("Sweep: 3 of 12 (U 0.5), 30 s elapsed, about 9")
