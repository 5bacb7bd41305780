"""Hybrid power models: outcome metrics, the inference load, the batch arrival generator on MIT
SuperCloud, and the measured inputs (ML.ENERGY templates, AcmeTrace power) re-derived from the
staged files."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import shared

from analytics import power as powersim
from analytics import store
from analytics.ingest import files as ingest

# --- metrics and the arrival generator -------------------------------------------------------

def test_power_metrics_definitions():
    p = np.array([100.0, 110.0, 90.0, 100.0, 130.0, 70.0])
    m = powersim.power_metrics(p, (1, 5))
    assert m["cv"] == pytest.approx(p.std() / p.mean())
    q = p / p.mean()
    assert m["ramp_p50"]["1min"] == pytest.approx(np.median(np.abs(np.diff(q))))
    assert m["ramp_p50"]["5min"] == pytest.approx(abs(q[5] - q[0]))
    assert math.isnan(powersim.power_metrics(np.zeros(4))["cv"])


def test_inference_load_hits_the_mean_and_power_is_tokens_times_energy():
    rng = np.random.default_rng(1)
    tok = rng.lognormal(10, 0.5, 1440)
    load = powersim.inference_load(tok, 60.0)
    assert load.demand_gpus.mean() == pytest.approx(60.0, rel=0.01)
    # power per allocated GPU stays below the templates' full-load per-GPU power
    per_gpu = load.power_full_w.sum() / load.demand_gpus.sum()
    assert 300 < per_gpu < max(t.power_w / t.gpus for t in powersim.TEMPLATES["M"])
    with pytest.raises(ValueError, match="all zeros"):
        powersim.inference_load(np.zeros(10), 5.0)


def test_arrival_model_on_mit_supercloud(con):
    path = shared("mit_supercloud/slurm-log-queueing-clean.csv")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    jobs = store.gpu_jobs(con, "slurm-log-queueing-clean")
    assert len(jobs) == 2368  # every GPU job of the export has start and end
    model = powersim.fit_arrival_model(jobs, np.random.default_rng(0), clock_offset_h=-5)
    groups = model.summary()
    assert [g["group"] for g in groups] == ["low", "medium", "high"]
    assert sum(g["jobs"] for g in groups) == 2368
    gh = [g["median_gpu_hours"] for g in groups]
    assert gh == sorted(gh)
    for g in model.groups:
        assert g.com_sd_fit_h == pytest.approx(g.com_sd_obs_h, rel=0.05)
    # the logistic-normal profile reproduces the pooled hourly histogram (total variation)
    z = np.random.default_rng(1).standard_normal((20_000, 23))
    for g in model.groups:
        mean_w = powersim.alr_inverse(g.alr_mean + z * np.sqrt(g.alr_var), g.ref_hour).mean(axis=0)
        assert 0.5 * np.abs(mean_w - g.hourly_obs).sum() < 0.02
    # and so do generated arrivals, up to the noise of overdispersed daily counts
    days = 1500
    gen = powersim.generate_jobs(model, np.random.default_rng(1), days)
    for k, g in enumerate(model.groups):
        hours = ((gen.submit_s[gen.group == k] % 86400) // 3600).astype(int)
        sim = np.bincount(hours, minlength=24) / len(hours)
        assert 0.5 * np.abs(sim - g.hourly_obs).sum() < 0.08
        assert len(hours) / days == pytest.approx(g.daily_mean, rel=0.15)


# --- measured inputs re-derived from the staged files ---------------------------------------

@pytest.mark.parametrize("speed", ["F", "M", "S"])
def test_templates_match_ml_energy_rows(speed):
    path = shared("ml_energy/leaderboard_v3/all_task_configurations_flat.csv")
    derived = powersim.templates_from_mlenergy(path, speed)
    for got, baked in zip(derived, powersim.TEMPLATES[speed], strict=True):
        assert (got.model, got.gpus, got.max_num_seqs) == (baked.model, baked.gpus,
                                                           baked.max_num_seqs)
        for f in ("throughput_tok_s", "power_w", "energy_per_token_j", "median_itl_ms"):
            assert getattr(baked, f) == pytest.approx(getattr(got, f), rel=2e-4), f
        assert got.power_w == pytest.approx(got.throughput_tok_s * got.energy_per_token_j,
                                            rel=1e-3)


def test_acmetrace_quantiles_and_hardware_factor(con):
    path = shared("acmetrace/acme_power_util_cdf.csv")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    q = powersim.acme_power_quantiles(store.reference_cdfs(con))
    assert q == pytest.approx(np.asarray(powersim.ACME_KALOS_POWER_W), abs=0.051)
    assert powersim.HW_FACTOR_A100_TO_H100 == 1.75
