"""Main flow in real headless Chromium: open the app, upload a real trace, see it listed and
charted. Screenshots go to ``tests/artifacts/``.

Needs Debian's ``/usr/bin/chromium`` (``CHROMIUM`` overrides). Missing browser: a failure in CI
(``CI`` set), a skip elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, shared

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = REPO / "tests" / "artifacts"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync"]


def _need_browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"browser tests are required in CI but {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} not installed")
    return pytest.importorskip("playwright.sync_api")


@contextlib.contextmanager
def _page(height: int = 1000):
    """A headless Chromium page (60-120 s timeouts: the app fits models on a 2-core machine)."""
    sync_api = _need_browser()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": height})
        page.set_default_timeout(120_000)
        try:
            yield sync_api, page
        finally:
            browser.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def app_url(tmp_path, request):
    port = _free_port()
    raw = tmp_path / "raw"
    raw.mkdir()
    for rel in getattr(request, "param", ()):  # files the store holds before the app starts
        from analytics import store
        from analytics.ingest import files as ingest

        con = store.connect(tmp_path / "e2e.duckdb")
        path = shared(rel)
        ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
        con.close()
    env = {**os.environ, "HEADROOM_DB": str(tmp_path / "e2e.duckdb"),
           "HEADROOM_DATA_DIR": str(raw)}
    log = open(tmp_path / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"),
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            break
        except OSError as exc:
            if proc.poll() is not None:
                raise RuntimeError(open(tmp_path / "streamlit.log").read()) from exc
            time.sleep(0.5)
    else:
        proc.terminate()
        raise RuntimeError("streamlit did not start within 60 s")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_upload_real_trace_see_table_and_chart(app_url):
    conv = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    with _page() as (sync_api, page):
        page.goto(app_url)
        page.get_by_text("No data yet").wait_for()

        page.locator('input[type="file"]').set_input_files(str(conv))
        ingest_button = page.get_by_role("button", name="Ingest uploaded files")
        sync_api.expect(ingest_button).to_be_enabled(timeout=60_000)
        ingest_button.click()
        page.get_by_text("19,366 rows").wait_for()
        table = page.locator('[data-testid="stDataFrame"]')
        table.wait_for()
        page.wait_for_timeout(1000)
        assert "AzureLLMInferenceTrace_conv" in (table.text_content() or "")
        page.screenshot(path=str(ARTIFACTS / "data_page.png"), full_page=True)

        page.get_by_role("link", name="Demand", exact=True).click()
        chart = page.locator('[data-testid="stPlotlyChart"] .main-svg').first
        chart.wait_for()
        page.get_by_text("AzureLLMInferenceTrace_conv - demand per 5min").wait_for()
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ARTIFACTS / "demand_page.png"), full_page=True)
    assert (ARTIFACTS / "demand_page.png").stat().st_size > 10_000


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


@pytest.mark.parametrize("app_url", [("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv",)],
                         indirect=True)
def test_changing_alpha_changes_band_and_coverage(app_url):
    with _page(1400) as (_, page):
        page.goto(app_url)
        # st.navigation's own links (capitalised titles) replace the pages/-folder default once
        # app.py has run; wait for them as a user would before clicking
        page.get_by_role("link", name="Demand", exact=True).click()
        page.get_by_text("ACI 90% band").first.wait_for()
        cov_90, width_90 = _metric(page, "ACI coverage"), _metric(page, "mean width")
        slider = page.get_by_role("slider").first
        slider.focus()
        slider.press("ArrowRight")  # alpha 0.1 -> 0.2
        page.get_by_text("ACI 80% band").first.wait_for()
        page.wait_for_timeout(1500)
        cov_80, width_80 = _metric(page, "ACI coverage"), _metric(page, "mean width")
        page.screenshot(path=str(ARTIFACTS / "demand_alpha_0.2.png"), full_page=True)
    assert float(cov_80.rstrip("%")) < float(cov_90.rstrip("%"))
    assert float(width_80.replace(",", "")) < float(width_90.replace(",", ""))


@pytest.mark.parametrize("app_url", [("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv",)],
                         indirect=True)
def test_target_violation_slider_changes_factor_and_violations(app_url):
    with _page(1400) as (sync_api, page):
        page.goto(app_url)
        page.get_by_role("link", name="Capacity", exact=True).click()
        page.get_by_text("overbooking factor").first.wait_for()
        factor_before = _metric(page, "overbooking factor")
        viol_before = _metric(page, "test violations")
        slider = page.get_by_role("slider", name="target SLO violation rate")
        slider.focus()
        slider.press("End")  # 5 % -> 30 %
        sync_api.expect(page.locator('[data-testid="stMetric"]', has_text="test violations")
                        .locator('[data-testid="stMetricDelta"]')).to_contain_text("30%")
        page.wait_for_timeout(1000)
        factor_after = _metric(page, "overbooking factor")
        viol_after = _metric(page, "test violations")
        page.screenshot(path=str(ARTIFACTS / "capacity_target_30.png"), full_page=True)
    assert float(factor_after) < float(factor_before)
    assert int(viol_after.split("/")[0]) > int(viol_before.split("/")[0])
