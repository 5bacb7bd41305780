"""Energy-aware serving what-ifs on shared GPUs (Festina paper).

Modules (each says what it owns): :mod:`~analytics.serving.params` (what-if knobs, policy
registry), :mod:`~analytics.serving.workload` (trace -> requests, Zipf model assignment),
:mod:`~analytics.serving.profiles` (bench rows / measured CSV -> profiles),
:mod:`~analytics.serving.dvfs` (GPU clock catalog, DVFS latency / power model, gamma calibration,
Eq. 9), :mod:`~analytics.serving.lookup` (offline lookup table), :mod:`~analytics.serving.state`
(replica and GPU state), :mod:`~analytics.serving.engine` (event loop, energy accounting),
:mod:`~analytics.serving.local_scheduler` (continuous batching, clock and SM shares),
:mod:`~analytics.serving.placement` (dispatch, scale-out, warm start),
:mod:`~analytics.serving.consolidation` (EWR consolidation),
:mod:`~analytics.serving.prediction` (output-length predictors the schedulers read),
:mod:`~analytics.serving.compare`
(policy comparison, static DVFS, sensitivity) and :mod:`~analytics.serving.views` (time series,
CDFs, curves, JSON).

The names below are the package's public API: import them from ``analytics.serving``.
"""

from analytics.serving.compare import (
    Comparison,
    prediction_sweep,
    resolve_gamma,
    sensitivity,
    simulate,
)
from analytics.serving.dvfs import (
    DECODE_SAVING_CITE,
    DECODE_SAVING_TARGET,
    GPU_DVFS,
    ClockGrid,
    DvfsParams,
    GpuDvfs,
    calibrate_gamma,
    calibration_profiles,
    decode_itl_s,
    decode_saving,
    dynamic_power_w,
    energy_curve,
    phase_clock,
    phase_clock_weighted,
    prefill_time_s,
)
from analytics.serving.engine import ServingEngine, SimResult
from analytics.serving.lookup import LookupTable, build_lookup
from analytics.serving.params import (
    POLICIES,
    POLICY_REGISTRY,
    STAGE_LABELS,
    STAGES,
    STATIC_ROUNDS,
    Policy,
    ServingParams,
    check_params,
    get_policy,
    register_policy,
)
from analytics.serving.placement import rank_candidates
from analytics.serving.prediction import (
    ERROR_LEVELS,
    PREDICTORS,
    fit_quantiles,
    oracle_lengths,
    predict_lengths,
)
from analytics.serving.profiles import (
    MEASURED_COLUMNS,
    Profile,
    ProfileError,
    apply_measured,
    available_gpus,
    parse_measured_profiles,
    prefill_reference,
    profiles_from_bench,
)
from analytics.serving.views import latency_cdf, profile_curves, timeseries, to_json
from analytics.serving.workload import assign_models, model_slots, trace_arrays

__all__ = [
    "DECODE_SAVING_CITE", "DECODE_SAVING_TARGET", "ERROR_LEVELS", "GPU_DVFS", "MEASURED_COLUMNS", "POLICIES",
    "POLICY_REGISTRY", "PREDICTORS", "STAGES", "STAGE_LABELS", "STATIC_ROUNDS", "ClockGrid", "Comparison",
    "DvfsParams", "GpuDvfs", "LookupTable", "Policy", "Profile", "ProfileError", "ServingEngine",
    "ServingParams", "SimResult", "apply_measured", "assign_models", "available_gpus",
    "build_lookup", "calibrate_gamma", "calibration_profiles", "check_params", "decode_itl_s",
    "decode_saving", "dynamic_power_w", "energy_curve", "fit_quantiles", "get_policy",
    "latency_cdf", "oracle_lengths", "predict_lengths", "prediction_sweep",
    "model_slots", "parse_measured_profiles", "phase_clock", "phase_clock_weighted",
    "prefill_reference", "prefill_time_s", "profile_curves", "profiles_from_bench",
    "rank_candidates", "register_policy", "resolve_gamma", "sensitivity", "simulate",
    "timeseries", "to_json", "trace_arrays",
]
