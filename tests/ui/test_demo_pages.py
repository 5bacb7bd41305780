"""Issue 31 item 9: the synthetic demo answers on every result page, and every chart drawn from
it says SYNTHETIC (title and watermark), so a screenshot can never pass it off as measured."""

from __future__ import annotations

import json

from harness import new_app

from analytics.ui.charts import SYNTHETIC_LABEL

#: result page -> the chart it draws before any button (its cheap first answer)
RESULT_PAGES = ("demand", "coverage", "capacity", "dispatch", "placement", "power", "serving",
                "telemetry")
#: charts that draw a model, no dataset (Dispatch's PUE curve)
MODEL_CURVES = ("PUE vs outside temperature",)


def test_demo_answers_on_every_result_page_and_labels_every_chart(app_env):
    at = new_app().run()
    at.button(key="demo").click().run()
    assert not at.exception
    for page in RESULT_PAGES:
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, page
        assert not at.error, (page, [e.value for e in at.error])
        figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
        assert figures, f"{page}: no chart on the demo"
        for fig in figures:
            layout = fig.get("layout", {})
            title = (layout.get("title") or {}).get("text", "")
            if title.startswith(MODEL_CURVES):
                assert SYNTHETIC_LABEL not in title  # draws no dataset: not labelled
                continue
            notes = [a.get("text") for a in layout.get("annotations", [])]
            assert SYNTHETIC_LABEL in title and title.count("SYNTHETIC") == 1, (page, title)
            assert notes.count(SYNTHETIC_LABEL) == 1, (page, title)  # one watermark, not two
        # the page says in words which synthetic input it draws on
        assert any("SYNTHETIC" in w.value for w in at.warning), page
    # the Data page says which of its two uploaders takes which file
    at.switch_page("pages/data.py").run()
    guide = next(c.value for c in at.caption if "Larger ones" in c.value)
    assert "the uploader below" in guide and "Large files (streamed to disk)" in guide
