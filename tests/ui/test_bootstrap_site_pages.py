"""Issue 19 items 1 and 2 on the pages: the first-run report counts files skipped by design apart
from rejections, and the Dispatch page offers both codes of a SustainDC carbon file published
twice (CISO and CA) with the same numbers for either."""

from __future__ import annotations

import shutil

from conftest import shared
from harness import metrics, new_app, table_with

CI = "sustaindc_dcrl/CarbonIntensity"
FILES = ("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv", f"{CI}/CA_NG_&_avgCI.csv",
         f"{CI}/CISO_NG_&_avgCI.csv", f"{CI}/ERCO_NG_&_avgCI.csv",
         "ml_energy/leaderboard_v3/models/Qwen__Qwen3-8B__gpqa.json",
         "ml_energy/leaderboard_v3/models/zai-org__CogVideoX-2b__text-to-video.json")


def test_first_run_counts_skipped_and_dispatch_offers_both_codes(app_env):
    for rel in FILES:
        shutil.copy(shared(rel), app_env["raw"])
    at = new_app().run()
    assert not at.exception
    assert ("4 ingested, 1 duplicate, 1 skipped by design, 0 rejected"
            in at.markdown[0].value)
    files = table_with(at, "why").set_index("file")
    assert files.loc["zai-org__CogVideoX-2b__text-to-video.json", "status"] == "skipped"
    assert files.loc["zai-org__CogVideoX-2b__text-to-video.json", "why"].startswith(
        "all 32 configurations are diffusion runs")
    assert files.loc["CISO_NG_&_avgCI.csv", "status"] == "duplicate"
    assert "site 'CISO' names its series (site 'CA') too" in files.loc["CISO_NG_&_avgCI.csv",
                                                                         "why"]

    at.session_state["envelope_bin"] = "1h"  # a small fit: the week at hourly bins
    at.switch_page("pages/dispatch.py").run()
    assert not at.exception and at.title[0].value == "Dispatch"
    box = at.multiselect(key="sites")
    assert box.options == ["CA", "CISO (= CA)", "ERCO"]
    assert box.value == ["CISO", "ERCO"]  # the README's codes, offered after a first run
    at.slider(key="max_share").set_value(0.6).run()  # two sites carry every hour
    assert not at.exception and not at.error
    with_ciso = metrics(at)
    assert float(with_ciso["tCO2e, carbon-aware"]) < float(with_ciso["tCO2e, capacity-proportional"])
    assert any("CISO: carbon basis avg (the series stored as CA)" in c.value for c in at.caption)
    at.multiselect(key="sites").set_value(["CA", "ERCO"]).run()
    assert not at.exception
    assert metrics(at) == with_ciso


def test_upload_of_a_diffusion_only_file_says_skipped_by_design(app_env):
    diffusion = shared("ml_energy/leaderboard_v3/models/tencent__HunyuanVideo__text-to-video.json")
    at = new_app().run()
    at.switch_page("pages/data.py").run()
    at.file_uploader(key="uploads").set_value([
        (diffusion.name, diffusion.read_bytes(), "application/json"),
        ("CA_NG_&_avgCI.csv", shared(f"{CI}/CA_NG_&_avgCI.csv").read_bytes(), "text/csv"),
        ("CISO_NG_&_avgCI.csv", shared(f"{CI}/CISO_NG_&_avgCI.csv").read_bytes(), "text/csv")])
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception and not at.error
    assert ("1 ingested, 1 duplicate, 1 skipped by design, 0 rejected"
            in at.markdown[0].value)
    infos = [i.value.replace("\\", "") for i in at.info]
    assert any("tencent__HunyuanVideo__text-to-video.json: skipped by design, nothing added: "
               "all 68 configurations are diffusion runs" in i for i in infos)
    assert any("site CISO now names the same series" in i for i in infos)
