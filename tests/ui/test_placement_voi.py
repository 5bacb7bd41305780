"""Placement page, "Benchmarks worth running" tab (issue 18 item 1) through AppTest, on the real
ML.ENERGY v2 runs (A100 and H100 at TP 1-8: priced arms in every cell)."""

from __future__ import annotations

from harness import new_app, seed


def _store_fit(db) -> None:
    """Fit a small advisor (throughput only, 40 trees: the tab reads no other target) and store
    it where the page looks for the fit of this store (the disk cache keyed by the ledger and
    the default fit parameters): the page reads it instead of fitting five targets."""
    from analytics import advisor, store
    from analytics.advisor import model, persist

    con = store.connect(db)
    key, inputs = persist.cache_key(store.list_datasets(con), model.FitParams())
    adv = advisor.build(store.bench_runs(con), store.jobs(con),
                        model.FitParams(targets=("throughput_tok_s",), n_estimators=40))
    con.close()
    assert persist.save(adv, db.parent / f"{db.stem}-cache" / "advisor", key, inputs)


def test_benchmarks_worth_running_tab_ranks_and_backtests(app_env):
    seed(app_env["db"], "ml_energy/leaderboard_v2/llm_text_generation_runs.csv")
    _store_fit(app_env["db"])
    at = new_app().run()
    at.session_state["adv_value"] = 1e-5  # lower values: no gain on the 8B cells beats 0.05 USD
    at.switch_page("pages/placement.py").run()
    assert not at.exception
    assert not [w.value for w in at.warning if "Session State" in w.value]
    shown = {m.label: m.value for m in at.metric}
    assert int(shown["candidate benchmarks"]) >= int(shown["within budget"]) > 0
    ranked = next(d.value for d in at.dataframe if "gain_per_node_hour" in d.value)
    assert ranked["within_budget"].all() and ranked["cum_node_hours"].max() <= 0.2
    assert ranked["gain_per_node_hour"].is_monotonic_decreasing
    # issue 31 item 7: the candidates are benchmarks of the model asked for
    asked = at.selectbox(key="adv_model").value
    assert set(ranked["model"]) == {asked}
    assert any(c.value.startswith(f"Candidates: benchmarks of {asked}") for c in at.caption)
    summary = next(d.value for d in at.dataframe if "area_mean_regret_usd" in d.value)
    assert set(summary.index) == {"voi", "uncertainty", "random", "cheapest"}
    assert (summary["final_regret_usd"] == 0).all()
    assert any("lowest mean regret" in c.value for c in at.caption)
    downloads = {b.key for b in at.get("download_button")}
    assert {"dl_voi_chart_csv", "dl_voi_table_csv"} <= downloads
    assert at.number_input(key="voi_budget").value == 0.2  # the paper's budget (App. C.4)
