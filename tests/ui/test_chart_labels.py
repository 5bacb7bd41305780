"""Issue 31 item 8: human units and readable ticks on the charts a planner reads."""

from __future__ import annotations

import pandas as pd

from analytics.ui import charts


def test_gpu_mix_of_a_one_hour_trace_is_a_marker_on_an_hour_axis():
    mix = pd.DataFrame({"hour": pd.to_datetime(["2023-11-16 18:00"]), "H100-80GB": [3],
                        "capacity": [2.5], "cost_usd": [10.0], "power_kw": [2.1],
                        "kgco2": [0.8]})
    fig = charts.mix_chart(mix)
    assert fig.layout.xaxis.title.text == "hour (UTC)" and fig.layout.xaxis.dtick == 3_600_000
    assert {t.mode for t in fig.data} == {"markers"}  # one period: no invisible one-point line


def test_telemetry_axis_names_the_unit():
    rows = pd.DataFrame({"ts": pd.to_datetime(["2024-05-10 12:00", "2024-05-10 12:01"]),
                         "host": ["n", "n"], "gpu_id": [0, 0], "gpu_uuid": [None, None],
                         "power_w": [300.0, 310.0]})
    fig = charts.telemetry_chart(rows, "power_w")
    assert fig.layout.yaxis.title.text == "power (W)" and fig.layout.title.text == "power (W)"
