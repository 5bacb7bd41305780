"""The case files of ``../shared/cases`` on the pages they feed (issue 14, "Done when"): the
values their README rows give, as a user sees them."""

from __future__ import annotations

from harness import SHARED_DATA, missing, new_app, seed, strict_loads, table_with

CASES = SHARED_DATA.parent / "cases"


def _case(name: str) -> str:
    """The case's path relative to the staged-data folder, as :func:`harness.seed` takes it."""
    if not (CASES / name).exists():
        missing(CASES / name)
    return f"../cases/{name}"


def test_case_27_zero_demand_test_window_on_demand_and_coverage(app_env):
    """WAPE empty with the reason said, MAE and RMSE given, no infinite interval (ACI included)."""
    seed(app_env["db"], _case("27-zero-demand-test-window.csv"))
    at = new_app().run()
    at.switch_page("pages/demand.py").run()
    assert not at.exception
    models = table_with(at, "WAPE %")
    assert models["WAPE %"].isna().all() and models["MAE"].notna().all()
    assert any("zero demand in the test window" in c.value for c in at.caption)
    at.switch_page("pages/coverage.py").run()
    assert not at.exception
    intervals = table_with(at, "infinite intervals")
    assert len(intervals) == 6 and intervals["infinite intervals"].sum() == 0


def test_case_15_repairs_are_counted_on_the_coverage_page(app_env):
    """Every band is 0 <= lower <= point <= upper; the repairs are counted and shown."""
    seed(app_env["db"], _case("15-bursty-zero-heavy-cqr.csv"))
    at = new_app().run()
    at.switch_page("pages/coverage.py").run()
    assert not at.exception
    repairs = table_with(at, "repaired_negative_point")
    counts = [c for c in repairs.columns if c.startswith("repaired") or c == "point_outside_band"]
    assert repairs[counts].to_numpy().sum() > 0  # this sparse trace needs repairs
    assert any(e.label.startswith("Repairs: demand is never negative") for e in at.expander)


def test_case_19_rate_is_not_concurrency_on_the_data_page(app_env):
    """Uploaded ``vllm bench serve`` result: the ingest report says the concurrency was measured
    by Little's law (36.0), and the rate is kept as a rate."""
    data = (CASES / "19-vllm-bench-request-rate-no-concurrency.json")
    if not data.exists():
        missing(data)
    at = new_app().run()
    at.file_uploader(key="uploads").set_value((data.name, data.read_bytes(), "application/json"))
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    warned = table_with(at, "warning")["warning"]
    assert any("concurrency 36.0 MEASURED by Little's law" in w for w in warned)


def test_case_07_gpu_hours_in_the_cli_and_on_the_data_page(app_env, capsys):
    """GPUs per job 1, 1, 2, 8 (never typed + untyped both): 196.0 GPU-hours; job 3001 on a MIG
    slice -- in ``headroom summary`` and in the Data page's dataset summary."""
    from analytics import cli

    seed(app_env["db"], _case("07-sacct-alloctres-typed-gpu.txt"))
    assert cli.main(["--db", str(app_env["db"]), "summary", "07-sacct-alloctres-typed-gpu"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    assert (doc["jobs"], doc["gpu_hours"], doc["mig_job_ids"]) == (4, 196.0, "3001")
    assert doc["gpus_per_job"] == {"1": 2, "2": 1, "8": 1}
    at = new_app().run()
    assert not at.exception
    shown = table_with(at, "what").set_index("what")["value"]
    assert shown["gpu hours"] == "196.0" and shown["mig job ids"] == "3001"
    assert shown["gpus per job"] == "{1: 2, 2: 1, 8: 1}"


def test_case_20_two_nodes_are_four_gpus_in_the_summary(app_env, capsys):
    from analytics import cli

    seed(app_env["db"], _case("20-dcgm-two-nodes-same-gpu-index.prom"))
    assert cli.main(["--db", str(app_env["db"]), "summary",
                     "20-dcgm-two-nodes-same-gpu-index"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    assert (doc["gpus"], doc["hosts"], doc["samples"]) == (4, 2, 12)
    assert doc["mean_power_w"] == 358.0  # (100.5 + 110.5 + 600.5 + 620.5) / 4, three samples each


def test_alpha_one_percent_runs_and_a_too_small_alpha_says_why(app_env):
    """Issue 19 item 10: a 99 % envelope (alpha 0.01) runs where the calibration window has the
    bins for it; a smaller one is refused naming the smallest alpha the window supports."""
    seed(app_env["db"], _case("27-zero-demand-test-window.csv"))
    at = new_app().run()
    at.switch_page("pages/demand.py").run()
    at.selectbox(key="bin").set_value("1min").run()  # 648 calibration bins
    at.select_slider(key="demand_alpha").set_value(0.01).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("99% band" in chart.proto.spec for chart in at.get("plotly_chart"))
    at.select_slider(key="demand_alpha").set_value(0.001).run()
    assert not at.exception
    (error,) = at.error
    assert "alpha = 0.001 needs at least 2000" in error.value
    assert "the smallest alpha it supports is" in error.value


def test_case_33_and_37_data_page_shows_sources_and_assumptions(app_env):
    """Issue 27: the Data page's dataset summary shows the column each stored field came from
    and every assumption the reader made (AllocGRES, power.draw.average, times read as UTC)."""
    seed(app_env["db"], _case("33-sacct-allocgres-legacy.txt"),
         _case("37-nvidia-smi-power-average-instant.csv"))
    at = new_app().run()
    assert not at.exception
    shown = table_with(at, "what").set_index("what")["value"]
    assert shown["gpu hours"] == "6.0" and shown["gpus per job"] == "{0: 2, 2: 1, 4: 1}"
    sources = table_with(at, "field").set_index("field")["from (the file's column)"]
    assert sources["n_gpus"] == "AllocGRES"
    assumed = [c.value for c in at.caption if c.value.startswith("Assumed:")]
    assert any("sacct times have no offset and were read as UTC" in a for a in assumed)
    at.selectbox(key="manage_dataset").set_value("37-nvidia-smi-power-average-instant").run()
    sources = table_with(at, "field").set_index("field")["from (the file's column)"]
    assert sources["power_w"] == "power.draw.average [W]"
    assert any("host assumed" in c.value for c in at.caption)
