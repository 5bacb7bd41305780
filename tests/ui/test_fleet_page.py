"""The Fleet plan page (issue 30 item 5) on real data: the BurstGPT week as demand (its output
share from the first BurstGPT_1 rows), the ML.ENERGY v3 sweeps as capacity; the numbers it shows
are the CLI's, and every export it offers is the one ``headroom plan --emit`` prints."""

from __future__ import annotations

import pytest
import yaml
from harness import metrics, new_app, seed, strict_loads

from analytics.cli import main

FILES = ("ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
         "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv",
         "burstgpt/BurstGPT_1_head400.csv", "sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv")
WEEK = "burstgpt1_week1_per_minute_tps"


@pytest.fixture(scope="module")
def fleet_template(tmp_path_factory):
    """The store of :data:`FILES`, ingested once: each test gets a copy with the same ledger
    rows, so the envelope and the cost model fitted by one test are read back by the next
    from the session's shared cache (keyed by the ledger)."""
    path = tmp_path_factory.mktemp("fleet_page") / "template.duckdb"
    seed(path, *FILES)
    return path


@pytest.fixture
def fleet_app(app_env, fleet_template):
    app_env["db"].write_bytes(fleet_template.read_bytes())
    return app_env


def _open(at):
    at.sidebar.selectbox(key="dataset").set_value(WEEK).run()
    at.switch_page("pages/fleet.py").run()
    at.selectbox(key="fleet_model").set_value("Qwen/Qwen3-14B (lm-arena-chat)").run()
    return at


def test_the_page_plans_the_week_as_the_cli_does(fleet_app, capsys):
    at = _open(new_app().run())
    assert not at.exception, [e.value for e in at.exception]
    at.number_input(key="slo_itl_p99_ms").set_value(80.0)
    at.select_slider(key="fleet_scale").set_value(300).run()  # both in one rerun
    assert not at.exception, [e.value for e in at.exception]
    shown = metrics(at)
    assert shown["arm"] == "H100-80GB"
    code = main(["--db", str(fleet_app["db"]), "plan", WEEK, "--model", "Qwen/Qwen3-14B",
                 "--task", "lm-arena-chat", "--itl-p99-ms", "80", "--scale", "300",
                 "--output-share-from", "BurstGPT_1_head400"])
    assert code == 0
    doc = strict_loads(capsys.readouterr().out)
    r, e, b = doc["replicas"], doc["economics"], doc["backtest"]
    assert shown["replicas (test window)"] == f"{r['min']}-{r['max']}"
    assert shown["GPU-hours planned"] == f"{e['planned_gpu_h']:,.1f}"
    assert shown["$ per 1M output tokens"] == f"{doc['usd_per_1m_tokens']:,.2f}"
    assert shown["backtest: short bins"] == f"{b['shortfall_bins']} / {b['bins']}"
    assert b["shortfall_rate"] <= 0.05
    # the downloads are the CLI's exports
    buttons = {d.proto.label: d for d in at.get("download_button")}
    assert {"vllm serve command", "Kubernetes Deployment + KEDA ScaledObject",
            "SkyServe service", "Slurm batch script"} <= set(buttons)
    assert main(["--db", str(fleet_app["db"]), "plan", WEEK, "--model", "Qwen/Qwen3-14B",
                 "--task", "lm-arena-chat", "--itl-p99-ms", "80", "--scale", "300",
                 "--output-share-from", "BurstGPT_1_head400", "--emit", "vllm"]) == 0
    assert at.code[0].value == capsys.readouterr().out.rstrip("\n")  # st.code drops it
    k8s = next(c.value for c in at.code if "ScaledObject" in c.value)
    _, scaled = yaml.safe_load_all(k8s)
    assert scaled["spec"]["minReplicaCount"] == min(r["by_hour_utc"])
    # no page field sets the Prometheus address: without the operator's, cron triggers only
    assert not any("Prometheus" in t.label for t in at.text_input)
    assert {t["type"] for t in scaled["spec"]["triggers"]} == {"cron"}
    # a stored carbon site: gCO2 per 1M tokens from its series' mean, as the CLI's --site
    at.selectbox(key="fleet_site").set_value("CISO").run()
    assert main(["--db", str(fleet_app["db"]), "plan", WEEK, "--model", "Qwen/Qwen3-14B",
                 "--task", "lm-arena-chat", "--itl-p99-ms", "80", "--scale", "300",
                 "--output-share-from", "BurstGPT_1_head400", "--site", "CISO"]) == 0
    carbon = strict_loads(capsys.readouterr().out)["economics"]["gco2_per_1m_tokens"]
    assert carbon > 0 and metrics(at)["gCO2 per 1M tokens"] == f"{carbon:,.0f}"
    # half the stated risk on capacity: the knee's held-out lower bound, more GPU-hours
    at.slider(key="fleet_risk").set_value(0.10).run()  # the capacity choices depend on it
    at.select_slider(key="fleet_cap_risk").set_value(0.05).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("held-out-cell lower bound" in c.value for c in at.caption)
    assert any("Arms no benchmark ran, predicted" in c.value for c in at.caption)
    assert float(metrics(at)["GPU-hours planned"].replace(",", "")) > e["planned_gpu_h"]
    # a stricter SLO no arm meets is a clear refusal, not a traceback
    at.number_input(key="slo_itl_p99_ms").set_value(1.0).run()
    assert not at.exception
    assert any("No fleet plan" in x.value and "no measured arm" in x.value for x in at.error)


def test_a_series_without_a_request_dataset_asks_for_a_stated_share(app_env):
    seed(app_env["db"], *FILES[:2])
    at = _open(new_app().run())
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key="fleet_share").value == 0.35
    assert "arm" in metrics(at)


def test_a_link_reopens_the_same_plan(fleet_app):
    at = _open(new_app().run())
    at.number_input(key="slo_itl_p99_ms").set_value(80.0)
    at.slider(key="fleet_risk").set_value(0.10).run()
    shown = metrics(at)
    link = dict(at.query_params)
    assert link["fleet_model"] == "Qwen/Qwen3-14B (lm-arena-chat)"
    assert (link["fleet_risk"], link["slo_itl_p99_ms"], link["dataset"]) == ("0.1", "80.0", WEEK)
    fresh = new_app()  # another browser: a new session opened on the link
    fresh.query_params.update(link)
    fresh.switch_page("pages/fleet.py").run()
    assert not fresh.exception, [e.value for e in fresh.exception]
    assert metrics(fresh) == shown


def test_the_keda_trigger_carries_the_operators_prometheus(fleet_app, monkeypatch):
    monkeypatch.setenv("HEADROOM_PROMETHEUS_URL", "http://prometheus.monitoring:9090")
    at = _open(new_app().run())
    assert not at.exception, [e.value for e in at.exception]
    k8s = next(c.value for c in at.code if "ScaledObject" in c.value)
    _, scaled = yaml.safe_load_all(k8s)
    prom = [t for t in scaled["spec"]["triggers"] if t["type"] == "prometheus"]
    assert prom[0]["metadata"]["serverAddress"] == "http://prometheus.monitoring:9090"
