"""Capacity: hand-checked violation / shortfall, Learn-then-Test factor derived from the
calibration bins, MILP vs brute force, one power formula; the capacity path and the envelope
reading one out-of-sample residual stream, and the factor / violation trade-off curve."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from conftest import shared
from harness import strict_loads
from scipy.stats import binom

from analytics.config import GPU_CATALOG, GPUKind
from analytics.decisions import capacity, mix
from analytics.envelope import online, pipeline, repair


def test_violation_and_shortfall_by_hand():
    y = np.array([100.0, 250.0, 80.0, 400.0, 0.0])
    cap = np.array([120.0, 200.0, 80.0, 300.0, 10.0])
    # over capacity: 250 > 200 (50 short), 400 > 300 (100 short); 80 == 80 is admitted
    assert capacity.violation_rate(y, cap) == pytest.approx(2 / 5)
    s = capacity.shortfall(y, cap)
    assert s["units"] == 150.0 and s["fraction"] == pytest.approx(150 / 830)


def test_factor_is_smallest_certified_and_monotone():
    rng = np.random.default_rng(0)
    u = np.full(2000, 100.0)
    y = rng.uniform(0, 100, 2000)  # P(y > f u) = 1 - f for f <= 1
    f, curve = capacity.choose_factor(y, u, violation_target=0.10, delta=0.1)
    # the true risk at f is 1 - f; certified below 10 % needs f a bit above 0.90
    assert 0.90 < f <= 0.95
    assert curve["violation"].is_monotonic_decreasing
    certified = curve[curve["certified"]]
    assert certified["factor"].min() == f and (certified["violation"] <= 0.10).all()
    assert capacity.choose_factor(y[:5], u[:5], violation_target=0.01)[0] is None  # 5 bins prove nothing


def _brute_force(d, r, w, avail):
    best = None
    for counts in itertools.product(*[range(a + 1) for a in avail]):
        c = np.array(counts)
        if c @ r >= d and (best is None or c @ w < best[0] - 1e-9):
            best = (c @ w, c)
    return best


@pytest.mark.parametrize("demand", [1.0, 7.5, 13.0, 22.0, 31.0])
def test_milp_matches_brute_force(demand):
    r = np.array([3.0, 5.0, 11.0])
    w = np.array([2.0, 3.1, 6.5])
    avail = [6, 4, 2]
    counts = mix.allocate(np.array([demand]), r, w, np.array(avail, float))[0]
    cost, _ = _brute_force(demand, r, w, avail)
    assert counts @ r >= demand and all(counts <= avail)
    assert counts @ w == pytest.approx(cost)


def test_milp_refuses_uncoverable_demand():
    with pytest.raises(ValueError, match="cannot be covered"):
        mix.allocate(np.array([100.0]), np.array([3.0]), np.array([1.0]), np.array([5.0]))


def test_kind_weights_power_model():
    from analytics.hardware.power import gpu_power_w

    k = GPUKind("x", "test", 80, None, None, None, 700, (), idle_w=100, price_usd_per_h=2.0,
                ref_tok_s=1000.0)
    assert gpu_power_w(100, 700, 0.5) == 400.0 and gpu_power_w(None, 700, 0.5) == 700.0
    assert mix.kind_weights([k], "power", 0.5)[0] == pytest.approx(100 + 600 * 0.5)
    assert mix.kind_weights([k], "carbon", 0.5, 400)[0] == pytest.approx(0.4 * 400)
    with pytest.raises(ValueError, match="no price"):
        mix.kind_weights([GPUKind("y", "test", 80, None, None, None, 700, (), idle_w=100,
                                  ref_tok_s=1.0)], "cost")


@pytest.fixture(scope="module")
def week_plan(week_envelope):
    return capacity.plan(week_envelope, 300, list(GPU_CATALOG), violation_target=0.05,
                         scale=1000)


def test_overbooking_on_real_week_holds_the_target_on_test(week_envelope, week_plan):
    doc = capacity.to_json(week_plan)
    n = doc["test_bins"]
    # tolerance: two binomial standard deviations of a 5 % rate over the test window
    tol = 2 * np.sqrt(0.05 * 0.95 / n)
    assert doc["overbooking_factor"] is not None
    assert doc["slo_violation_rate"] <= 0.05 + tol
    assert doc["violations"] == round(doc["slo_violation_rate"] * n)
    # a looser target certifies a smaller factor and allows more violations
    loose = capacity.to_json(capacity.plan(week_envelope, 300, list(GPU_CATALOG),
                                           violation_target=0.2, scale=1000))
    assert loose["overbooking_factor"] < doc["overbooking_factor"]
    assert loose["violations"] >= doc["violations"]
    assert doc["gpus"]["H100-80GB"]["saved_gpu_h"] > 0
    assert set(doc["excluded_kinds"]) >= {"A100-80GB", "H200-141GB"}
    assert doc["mix"]["gpu_hours"]  # the hourly MILP ran


def _hoeffding_bentkus_p(risk: float, n: int, target: float) -> float:
    """HB p-value of ``H0: risk > target`` for a binary loss (Angelopoulos et al. 2021,
    Learn-then-Test, Sec. 3.2): min of Hoeffding's ``exp(-n h1(min(r, target), target))`` and
    the exact binomial tail ``P(Binom(n, target) <= ceil(n r))`` (the binary loss needs no
    Bentkus factor e), written out independently of the library."""
    r = min(risk, target)
    h1 = (r * np.log(r / target) if r > 0 else 0.0) + (1 - r) * np.log((1 - r) / (1 - target))
    return float(min(np.exp(-n * h1), binom.cdf(np.ceil(n * risk), n, target)))


def test_ltt_factor_derived_from_calibration_bins(week_plan):
    """Derived: every grid factor from the largest down to the chosen f has an HB p-value
    <= delta on the calibration bins (so with probability 1 - delta its risk is below the
    target), and the next smaller factor does not; the chosen f's empirical calibration
    violation rate is below the target."""
    ob = week_plan.overbooking
    cal = ob.frame[ob.frame["part"] == "calibration"]
    y, upper = cal["y"].to_numpy(), cal["upper"].to_numpy()
    n = len(y)
    grid = capacity.FACTOR_GRID
    p_values = {f: _hoeffding_bentkus_p(capacity.violation_rate(y, f * upper), n, 0.05)
                for f in grid}
    assert all(p_values[f] <= 0.1 for f in grid if f >= ob.factor)
    below = grid[grid < ob.factor].max()
    assert p_values[below] > 0.1
    assert capacity.violation_rate(y, ob.factor * upper) <= 0.05


def test_snapshot_overbooking_factor(week_plan):
    """Regression pin, not a derivation: f = 1.09 on BurstGPT week 1 (5-minute grid, alpha 0.1,
    target 5 %, delta 0.1) was recorded from ``capacity.plan`` at seed 0 (README, "From
    envelopes to decisions"; 1.40 before issue 18 item 9, when the calibration bands were built
    from in-sample fit residuals). ``test_ltt_factor_derived_from_calibration_bins`` derives f;
    this pin catches silent changes of the envelope under it (0.1 of tolerance for library
    drift)."""
    assert week_plan.overbooking.factor == pytest.approx(1.09, abs=0.1)


def test_cli_capacity(tmp_path, capsys, week_envelope):
    from analytics import cli

    db = tmp_path / "cap.duckdb"
    path = shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")
    assert cli.main(["--db", str(db), "ingest", str(path)]) == 0
    capsys.readouterr()
    assert cli.main(["--db", str(db), "capacity", "burstgpt1_week1_per_minute_tps",
                     "--target-violation", "0.05"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    assert {"overbooking_factor", "slo_violation_rate", "shortfall_fraction", "gpus"} <= set(doc)
    # the CLI answers what the library answers on the same grid (the bootstrap count differs,
    # which the capacity plan does not read)
    ref = json.loads(json.dumps(capacity.to_json(capacity.plan(week_envelope, 300,
                                                                list(GPU_CATALOG)))))
    for key in ("overbooking_factor", "slo_violation_rate", "violations", "shortfall_fraction",
                "calibration_violation_rate", "gpus", "mix", "curve"):
        assert doc[key] == ref[key], key
    # the trade-off curve: one strict record per grid factor, by increasing factor
    curve = doc["curve"]
    assert [c["factor"] for c in curve] == sorted(capacity.FACTOR_GRID.tolist())
    assert set(curve[0]) == {"factor", "violation_rate", "ltt_bound", "p_value", "certified",
                             "test_violation_rate"}
    chosen = [c for c in curve if c["factor"] == doc["overbooking_factor"]]
    assert len(chosen) == 1 and chosen[0]["certified"]
    assert chosen[0]["test_violation_rate"] == doc["slo_violation_rate"]


def test_carbon_objective_mix(week_envelope):
    p = capacity.plan(week_envelope, 300, list(GPU_CATALOG), objective="carbon",
                      gco2_per_kwh=400.0, scale=1000)
    assert not p.mix.empty and "kgco2" in p.mix
    assert p.mix["kgco2"].to_numpy() == pytest.approx(p.mix["power_kw"].to_numpy() * 0.4)
    # no price needed for carbon: B200 (no price) may be used, A100-80GB has no throughput
    assert "B200" in p.mix.columns and "A100-80GB" not in p.mix.columns


# --- issue 18 item 9: one out-of-sample residual stream, and the trade-off curve

def test_capacity_and_envelope_read_the_same_residuals(week_envelope, week_plan):
    env, ob = week_envelope, week_plan.overbooking
    s = env.series
    stream = pipeline.residual_stream(s, "hgb")
    cal = stream[stream["part"] == "calibration"]
    test = stream[stream["part"] == "test"]
    # the stream is the calibration bins then the test bins, out of sample (never a fit bin)
    assert (s["part"].to_numpy()[stream["row"]] != "fit").all()
    assert len(cal) == (s["part"] == "calibration").sum() and len(test) == 323
    # hand-checked bins: residual = demand - the hgb forecast of that bin
    for i in (0, 1, len(cal) // 2, len(cal) - 1, len(cal), len(stream) - 1):
        r = stream.iloc[i]
        assert r["residual"] == s.loc[r["row"], "y"] - s.loc[r["row"], "hgb"]
        assert r["ts"] == s.loc[r["row"], "ts"]
    # the capacity path reads exactly these residuals ...
    np.testing.assert_array_equal(ob.frame["residual"], stream["residual"])
    np.testing.assert_array_equal(ob.frame["ts"], stream["ts"])
    # ... and so does the envelope: its rolling band is this stream's calibration residuals
    # rolled over its test residuals, and the capacity path scales that very band on test
    _, hi, _ = online.online_conformal(test["y"], test["yhat"], cal["residual"], 0.1)
    hi = repair.repair_band(test["yhat"].to_numpy(), hi, hi, test["yhat"].to_numpy())[1]
    np.testing.assert_allclose(env.test["rolling_hi"], hi, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(ob.frame.loc[ob.frame["part"] == "test", "upper"],
                                  env.test["rolling_hi"])
    # the calibration residuals are the large out-of-sample ones (issue: mean |r| 3,873 here,
    # the fit residuals the capacity path used to read are about 610)
    fit = s[(s["part"] == "fit") & s["hgb"].notna()]
    assert np.abs(cal["residual"]).mean() > 3 * np.abs(fit["y"] - fit["hgb"]).mean()


def test_calibration_band_is_leave_one_out_by_hand(week_plan):
    """Each calibration bin's upper bound = its forecast + the ceil(0.95 n)-th smallest of the
    OTHER n - 1 calibration residuals (MAPIE's finite-sample rule at 1 - alpha/2, alpha 0.1)."""
    frame = week_plan.overbooking.frame
    cal = frame[frame["part"] == "calibration"]
    r, yhat = cal["residual"].to_numpy(), cal["yhat"].to_numpy()
    n = len(r)
    k = int(np.ceil(0.95 * n))
    for t in (0, 7, n // 3, n - 1):
        others = np.sort(np.delete(r, t))
        assert cal["upper"].iloc[t] == pytest.approx(max(yhat[t] + others[k - 1], yhat[t], 0))
    assert (cal["upper"].to_numpy() >= yhat).all()


def test_leave_one_out_bounds_small_by_hand():
    scores = np.array([3.0, -1.0, 4.0, 1.0, -5.0, 9.0, 2.0, 6.0, 5.0, 3.0, -2.0, 0.0])
    yhat = np.arange(12.0)
    lo, hi = online.leave_one_out_bounds(yhat, scores, 0.5)
    for t in range(12):  # brute force with the rolling window's own quantile rule
        low, up = online._signed_bounds(np.sort(np.delete(scores, t)), 0.5)
        assert (lo[t], hi[t]) == (yhat[t] + low, yhat[t] + up)
    lo, hi = online.leave_one_out_bounds(yhat, scores, 0.1)  # 11 others: too few for alpha 0.1
    assert np.isinf(hi).all() and np.isinf(lo).all()


def test_tradeoff_curve_monotone_and_chosen_is_smallest_meeting_ltt(week_plan):
    ob = week_plan.overbooking
    c = ob.curve
    assert c["factor"].is_monotonic_increasing
    for col in ("violation", "test_violation", "ltt_bound", "p_value"):
        assert c[col].is_monotonic_decreasing, col  # non-increasing as the factor grows
    assert (c["ltt_bound"] >= c["violation"]).all()
    meets = c[c["ltt_bound"] <= ob.violation_target]
    assert ob.factor == meets["factor"].min() == c.loc[c["certified"], "factor"].min()
    below = c[c["factor"] < ob.factor]
    assert (below["ltt_bound"] > ob.violation_target).all() and not below["certified"].any()
    # the bound at the chosen factor, derived: HB p-value <= delta there, > delta 0.001 below
    n = ob.calibration["bins"]
    row = c[c["factor"] == ob.factor].iloc[0]
    assert _hoeffding_bentkus_p(row["violation"], n, row["ltt_bound"]) <= ob.delta
    assert _hoeffding_bentkus_p(row["violation"], n, row["ltt_bound"] - 0.001) > ob.delta


def test_fixed_sequence_stops_at_the_first_factor_it_cannot_certify(monkeypatch):
    """Issue 33 (a planted bug lived: the stop was removed). Learn-then-Test's family-wise
    error control holds only if testing from the largest factor down stops at the first
    non-rejection (Angelopoulos et al. 2021, fixed-sequence testing). A violation curve is
    monotone for a fixed upper bound, so the stop is invisible there; this risk function is not:
    2 % violations from f = 1.5 up, 30 % on 1.2 <= f < 1.5 and 2 % again below. With 2,000 bins,
    a 10 % target and delta 0.1, 1.50 is the smallest certified factor; without the stop the
    2 % factors below 1.2 would be certified too and 0.50 chosen."""
    def risk(y, cap):
        f = float(np.asarray(cap)[0])
        return 0.30 if 1.2 <= f < 1.5 - 1e-9 else 0.02

    monkeypatch.setattr(capacity, "violation_rate", risk)
    f, curve = capacity.choose_factor(np.zeros(2000), np.ones(2000), violation_target=0.10,
                                      delta=0.1)
    assert f == 1.5
    below = curve[curve["factor"] < 1.2]
    assert (below["p_value"] <= 0.1).all() and not below["certified"].any()
