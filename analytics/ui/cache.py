"""Streamlit caching around the store and the analyses (the only analytics module importing
streamlit). Pages call these and nothing else that touches data.

Every cached read takes the store's ``data_version`` (and the store path) as arguments, so an
ingest or delete invalidates what depends on the data without any ``.clear()``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st

from analytics import store, telemetry
from analytics.config import ParseOptions, Settings, Weights
from analytics.decisions import capacity, dispatch
from analytics.decisions.sites import pue
from analytics.envelope import grid
from analytics.envelope import pipeline as envelope
from analytics.ingest import files as ingest
from analytics.ingest import sources
from analytics.ingest.formats import FormatError
from analytics.ingest.formats._common import file_stem

DEMAND_KINDS = ("requests", "demand_series")


def settings() -> Settings:
    return Settings.from_env()


@st.cache_resource(show_spinner=False)
def _connection(db_path: str):
    return store.connect(db_path)


def connection():
    """The process-wide store connection (functions open a cursor per call)."""
    return _connection(str(settings().db_path))


def data_version() -> int:
    return store.data_version(connection())


@st.cache_data(show_spinner=False)
def _datasets(db_path: str, version: int) -> pd.DataFrame:
    return store.list_datasets(connection())


def datasets() -> pd.DataFrame:
    """The dataset ledger (cached on the data version)."""
    return _datasets(str(settings().db_path), data_version())


def dataset_names(kinds: tuple[str, ...] | None = None) -> list[str]:
    df = datasets()
    if kinds:
        df = df[df["kind"].isin(kinds)]
    return df["name"].tolist()


def dataset_info(name: str) -> dict | None:
    df = datasets()
    row = df[df["name"] == name]
    return None if row.empty else row.iloc[0].to_dict()


@st.cache_data(show_spinner="Building the demand grid ...")
def _grid(db_path: str, version: int, name: str, bin_s: int, w_prompt: float,
          w_completion: float, include_failed: bool, target: str) -> pd.DataFrame:
    return grid.demand_grid(
        connection(), name, bin_s,
        Weights(w_prompt, w_completion, include_failed=include_failed, target=target),
    )


def demand_grid(name: str, bin_s: int, w_prompt: float = 1.0, w_completion: float = 1.0,
                include_failed: bool = True, target: str = "weighted_tokens") -> pd.DataFrame:
    """Complete demand grid (see :func:`analytics.envelope.grid.demand_grid`). Raises GridError."""
    return _grid(str(settings().db_path), data_version(), name, bin_s, w_prompt, w_completion,
                 include_failed, target)


TARGET_LABELS = {"weighted_tokens": "weighted tokens", "gpu_seconds": "GPU-seconds"}


@st.cache_data(show_spinner=False)
def _targets(db_path: str, version: int, name: str) -> list[str]:
    info = store.dataset(connection(), name)
    if info["kind"] != "requests":
        return ["weighted_tokens"]
    has = store.request_fields(connection(), int(info["dataset_id"]))
    return [t for t, ok in (("weighted_tokens", has["tokens"]), ("gpu_seconds", has["gpu_s"]))
            if ok]


def targets(name: str) -> list[str]:
    """Demand targets the dataset supports, the default first (tokens, then GPU-seconds)."""
    return _targets(str(settings().db_path), data_version(), name)


def grid_summary(g: pd.DataFrame) -> dict:
    return grid.grid_summary(g)


@st.cache_data(show_spinner="Preparing the download ...")
def _export(db_path: str, version: int, name: str, fmt: str) -> bytes:
    df = store.dataset_rows(connection(), name)
    if fmt == "parquet":
        return df.to_parquet(index=False)
    return df.to_csv(index=False).encode()


def export_table(name: str, fmt: str) -> bytes:
    """All rows of a dataset as CSV or Parquet bytes."""
    return _export(str(settings().db_path), data_version(), name, fmt)


def ingest_uploads(files, opts: ParseOptions) -> list[dict]:
    """Ingest browser uploads, one transaction per file; never raises for bad input.

    Each upload is streamed to a temporary file (no second in-memory copy), parsed and written.
    Returns one dict per file with ``status`` ``ingested`` / ``duplicate`` / ``rejected`` and, for
    rejections, ``error`` (file, line, column, reason).
    """
    results = []
    cap = settings().max_upload_mb * 1_000_000
    for up in files:
        suffix = "".join(Path(up.name).suffixes[-2:])
        with tempfile.NamedTemporaryFile(suffix=suffix) as tmp:
            up.seek(0)
            shutil.copyfileobj(up, tmp, 1 << 20)
            tmp.flush()
            try:
                res = ingest.ingest_files(
                    connection(), [ingest.FileIn(Path(tmp.name), up.name)], opts=opts,
                    max_bytes=cap,
                )
                results.extend(res)
            except FormatError as exc:
                results.append({"file": up.name, "status": "rejected", "error": str(exc),
                                "dataset": None, "rows": 0, "format": None})
            except (store.NameTaken, store.StoreError) as exc:
                results.append({"file": up.name, "status": "rejected", "error": str(exc),
                                "dataset": file_stem(up.name), "rows": 0, "format": None})
    return results


def delete_dataset(name: str) -> None:
    store.delete_dataset(connection(), name)


def registry() -> list[dict]:
    return [{"name": s.name, "file": s.filename, "licence": s.licence, "citation": s.citation,
             "checksum": "sha256 pinned" if s.sha256 else "hashed on download",
             "url": s.url} for s in sources.REGISTRY.values()]


def pull_and_ingest(name: str, on_progress: Callable[[int, int | None], None]) -> list[dict]:
    """Download a registry file into the data dir and ingest it. Raises PullError/FormatError."""
    got = sources.pull(name, settings().data_dir, progress=False, on_progress=on_progress)
    path = Path(got["path"])
    return ingest.ingest_files(connection(), [ingest.FileIn(path, path.name)])


def recognised_files() -> list[str]:
    return [str(p) for p in ingest.recognised_files(settings().data_dir)]


def bootstrap(on_file: Callable[[int, int, str], None]) -> list[dict]:
    """First run: ingest every recognised file in the data dir."""
    return ingest.bootstrap(connection(), settings().data_dir, on_file=on_file)


def add_synthetic_demo() -> list[dict]:
    return ingest.ingest_synthetic(connection())


@st.cache_data(show_spinner=False, max_entries=24)
def _envelope(db_path: str, version: int, name: str, bin_s: int, w_prompt: float,
              w_completion: float, include_failed: bool, target: str,
              params: envelope.EnvelopeParams) -> envelope.EnvelopeResult:
    g = _grid(db_path, version, name, bin_s, w_prompt, w_completion, include_failed, target)
    return envelope.run_envelope(g, bin_s, params)


def demand_envelope(name: str, bin_s: int, params: envelope.EnvelopeParams,
                    w_prompt: float = 1.0, w_completion: float = 1.0,
                    include_failed: bool = True, target: str = "weighted_tokens"
                    ) -> envelope.EnvelopeResult:
    """Forecasts, intervals and coverage of a dataset's grid (cached on data version and every
    parameter). Raises ValueError (e.g. too short for a split) and GridError."""
    return _envelope(str(settings().db_path), data_version(), name, bin_s, w_prompt,
                     w_completion, include_failed, target, params)


def envelope_params(**kwargs) -> envelope.EnvelopeParams:
    return envelope.EnvelopeParams(**kwargs)


_SHARED = {"alpha": 0.1, "horizon": 1, "base_model": "hgb", "split": "auto"}


def envelope_controls(prefix: str) -> envelope.EnvelopeParams:
    """Envelope parameter widgets, shared by the Demand and Coverage pages.

    The chosen values live in ``st.session_state["envelope_<name>"]`` so both pages show the
    same run; ``prefix`` keeps the widget keys of each page distinct.
    """
    vals = {k: st.session_state.get(f"envelope_{k}", v) for k, v in _SHARED.items()}
    c1, c2, c3, c4 = st.columns(4)
    alpha = c1.select_slider("alpha (miscoverage)", [0.05, 0.1, 0.2, 0.3], value=vals["alpha"],
                             key=f"{prefix}_alpha", help="intervals aim at 1 - alpha coverage")
    horizon = c2.number_input("horizon (bins ahead)", 1, 288, int(vals["horizon"]),
                              key=f"{prefix}_horizon")
    models = list(envelope.forecast.LEARNED)
    base = c3.selectbox("point model under the intervals", models,
                        index=models.index(vals["base_model"]), key=f"{prefix}_base")
    splits = ["auto", "42/9/10 days", "0.69/0.15/0.16", "0.6/0.2/0.2"]
    split = c4.selectbox("split (fit/calibration/test)", splits,
                         index=splits.index(vals["split"]), key=f"{prefix}_split",
                         help="auto = the paper's 42/9/10 days when the series has 61 days, "
                              "else fractions 0.69/0.15/0.16")
    for k, v in {"alpha": alpha, "horizon": horizon, "base_model": base, "split": split}.items():
        st.session_state[f"envelope_{k}"] = v
    days = (42, 9, 10) if split == "42/9/10 days" else None
    frac = tuple(float(x) for x in split.split("/")) if split[0] == "0" else None
    return envelope.EnvelopeParams(alpha=float(alpha), horizon=int(horizon), base_model=base,
                                   split_days=days, split_frac=frac)


@st.cache_data(show_spinner=False, max_entries=8)
def _cold_start(db_path: str, version: int, source: str, target: str, bin_s: int,
                k_hours: tuple[int, ...], alpha: float) -> pd.DataFrame:
    grids = [_grid(db_path, version, n, bin_s, 1.0, 1.0, True, _targets(db_path, version, n)[0])
             for n in (source, target)]
    return envelope.cold_start(*grids, bin_s, k_hours, envelope.EnvelopeParams(alpha=alpha))


def cold_start(source: str, target: str, bin_s: int, k_hours: tuple[int, ...], alpha: float
               ) -> pd.DataFrame:
    """Cross-trace cold-start coverage table (see :func:`analytics.envelope.pipeline.cold_start`)."""
    return _cold_start(str(settings().db_path), data_version(), source, target, bin_s,
                       k_hours, alpha)


@st.cache_data(show_spinner=False, max_entries=24)
def _plan(db_path: str, version: int, name: str, bin_s: int, target: str,
          params: envelope.EnvelopeParams, kinds: tuple, target_violation: float, delta: float,
          objective: str, available: tuple, utilisation: float, scale: float,
          gco2_per_kwh: float | None) -> capacity.CapacityPlan:
    env = _envelope(db_path, version, name, bin_s, 1.0, 1.0, True, target, params)
    return capacity.plan(env, bin_s, list(kinds), target, target_violation, delta, objective,
                         dict(available) or None, utilisation, gco2_per_kwh, scale)


def capacity_plan(name: str, bin_s: int, params: envelope.EnvelopeParams, kinds: list,
                  target_violation: float = 0.05, delta: float = 0.1, objective: str = "cost",
                  available: dict | None = None, utilisation: float = 0.8, scale: float = 1.0,
                  gco2_per_kwh: float | None = None) -> capacity.CapacityPlan:
    """Overbooking + GPU-hours + GPU mix for a dataset (cached on data version and inputs).
    Raises ValueError (short series, uncoverable demand) and GridError."""
    target = targets(name)[0]
    return _plan(str(settings().db_path), data_version(), name, bin_s, target, params,
                 tuple(kinds), target_violation, delta, objective,
                 tuple(sorted((available or {}).items())), utilisation, scale, gco2_per_kwh)


def site_catalog() -> pd.DataFrame:
    """Sites with carbon / weather / price series in the store."""
    return _site_catalog(str(settings().db_path), data_version())


@st.cache_data(show_spinner=False)
def _site_catalog(db_path: str, version: int) -> pd.DataFrame:
    return store.site_catalog(connection())


@st.cache_data(show_spinner=False, max_entries=24)
def _dispatch(db_path: str, version: int, name: str, bin_s: int, target: str,
              params: envelope.EnvelopeParams, sites: tuple, kind, scale: float,
              utilisation: float, offset_days: int, basis: str | None, home: str | None,
              max_share: float, method: str):
    env = _envelope(db_path, version, name, bin_s, 1.0, 1.0, True, target, params)
    return dispatch.plan_dispatch(connection(), env, list(sites), kind, target, scale,
                                  utilisation, method, offset_days, basis, home,
                                  max_share={s: max_share for s in sites})


def dispatch_plan(name: str, bin_s: int, params: envelope.EnvelopeParams, sites: list[str],
                  kind, scale: float = 1.0, utilisation: float = 0.8, offset_days: int = 0,
                  basis: str | None = None, home: str | None = None, max_share: float = 1.0,
                  method: str = "rolling"):
    """Carbon-aware dispatch of a dataset's envelope (cached). Raises ValueError / KeyError."""
    return _dispatch(str(settings().db_path), data_version(), name, bin_s, targets(name)[0],
                     params, tuple(sites), kind, scale, utilisation, offset_days, basis, home,
                     max_share, method)


def pue_curve(t_min: float = -10.0, t_max: float = 45.0):
    """Temperatures and the PUE the dispatch model gives them (for the page's reference chart)."""
    import numpy as np

    t = np.linspace(t_min, t_max, 56)
    return t, pue(t)


@st.cache_data(ttl=60, show_spinner=False)
def nvml_status() -> dict:
    """Whether NVML works on this host, and why not (cached for a minute)."""
    return telemetry.status()


def sample_live(seconds: float = 1.0, interval_ms: int = 250) -> pd.DataFrame:
    """A short NVML sample for the live chart (not stored). Raises TelemetryUnavailable."""
    return telemetry.sample(seconds, interval_ms)


@st.cache_data(show_spinner=False)
def _telemetry_rows(db_path: str, version: int, name: str) -> pd.DataFrame:
    return store.dataset_rows(connection(), name)


def telemetry_rows(name: str) -> pd.DataFrame:
    return _telemetry_rows(str(settings().db_path), data_version(), name)


@st.cache_data(show_spinner=False)
def _references(db_path: str, version: int) -> pd.DataFrame:
    return store.reference_cdfs(connection())


def reference_cdfs() -> pd.DataFrame:
    """Reference distributions (AcmeTrace) in the store, for overlays."""
    return _references(str(settings().db_path), data_version())


def serving_window(name: str) -> tuple:
    """A first guess at the serving window of a telemetry dataset (busy samples)."""
    return telemetry.detect_serving_window(telemetry_rows(name))


def window_averages(name: str, start, end, freshness: dict) -> pd.DataFrame:
    """Whole-job vs serving-window means (see :func:`analytics.telemetry.window_averages`)."""
    return telemetry.window_averages(telemetry_rows(name), start, end, freshness)


DEFAULT_FRESHNESS_S = telemetry.DEFAULT_FRESHNESS_S


def chosen_dataset() -> tuple[str, dict]:
    """The sidebar's demand dataset and its ledger row; on none, say so and stop the page.

    A synthetic dataset gets its warning here, so every page that uses this labels it.
    """
    name = st.session_state.get("dataset")
    info = dataset_info(name) if name else None
    if info is None:
        st.info("No demand dataset yet. Add one on the Data page (upload, pull, or the "
                "synthetic demo).")
        st.stop()
    if info["synthetic"]:
        st.warning("SYNTHETIC demo data: generated, not measured traffic.")
    return name, info


def intraday_bin(info: dict, key: str, what: str) -> str:
    """Bin selector limited to intra-day bins the dataset supports; stops the page if none."""
    from analytics.config import BIN_CHOICES_S, bin_choices

    span_s = (info["ts_max"] - info["ts_min"]).total_seconds()
    choices = [c for c in bin_choices(float(info["resolution_s"] or 0), span_s,
                                      info["kind"] != "requests") if BIN_CHOICES_S[c] < 86400]
    if not choices:
        st.info(f"{info['name']} is binned by day; {what} need intra-day bins.")
        st.stop()
    return st.selectbox("Bin", choices, key=key,
                        index=choices.index("5min") if "5min" in choices else 0)


def window_from_vllm_result(data: bytes) -> tuple:
    """Serving window from an uploaded ``vllm bench serve`` result JSON. Raises ValueError."""
    import json

    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError("not a vllm bench serve result (expected a JSON object)")
    return telemetry.window_from_vllm_result(doc)


# --------------------------------------------------------------------------- launch advisor
@st.cache_resource(show_spinner=False, max_entries=2)
def _advisor(db_path: str, version: int):
    from analytics import advisor

    return advisor.load(connection())


def advisor_model():
    """The fitted launch advisor for the current data (fit once per data version).
    Raises ValueError when the store holds too few benchmark rows."""
    return _advisor(str(settings().db_path), data_version())


@st.cache_data(show_spinner=False)
def _bench_catalog(db_path: str, version: int) -> pd.DataFrame:
    b = store.bench_runs(connection())
    if b.empty:
        return pd.DataFrame(columns=["model", "params_b", "active_params_b", "tasks", "rows"])
    return (b.groupby("model", as_index=False)
            .agg(params_b=("params_b", "first"), active_params_b=("active_params_b", "first"),
                 tasks=("task", lambda t: ", ".join(sorted(set(t.dropna())))),
                 rows=("source", "size")))


def bench_catalog() -> pd.DataFrame:
    """Benchmarked models (parameters, tasks, rows) for the request form."""
    return _bench_catalog(str(settings().db_path), data_version())


@st.cache_data(show_spinner=False)
def _advise(db_path: str, version: int, request, prices: tuple, value_per_token: float,
            usd_per_kwh: float, runtime_h: float, restart_h: float, kv_slope: float):
    from analytics.advisor import decide

    u = decide.UtilityParams(value_per_token_usd=value_per_token, usd_per_kwh=usd_per_kwh,
                             runtime_h=runtime_h, restart_h=restart_h, kv_slope=kv_slope,
                             prices_usd_per_gpu_h=dict(prices))
    adv = advisor_model()
    return decide.advise(adv.cost, request, u, adv.ctx)


def advise(request, prices: dict, value_per_token: float = 2e-7, usd_per_kwh: float = 0.08,
           runtime_h: float = 1.0, restart_h: float = 0.5, kv_slope: float = 2.0):
    """Scored arms for a request (see :func:`analytics.advisor.decide.advise`)."""
    return _advise(str(settings().db_path), data_version(), request,
                   tuple(sorted(prices.items())), value_per_token, usd_per_kwh, runtime_h,
                   restart_h, kv_slope)


@st.cache_data(show_spinner=False)
def _advisor_backtest(db_path: str, version: int, value_per_token: float) -> dict:
    from analytics.advisor import decide

    adv = advisor_model()
    return decide.backtest(adv.cost, decide.UtilityParams(value_per_token_usd=value_per_token),
                           adv.ctx)


def advisor_backtest(value_per_token: float = 2e-7) -> dict:
    """Leakage-free backtest (top-1, regret) of the advisor and the five baselines."""
    return _advisor_backtest(str(settings().db_path), data_version(), value_per_token)


def default_prices() -> dict:
    from analytics.advisor import decide

    return decide.default_prices()


def hardware_specs() -> pd.DataFrame:
    """The accelerator spec table with its sources (for display)."""
    from analytics.hardware import catalog as hardware

    return pd.DataFrame([{"hardware": s.key, "vendor": s.vendor, "memory_gb": s.memory_gb,
                          "mem_bw_gbs": s.mem_bw_gbs, "bf16_tflops_dense": s.bf16_tflops,
                          "fp8_tflops_dense": s.fp8_tflops, "tdp_w": s.tdp_w,
                          "source": "; ".join(v for _, v in s.sources)}
                         for s in hardware.SPECS.values()])


def model_versions() -> pd.DataFrame:
    """Advisor model versions (provenance), newest first; not cached (a record adds one)."""
    from analytics.advisor import gate

    return gate.versions(connection())


def record_model_version() -> dict:
    """Gate the current fitted model against the incumbent and record it."""
    from analytics.advisor import gate

    return gate.record(connection(), advisor_model().cost)


def advisor_request(**kwargs):
    """A :class:`analytics.advisor.decide.Request` (pages may not import the advisor)."""
    from analytics.advisor import decide

    return decide.Request(**kwargs)


# --------------------------------------------------------------------------- serving (Festina)
@st.cache_data(show_spinner=False)
def _serving_inputs(db_path: str, version: int) -> dict:
    from analytics.serving import profiles as serving_profiles

    ledger = store.list_datasets(connection())
    traces = []
    for _, row in ledger[ledger["kind"] == "requests"].iterrows():
        has = store.request_fields(connection(), int(row["dataset_id"]))
        if has["tokens"] and has["completion_tokens"]:
            traces.append(row["name"])
    bench = store.bench_runs(connection())
    gpus, why = [], ""
    try:
        gpus = serving_profiles.available_gpus(bench)
        if gpus:
            serving_profiles.prefill_reference(bench, gpus[0])
    except ValueError as exc:
        gpus, why = [], str(exc)
    synthetic = dict(zip(ledger["name"], ledger["synthetic"], strict=True))
    return {"traces": traces, "gpus": gpus, "why": why,
            "synthetic": {t: bool(synthetic[t]) for t in traces}}


def serving_inputs() -> dict:
    """Request traces with token counts, GPU kinds with usable bench profiles, and why not."""
    return _serving_inputs(str(settings().db_path), data_version())


@st.cache_data(show_spinner=False)
def _serving_profiles(db_path: str, version: int, gpu: str, measured: bytes | None):
    from analytics.serving import profiles as serving_profiles

    profs = serving_profiles.profiles_from_bench(store.bench_runs(connection()), gpu)
    if measured:
        profs = serving_profiles.apply_measured(
            profs, serving_profiles.parse_measured_profiles(measured, "uploaded profile"))
    return profs


@st.cache_data(show_spinner=False, max_entries=16)
def _serving_run(db_path: str, version: int, trace: str, params, measured: bytes | None):
    from analytics.serving import engine as serving

    profs = _serving_profiles(db_path, version, params.gpu, measured)
    tr = serving.trace_arrays(store.dataset_rows(connection(), trace), params.window_s)
    comp = serving.simulate(tr, profs, params, ("max_clock", "static_dvfs", "stage1", "stage2",
                                                "stage3", "stage4", "festina"))
    table = comp.table()
    ts = pd.concat([serving.timeseries(r, tr).assign(policy=k)
                    for k, r in comp.results.items()], ignore_index=True)
    cdfs = {}
    for metric in ("ttft_ms", "tbt_ms"):
        cdf = serving.latency_cdf(comp.results["festina"], metric)
        cdf["model"] = [f"m{j:02d} {comp.slots[j].model.split('/')[-1]}" for j in cdf["model"]]
        cdfs[metric] = cdf
    return {"table": table, "timeseries": ts, "cdf": cdfs["ttft_ms"], "cdf_tbt": cdfs["tbt_ms"],
            "notes": comp.notes,
            "json": serving.to_json(comp),
            "profiles": sorted({(p.model, p.rows) for p in comp.slots})}


def serving_params(**kwargs):
    """A :class:`analytics.serving.engine.ServingParams` (pages may not import analytics.serving.engine)."""
    from analytics.serving import engine as serving

    return serving.ServingParams(**kwargs)


def serving_run(trace: str, params, measured: bytes | None = None) -> dict:
    """All serving policies on a stored trace (cached on data version, parameters and the
    uploaded profile bytes). Raises ValueError (e.g. an invalid profile CSV, no profiles)."""
    return _serving_run(str(settings().db_path), data_version(), trace, params, measured)


@st.cache_data(show_spinner=False, max_entries=8)
def _serving_sensitivity(db_path: str, version: int, trace: str, params,
                         measured: bytes | None) -> pd.DataFrame:
    from analytics.serving import engine as serving

    profs = _serving_profiles(db_path, version, params.gpu, measured)
    tr = serving.trace_arrays(store.dataset_rows(connection(), trace), params.window_s)
    return serving.sensitivity(tr, profs, params)


def serving_sensitivity(trace: str, params, measured: bytes | None = None) -> pd.DataFrame:
    """Festina vs max-clock over gamma x static power (:func:`analytics.serving.engine.sensitivity`),
    cached on the data version, parameters and uploaded profile bytes."""
    return _serving_sensitivity(str(settings().db_path), data_version(), trace, params, measured)


@st.cache_data(show_spinner=False)
def _serving_curves(db_path: str, version: int, gpu: str, gamma: float | None, batch: int,
                    measured: bytes | None, static_scale: float) -> pd.DataFrame:
    from analytics.serving import engine as serving

    return serving.profile_curves(_serving_profiles(db_path, version, gpu, measured), gpu,
                                  batch=batch, gamma=gamma, static_scale=static_scale)


def serving_curves(gpu: str, gamma: float | None = None, batch: int = 32,
                   measured: bytes | None = None, static_scale: float = 1.0) -> pd.DataFrame:
    """Energy per token vs clock per profile and phase (the profile viewer); ``gamma`` None
    uses the calibrated exponent."""
    return _serving_curves(str(settings().db_path), data_version(), gpu, gamma, batch, measured,
                           static_scale)


def serving_dvfs_sources(gpu: str) -> list[tuple[str, str]]:
    """Citations of the clock range and static power of a GPU kind."""
    from analytics.serving import profiles as serving_profiles

    g = serving_profiles.GPU_DVFS[gpu]
    return [("clock range", f"{g.f_min_mhz:.0f}-{g.f_max_mhz:.0f} MHz"),
            ("static power", f"{g.idle_w:g} W"), *g.sources]


# --- Power: hybrid batch + inference co-simulation (analytics.power.sim) --------------------------

POWER_SHARES = tuple(round(x / 10, 1) for x in range(11))


def power_datasets() -> tuple[list[str], list[str]]:
    """Job datasets (most rows first), and demand datasets at 1-minute resolution or finer
    (inference inputs, longest span first), from the cached ledger."""
    from analytics.power import sim as powersim

    return powersim.candidate_datasets(datasets())


def power_default_inference() -> str | None:
    """The demand dataset spanning the longest time (the default inference input)."""
    demand = power_datasets()[1]
    return demand[0] if demand else None


def power_no_jobs_hint() -> str:
    from analytics.power import sim as powersim

    return powersim.NO_JOBS_HINT


@st.cache_data(show_spinner="Fitting the batch arrival model ...", max_entries=8)
def _power_inputs(db_path: str, version: int, jobs_name: str, inference_name: str, seed: int):
    import numpy as np

    from analytics.power import sim as powersim

    return powersim.load_inputs(connection(), jobs_name, inference_name,
                                np.random.default_rng(seed))


def power_scenario_of(**kwargs):
    """A :class:`analytics.power.sim.Scenario` (pages may not import analytics.power.sim).
    Raises ValueError for out-of-range settings."""
    from analytics.power import sim as powersim

    return powersim.Scenario(**kwargs)


@st.cache_data(show_spinner="Simulating the scenario ...", max_entries=32)
def _power_run(db_path: str, version: int, jobs_name: str, inference_name: str, scenario,
               seed: int) -> dict:
    import numpy as np

    from analytics.power import sim as powersim

    inputs = _power_inputs(db_path, version, jobs_name, inference_name, seed)
    res = powersim.run_scenario(inputs, scenario, np.random.default_rng(seed))
    return {"frame": res.frame, "metrics": res.metrics,
            "daily": powersim.daily_profile(res.frame),
            "inputs": powersim.describe_inputs(inputs, scenario),
            "synthetic": inputs.synthetic}


def power_run(jobs_name: str, inference_name: str, scenario, seed: int = 0) -> dict:
    """One scenario: ``frame`` (per minute), ``metrics``, ``daily`` profile, ``inputs``
    (provenance) and ``synthetic`` (cached on the data version and every setting).
    Raises ValueError (no / too few GPU jobs) and GridError."""
    return _power_run(str(settings().db_path), data_version(), jobs_name, inference_name,
                      scenario, seed)


@st.cache_data(show_spinner=False, max_entries=8)
def _power_sweep(db_path: str, version: int, jobs_name: str, inference_name: str, base,
                 utilizations: tuple, replications: int, seed: int) -> tuple:
    import numpy as np

    from analytics.power import sim as powersim

    inputs = _power_inputs(db_path, version, jobs_name, inference_name, seed)
    table = powersim.sweep(inputs, base, np.random.default_rng(seed), POWER_SHARES,
                           utilizations, replications)
    return table, powersim.shape_report(table)


def power_sweep(jobs_name: str, inference_name: str, base, utilizations: tuple,
                replications: int = 2, seed: int = 0) -> tuple:
    """Inference-share sweep (0, 0.1, ..., 1) at each utilisation: (table, shape report).
    The base scenario's share is ignored, so moving the share slider reuses the cached sweep."""
    from dataclasses import replace

    base = replace(base, inference_share=0.5, utilization=0.5)
    return _power_sweep(str(settings().db_path), data_version(), jobs_name, inference_name, base,
                        tuple(sorted(utilizations)), replications, seed)
