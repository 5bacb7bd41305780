"""The envelope atlas (issue 17 item 5): every (dataset, bin, alpha, method) cell once, refused
cells kept with their reason, the same numbers as ``headroom envelope``, a rerun read from the
store, a strict CLI document and the Coverage page's section.

One real grid: the Azure 2023 conversation trace (one hour) at 10 s bins, the only bin the
envelope pages offer for it; 30 s is asked too (117 bins: refused) and alpha 0.01 (53
calibration bins, 200 needed: refused before any fit), so the module fits two envelopes in all
(the atlas's alpha 0.1 cell and ``headroom envelope``'s, which also fills the envelope cache the
page test reads).
"""

from __future__ import annotations

import shutil

import pytest
from harness import new_app, seed, strict_loads

from analytics.cli import main
from analytics.envelope.atlas import COLUMNS
from analytics.envelope.registry import INTERVAL_METHODS
from analytics.services import atlas, open_store

CONV = "AzureLLMInferenceTrace_conv"
ALPHAS = (0.01, 0.1)
BINS = (10, 30)


def _cli(capsys, db, *argv) -> dict:
    assert main(["--db", str(db), *argv]) == 0
    return strict_loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def atlas_store(tmp_path_factory):
    """A store holding the conv trace, its atlas cells (serial run, kept in sweep_runs) and the
    ``headroom envelope`` document of the alpha 0.1 cell (kept in the envelope cache)."""
    db = tmp_path_factory.mktemp("atlas") / "atlas.duckdb"
    seed(db, f"azure_llm/{CONV}.csv")
    with open_store(db) as con:
        inputs = atlas.atlas_inputs(con, (CONV,), BINS)
    doc = atlas.run_atlas(inputs, ALPHAS, store_path=db, backend="serial")
    return {"db": db, "inputs": inputs, "doc": doc}


def test_every_cell_present_once(atlas_store):
    rows = atlas_store["doc"]["rows"]
    keys = [(r["dataset"], r["bin_s"], r["alpha"], r["method"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(BINS) * len(ALPHAS) * len(INTERVAL_METHODS)
    assert set(keys) == {(CONV, b, a, m) for b in BINS for a in ALPHAS for m in INTERVAL_METHODS}
    assert all(list(r) == list(COLUMNS) for r in rows)
    run = atlas_store["doc"]["sweep_run"]
    assert (run["tasks"], run["computed"], run["cached"]) == (2, 2, 0)  # 10 s x 2 alphas


def test_refused_cells_carry_their_reason(atlas_store):
    rows = atlas_store["doc"]["rows"]
    coarse = [r for r in rows if r["bin_s"] == 30]
    assert all(r["coverage"] is None and r["mean_width"] is None and r["n_test"] is None
               for r in coarse)
    assert all("117 bins" in r["reason"] and "fewer than the 150" in r["reason"]
               for r in coarse)
    strict = [r for r in rows if r["bin_s"] == 10 and r["alpha"] == 0.01]
    assert all(r["coverage"] is None and "calibration bins" in r["reason"]
               and "needs at least 200" in r["reason"] for r in strict)
    assert all(r["target_coverage"] == 0.99 for r in strict)
    measured = [r for r in rows if r["bin_s"] == 10 and r["alpha"] == 0.1]
    assert all(r["reason"] is None and 0 <= r["coverage"] <= 1 and r["n_test"] == 56
               for r in measured)
    gaps = {r["method"]: r["coverage_gap_pp"] for r in measured}
    cov = {r["method"]: r["coverage"] for r in measured}
    assert all(abs(gaps[m] - 100 * (cov[m] - 0.9)) < 1e-5 for m in gaps)


def test_cell_equals_headroom_envelope(atlas_store, capsys):
    env = _cli(capsys, atlas_store["db"], "envelope", CONV, "--bin", "10s", "--alpha", "0.1")
    measured = {r["method"]: r for r in atlas_store["doc"]["rows"]
                if r["bin_s"] == 10 and r["alpha"] == 0.1}
    assert set(measured) == set(env["intervals"])
    for m, r in measured.items():
        assert r["coverage"] == env["intervals"][m]["coverage"]
        assert r["mean_width"] == env["intervals"][m]["mean_width"]
        assert r["wape"] == env["point"]["hgb"]["wape"]
        assert r["n_test"] == env["split"]["test"]["bins"]


def test_rerun_reads_the_store_and_cli_is_strict(atlas_store, capsys):
    again = atlas.run_atlas(atlas_store["inputs"], ALPHAS, store_path=atlas_store["db"],
                            backend="serial")
    assert (again["sweep_run"]["computed"], again["sweep_run"]["cached"]) == (0, 2)
    assert again["sweep_run"]["backend"] == "store"
    assert again["rows"] == atlas_store["doc"]["rows"]
    doc = _cli(capsys, atlas_store["db"], "envelope-atlas", "--datasets", CONV,
               "--bins", "10s,30s", "--alphas", "0.1,0.01")
    assert set(doc) == {"rows", "hits", "alphas", "synthetic", "sweep_run"}
    assert doc["rows"] == atlas_store["doc"]["rows"] and doc["alphas"] == [0.01, 0.1]
    assert doc["sweep_run"]["computed"] == 0 and doc["sweep_run"]["cached"] == 2
    assert doc["hits"]["split"]["cells"] == 1 and doc["hits"]["split"]["refused"] == 3


def test_cli_refuses_bad_alphas_and_unknown_datasets(atlas_store, capsys):
    with pytest.raises(SystemExit):
        main(["--db", str(atlas_store["db"]), "envelope-atlas", "--alphas", "0,1.5"])
    assert "strictly between 0 and 1" in strict_loads(capsys.readouterr().out)["error"]
    assert main(["--db", str(atlas_store["db"]), "envelope-atlas", "--datasets", "nope"]) == 2
    assert "nope" in strict_loads(capsys.readouterr().out)["error"]


def test_coverage_page_atlas_section(atlas_store, app_env):
    """The page's atlas reads the module's stored cells (nothing computed) and draws the
    heatmap and the table; the envelope above it is a hit in the copied envelope cache."""
    shutil.copy(atlas_store["db"], app_env["db"])
    cache_dir = atlas_store["db"].parent / "atlas-cache"
    if cache_dir.exists():
        shutil.copytree(cache_dir, app_env["db"].parent / "app-cache", dirs_exist_ok=True)
    at = new_app()
    at.session_state["atlas_on"] = True
    at.session_state["atlas_alphas"] = list(ALPHAS)
    at.run()
    at.switch_page("pages/coverage.py").run()
    assert not at.exception and not at.error
    tables = [d.value for d in at.dataframe]
    rows = next(t for t in tables if "coverage_gap_pp" in t.columns)
    assert len(rows) == len(ALPHAS) * len(INTERVAL_METHODS)  # the 10 s bin the page offers
    assert rows["reason"].notna().sum() == len(INTERVAL_METHODS)  # alpha 0.01: refused
    assert any("Coverage gap (coverage minus target" in c.proto.spec
               for c in at.get("plotly_chart"))
    assert any("2 cells: all read from the store" in c.value for c in at.caption)
