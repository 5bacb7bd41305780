"""DataFrame -> Plotly figure. No data access here: callers pass frames in.

Long series (from 5,000 points) use ``Scattergl``, shorter ones SVG (``base.line``). A
synthetic dataset is labelled on the figure itself (title and a
watermark) so a screenshot can never pass it off as measured traffic. One module per domain
(demand, decisions, telemetry, advisor, serving, power); this package re-exports every chart so
pages call ``charts.<name>``.
"""

from analytics.ui.charts.advisor import (
    advisor_arms_chart,
    backtest_chart,
    calibration_chart,
    launch_priors_chart,
    support_chart,
    value_sensitivity_chart,
    voi_regret_chart,
)
from analytics.ui.charts.base import (
    SYNTHETIC_LABEL,
    label_synthetic,
)
from analytics.ui.charts.decisions import (
    capacity_chart,
    carbon_lines_chart,
    carbon_profile_chart,
    dispatch_share_chart,
    mix_chart,
    overbooking_chart,
    policy_bars,
    pue_chart,
)
from analytics.ui.charts.demand import (
    METHOD_LABELS,
    PART_COLORS,
    alarm_chart,
    atlas_chart,
    cold_start_chart,
    coverage_chart,
    demand_chart,
    envelope_chart,
    hourly_coverage_chart,
    rolling_coverage_chart,
    split_chart,
)
from analytics.ui.charts.fleet import BOARD_AXES, hourly_replicas_chart, pareto_chart, replicas_chart
from analytics.ui.charts.live import live_chart
from analytics.ui.charts.power import (
    jobs_daily_chart,
    power_daily_chart,
    power_psd_chart,
    power_sweep_chart,
    power_timeseries_chart,
)
from analytics.ui.charts.serving import (
    serving_cdf_chart,
    serving_energy_chart,
    serving_prediction_chart,
    serving_profile_chart,
    serving_sensitivity_chart,
    serving_timeseries_chart,
)
from analytics.ui.charts.telemetry import (
    METRIC_LABELS,
    power_cdf_chart,
    telemetry_chart,
)

__all__ = [
    "BOARD_AXES",
    "METHOD_LABELS",
    "PART_COLORS",
    "SYNTHETIC_LABEL",
    "advisor_arms_chart",
    "alarm_chart",
    "atlas_chart",
    "backtest_chart",
    "calibration_chart",
    "capacity_chart",
    "carbon_lines_chart",
    "carbon_profile_chart",
    "cold_start_chart",
    "coverage_chart",
    "demand_chart",
    "dispatch_share_chart",
    "envelope_chart",
    "hourly_coverage_chart",
    "hourly_replicas_chart",
    "jobs_daily_chart",
    "label_synthetic",
    "launch_priors_chart",
    "mix_chart",
    "overbooking_chart",
    "pareto_chart",
    "policy_bars",
    "power_cdf_chart",
    "power_daily_chart",
    "power_psd_chart",
    "power_sweep_chart",
    "power_timeseries_chart",
    "pue_chart",
    "replicas_chart",
    "rolling_coverage_chart",
    "split_chart",
    "serving_cdf_chart",
    "serving_energy_chart",
    "serving_prediction_chart",
    "serving_profile_chart",
    "serving_sensitivity_chart",
    "serving_timeseries_chart",
    "live_chart",
    "support_chart",
    "telemetry_chart", "METRIC_LABELS",
    "value_sensitivity_chart",
    "voi_regret_chart",
]
