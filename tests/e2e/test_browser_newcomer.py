"""Issue 19, done-when: a newcomer's afternoon in real headless Chromium.

First run on a data folder of staged files (the ML.ENERGY v3 per-model files, diffusion runs
among them, and two SustainDC carbon files) shows one summary line and ingests the LLM files;
the README's one-hour Azure trace, uploaded, gives an envelope on Demand, Coverage, Capacity and
Dispatch without touching a widget; a Capacity scenario's link reopens it in a fresh browser
context; the page's HTML report downloads and opens offline with its charts drawn. Screenshots
of each page go to ``tests/artifacts/`` (``docs/screenshots/`` is refreshed from them).
"""

from __future__ import annotations

import hashlib

import pytest
from conftest import share_cache
from harness import (
    ARTIFACTS,
    SHARED_DATA,
    browser_page,
    read_metric,
    shared,
    streamlit_server,
    wait_settled,
)

pytestmark = pytest.mark.browser

V3_MODELS = "ml_energy/leaderboard_v3/models"
CARBON = [f"sustaindc_dcrl/CarbonIntensity/{ba}_NG_&_avgCI.csv" for ba in ("CISO", "ERCO")]


@pytest.fixture
def first_run_url(tmp_path, model_cache):
    """A server on an empty store whose data folder holds links to the staged v3 model files
    and two carbon files (what a newcomer who copied them into ``data/raw`` would have)."""
    raw = tmp_path / "raw"
    (raw / "models").mkdir(parents=True)
    models = shared(V3_MODELS)
    for f in sorted(models.glob("*.json")):
        (raw / "models" / f.name).symlink_to(f)
    for rel in CARBON:
        (raw / shared(rel).name).symlink_to(shared(rel))
    share_cache(tmp_path / "new.duckdb", model_cache)  # envelopes fitted by earlier tests
    with streamlit_server(tmp_path / "new.duckdb", raw, tmp_path / "streamlit.log") as url:
        yield url


def _envelope_page(page, link: str, ready_text: str, shot: str) -> None:
    page.get_by_role("link", name=link, exact=True).click()
    page.get_by_text(ready_text).first.wait_for()
    wait_settled(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    # Plotly's renderer is a lazily loaded chunk: its element may mount after the run settled
    page.locator('[data-testid="stPlotlyChart"]').first.wait_for()
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)


def test_newcomer_first_run_upload_envelopes_share_link_and_report(first_run_url, tmp_path):
    n_llm = sum(1 for f in (SHARED_DATA / V3_MODELS).glob("*.json")
                if "text-to-" not in f.name)
    n_diffusion = sum(1 for f in (SHARED_DATA / V3_MODELS).glob("*.json")) - n_llm
    conv = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    with browser_page(1400) as (sync_api, page):
        page.goto(first_run_url)
        summary = f"Ingest: {n_llm + len(CARBON)} ingested, 0 duplicate, {n_diffusion} " \
                  "skipped by design, 0 rejected"
        page.get_by_text(summary).wait_for()  # one line, the per-file details folded
        wait_settled(page)
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        page.screenshot(path=str(ARTIFACTS / "first_run.png"), full_page=True)

        page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(conv))
        ingest_button = page.get_by_role("button", name="Ingest uploaded files")
        sync_api.expect(ingest_button).to_be_enabled()
        ingest_button.click()
        page.get_by_text("19,366 rows").wait_for()
        wait_settled(page)

        _envelope_page(page, "Demand", "Forecast and demand envelope", "newcomer_demand.png")
        assert "%" in read_metric(page, "coverage")
        _envelope_page(page, "Coverage", "Shift alarm", "newcomer_coverage.png")
        _envelope_page(page, "Dispatch", "tCO2e, carbon-aware", "newcomer_dispatch.png")
        _envelope_page(page, "Capacity", "overbooking factor", "newcomer_capacity.png")

        slider = page.get_by_role("slider", name="target SLO violation rate")
        slider.focus()
        slider.press("End")  # 5 % -> 30 %: a scenario of the user's own
        page.wait_for_url("**target_violation=0.3*")
        wait_settled(page)
        link = page.url
        factor = read_metric(page, "overbooking factor")
        violations = read_metric(page, "test violations")

        with page.expect_download() as download:
            page.get_by_role("button", name="HTML report").click()
        report = tmp_path / "capacity_report.html"
        download.value.save_as(report)

        fresh = page.context.browser.new_context(viewport={"width": 1400, "height": 1400})
        other = fresh.new_page()
        other.goto(link)  # a colleague opens the shared link
        other.get_by_text("overbooking factor").first.wait_for()
        wait_settled(other)
        assert read_metric(other, "overbooking factor") == factor
        assert read_metric(other, "test violations") == violations
        fresh.close()

        page.goto(report.as_uri())  # the report alone, no server, no network
        page.locator(".js-plotly-plot .main-svg").first.wait_for()
        assert page.locator(".js-plotly-plot").count() >= 3
        assert "AzureLLMInferenceTrace_conv" in page.content()
        assert "target_violation_rate" in page.content()
        assert hashlib.sha256(conv.read_bytes()).hexdigest() in page.content()  # data version
        page.screenshot(path=str(ARTIFACTS / "capacity_report.png"), full_page=False)
