"""Value-of-information benchmark gate (issue 18 item 1): the preposterior expected gain, the
budget cut, the sequential regret backtest on the staged grids and ``headroom advisor-voi``."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest
from harness import strict_loads

from analytics import cli, store
from analytics.advisor import decide, persist, voi
from analytics.advisor import model as cm
from analytics.advisor import voi_backtest as vb


def test_two_arm_gain_equals_the_closed_form_expected_improvement():
    """Two arms in one cell, A = 1 USD per tok/s, C = 0. Arm 1 is measured: throughput 0.9,
    s = 0, so its utility is B = 0.9. Arm 2: mu = -0.125, s^2 = 0.25, so its expected
    utility is F = exp(-0.125 + 0.25 / 2) = 1 (the current best). Benchmark noise tau^2 = 0.25:
    the preposterior sd of the posterior mean is s~ = sqrt(s^4 / (s^2 + tau^2)) = sqrt(0.125).

    Observing arm 2 pays when its posterior expected utility falls below B = K = 0.9 (a put):
    d1 = (log(F / K) + s~^2 / 2) / s~ = (0.1053605 + 0.0625) / 0.3535534 = 0.4747812,
    d2 = d1 - s~ = 0.1212278, gain = K N(-d2) - F N(-d1) = 0.9 x 0.4517553 - 0.3174715 =
    0.0891083. Arm 1 is certain: gain 0. A brute-force preposterior simulation (draw the true
    log throughput, a noisy benchmark, update the mean, take the better arm) agrees within
    3 standard errors, so the expected gain is a mean move, not only a narrower interval (the
    paper's zero-by-construction flaw)."""
    gain = voi.cell_gains(np.array([0, 0]), [1.0, 1.0], [0.0, 0.0], [math.log(0.9), -0.125],
                          [0.0, 0.25], 0.25)
    assert gain[0] == 0.0
    assert gain[1] == pytest.approx(0.0891083, abs=1e-7)
    d1 = (math.log(1 / 0.9) + 0.0625) / math.sqrt(0.125)
    d2 = d1 - math.sqrt(0.125)
    phi = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))  # noqa: E731
    assert gain[1] == pytest.approx(0.9 * phi(-d2) - phi(-d1), rel=1e-12)
    rng = np.random.default_rng(0)
    theta = rng.normal(-0.125, 0.5, 400_000)
    y = theta + rng.normal(0.0, 0.5, theta.size)
    post_mu = -0.125 + 0.25 / (0.25 + 0.25) * (y + 0.125)
    post_s2 = 0.25 * 0.25 / (0.25 + 0.25)
    best = np.maximum(0.9, np.exp(post_mu + post_s2 / 2))
    se = best.std() / math.sqrt(best.size)
    assert abs((best.mean() - 1.0) - gain[1]) < 3 * se
    # out of the money (arm 2 below B: a call) the same formula holds: B = 1.2
    call = voi.expected_gain(1.0, 0.0, -0.125, 0.25, 0.25, 1.2)[0]
    d1 = (math.log(1 / 1.2) + 0.0625) / math.sqrt(0.125)
    assert call == pytest.approx(phi(d1) - 1.2 * phi(d1 - math.sqrt(0.125)), rel=1e-12)


def test_gain_is_positive_when_uncertain_and_zero_when_certain():
    s2 = np.array([0.0, 1e-8, 0.01, 0.1, 0.5])
    g = voi.expected_gain(np.ones(5), np.zeros(5), -s2 / 2, s2, 0.05, np.full(5, 0.95))
    assert g[0] == 0.0 and g[1] < 1e-30  # certain, or nearly, and 5 % from the boundary
    assert np.all(np.diff(g[1:]) > 0) and g[-1] > 0.05  # grows with the uncertainty
    # no other arm, no value per token, or an alternative that can never win: nothing to gain
    assert voi.expected_gain(1.0, 0.0, 0.0, 0.5, 0.05, -np.inf)[0] == 0.0
    assert voi.expected_gain(0.0, 1.0, 0.0, 0.5, 0.05, 0.0)[0] == 0.0
    assert voi.expected_gain(1.0, 5.0, 0.0, 0.5, 0.05, -10.0)[0] == 0.0
    # noise-free benchmarks are worth more than noisy ones
    assert voi.expected_gain(1, 0, 0, 0.1, 0.0, 1.0)[0] > voi.expected_gain(1, 0, 0, 0.1, 1.0,
                                                                             1.0)[0]
    # replicate noise: the median of the per-group log variances (0, 0.02, 2) is 0.02; a
    # pooled variance would be (0 + 0.02 + 2) / 3, pulled up by the one disagreeing group
    rows = pd.DataFrame({"cell": list("aabbccd"), "hardware": "H100-80GB", "tp": 1,
                         "precision": "bf16",
                         "throughput_tok_s": np.exp([1, 1, 0, 0.2, 0, 2, 5])})
    assert voi.measurement_noise(rows) == pytest.approx(0.02)
    assert voi.measurement_noise(rows.iloc[[0, 2, 4]]) == 0.0  # no replicates
    # the budget cut keeps the greedy prefix whose node-hours fit
    assert voi.budget_cut(np.array([0.4, 0.5, 0.2]), 1.0).tolist() == [True, True, False]
    assert voi.node_hours([8, 1], [64, 64], [100, 100], [6400, 6400], [np.nan, 3600],
                          voi.VoIParams(setup_min=6)).tolist() == pytest.approx([0.1 + 1 / 3600,
                                                                                 (0.1 + 1) / 8])


@pytest.fixture(scope="module")
def bench(bench_db):
    con = store.connect(bench_db)
    b = store.bench_runs(con)
    con.close()
    return b


def test_backtest_on_the_staged_grids_returns_four_regret_curves(adv, bench):
    u, p = decide.UtilityParams(), voi.VoIParams()
    bt = vb.backtest(adv.cost, adv.ctx, bench, u, p, seeds=2, subset=0.3, points=40)
    assert set(bt["curves"]) == set(vb.POLICIES) == {"voi", "uncertainty", "random", "cheapest"}
    assert bt["cells"] > 100 and bt["tau2"] > 0 and len(bt["hours"]) == 40
    for name, c in bt["curves"].items():
        assert len(c["mean"]) == 40 and np.all(np.array(c["lo"]) <= np.array(c["mean"]) + 1e-12)
        assert c["mean"][0] == pytest.approx(bt["curves"]["voi"]["mean"][0])  # same start
        assert c["mean"][0] > 0 and c["mean"][-1] == 0.0 and c["hi"][-1] == 0.0, name
    # every arm of every cell revealed: the recommendation is the true best in every cell
    table = vb.arm_table(adv.cost, adv.ctx, bench, u, p)
    table = table[table["cell"].isin(sorted(set(table["cell"]))[:40])].reset_index(drop=True)
    for name in vb.POLICIES:
        spent, regret = vb.run_policy(table, name, bt["tau2"], seed=0)
        assert len(spent) == len(table) + 1 and regret[0] > 0 and regret[-1] == 0.0
        assert spent[-1] == pytest.approx(table["node_hours"].sum())
        assert np.all(np.diff(spent) > 0)
    # without a priced GPU kind there is nothing to rank or backtest (and no error)
    none = decide.UtilityParams(prices_usd_per_gpu_h={})
    ranked, info = voi.rank_benchmarks(adv.cost, adv.ctx, bench, none, p)
    assert ranked.empty and info["candidates"] == 0 and info["selected"] == 0
    assert vb.backtest(adv.cost, adv.ctx, bench, none, p, seeds=1)["curves"] == {}
    # snapshot, not a derivation (2 runs of 30 % of the cells at 2e-7 USD per token): VoI
    # beats random and uncertainty sampling; cheapest-first is the strongest baseline here
    s = {k: v["area_mean_regret_usd"] for k, v in bt["summary"].items()}
    assert s["voi"] < s["random"] and s["voi"] < s["uncertainty"]


def test_cli_advisor_voi_document_is_strict_json(bench_db, adv, tmp_path, capsys):
    db = tmp_path / "voi.duckdb"
    shutil.copy(bench_db, db)
    con = store.connect(db)  # the session's fit, stored where the CLI looks for it
    key, inputs = persist.cache_key(store.list_datasets(con), cm.FitParams())
    con.close()
    assert persist.save(adv, tmp_path / "voi-cache" / "advisor", key, inputs)
    code = cli.main(["--db", str(db), "advisor-voi", "--top", "5", "--budget-node-h", "0.05",
                     "--backtest", "--seeds", "1"])
    doc = strict_loads(capsys.readouterr().out)
    assert code == 0 and doc["model_cache"] == "hit" and doc["backtest_cache"] == "miss"
    assert len(doc["benchmarks"]) == 5 and doc["candidates"] > doc["positive"] > 0
    gains = [b["gain_per_node_hour"] for b in doc["benchmarks"]]
    assert gains == sorted(gains, reverse=True) and gains[0] > 0
    for b in doc["benchmarks"]:
        assert b["expected_gain_usd"] == pytest.approx(b["gain_per_node_hour"] * b["node_hours"])
    assert 0 < doc["budget"]["selected_node_hours"] <= 0.05
    assert "assumption" in doc["node_hours_rule"]
    assert set(doc["backtest"]["curves"]) == set(vb.POLICIES)
    assert list(tmp_path.glob("voi-cache/voi/*.json"))  # the backtest is kept as JSON


def test_the_gate_selects_at_most_depth_probes_each_worth_its_cost(adv, bench):
    """Issue 33 item 4: the paper's gate (App. C.4) probes with a 0.2 node-hour budget, depth 3,
    epsilon 0.05, and stops on negative net value. Derived: a probe costs its GPU-hours
    (node-hours x 8 GPUs per node) at its arm's list price; net value = expected gain - that
    cost; a selected probe has gain > epsilon and net value > 0, at most ``depth`` are
    selected, their node-hours within the budget. At 1e-5 USD/token some gains exceed their
    cost; at list prices x 1e4 none does."""
    p = voi.VoIParams()
    assert (p.budget_node_h, p.depth, p.epsilon_usd) == (0.2, 3, 0.05)
    u = decide.UtilityParams(value_per_token_usd=1e-5)
    ranked, info = voi.rank_benchmarks(adv.cost, adv.ctx, bench, u, voi.VoIParams(budget_node_h=50))
    price = ranked["hardware"].map(u.prices_usd_per_gpu_h)
    np.testing.assert_allclose(ranked["probe_usd"], ranked["node_hours"] * 8 * price)
    np.testing.assert_allclose(ranked["net_value_usd"],
                               ranked["expected_gain_usd"] - ranked["probe_usd"])
    chosen = ranked[ranked["within_budget"]]
    assert 0 < len(chosen) <= 3 and info["selected"] == len(chosen)
    assert (chosen["net_value_usd"] > 0).all() and (chosen["expected_gain_usd"] > 0.05).all()
    one = voi.rank_benchmarks(adv.cost, adv.ctx, bench, u, voi.VoIParams(budget_node_h=50,
                                                                           depth=1))[1]
    assert one["selected"] == 1
    dear = decide.UtilityParams(value_per_token_usd=1e-5, prices_usd_per_gpu_h={
        k: 1e4 * v for k, v in u.prices_usd_per_gpu_h.items()})
    none, info = voi.rank_benchmarks(adv.cost, adv.ctx, bench, dear, voi.VoIParams(budget_node_h=50))
    assert info["selected"] == 0 and not none["within_budget"].any()
