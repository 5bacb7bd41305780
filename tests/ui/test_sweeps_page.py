"""Issue 31 item 11: the Sweeps page lists the sweeps kept in the store, filters them by
analysis, opens one (a power sweep: its chart with 95 % bands, its cells and points) and
deletes it, asking first."""

from __future__ import annotations

from harness import new_app, seed, strict_loads

from analytics import cli, store

JOBS = "mit_supercloud/slurm-log-queueing-clean.csv"
WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"


def test_sweeps_page_without_sweeps_says_where_they_come_from(app_env):
    at = new_app().run()
    at.switch_page("pages/sweeps.py").run()
    assert not at.exception
    assert "No sweep is stored yet" in at.info[0].value


def test_sweeps_page_opens_and_deletes_a_stored_power_sweep(app_env, capsys):
    seed(app_env["db"], JOBS, WEEK)
    assert cli.main(["--db", str(app_env["db"]), "powersim", "--sweep", "--days", "1",
                     "--warmup-days", "0.5", "--replications", "2", "--gpus", "64"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    con = store.connect(app_env["db"], read_only=True)
    try:
        (run,) = store.sweep_runs(con, "power.sweep_point").to_dict("records")
    finally:
        con.close()
    assert run["tasks"] == len(doc["sweep"]) * 2  # every cell x 2 replications, stored
    at = new_app().run()
    at.switch_page("pages/sweeps.py").run()
    assert not at.exception
    listed = at.dataframe[0].value
    assert listed["tasks"].tolist() == [run["tasks"]]
    assert at.get("plotly_chart")[0].proto.spec.count("Inference-share sweep") == 1
    cells = at.dataframe[1].value
    assert len(cells) == len(doc["sweep"]) and {"cv", "cv_lo95", "cv_hi95"} <= set(cells.columns)
    # the cells read back from the store are the ones the CLI's sweep printed
    by = ["utilization", "inference_share"]
    printed = {tuple(r[c] for c in by): r["cv"] for r in doc["sweep"]}
    assert all(abs(printed[tuple(r[c] for c in by)] - r["cv"]) < 1e-12
               for r in cells.to_dict("records"))
    assert len(at.dataframe[2].value) == run["tasks"]  # one row per stored point
    at.multiselect(key="sweeps_filter").set_value([]).run()
    assert at.dataframe[0].value.empty and not at.get("plotly_chart")
    at.multiselect(key="sweeps_filter").set_value(["power.sweep_point"]).run()
    at.button(key="sweeps_delete").click().run()
    assert "Delete the" in at.warning[0].value  # asked first
    at.button(key="sweeps_delete_yes").click().run()
    assert not at.exception
    assert at.success[0].value == f"Deleted {run['tasks']} points."
    assert "No sweep is stored yet" in at.info[0].value
