"""The ``headroom`` command: every analysis, one JSON document on stdout.

Exit codes: 0 success, 2 bad input (the message names file, line and column where there is one),
1 internal error. Progress goes to stderr. See ``DESIGN.md`` for the contract of each command.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path

from analytics import store, telemetry
from analytics.config import DEFAULT_T0, GPU_CATALOG, ParseOptions, Settings, Weights, parse_bin
from analytics.decisions import capacity, dispatch, mix
from analytics.envelope import grid
from analytics.envelope import pipeline as envelope
from analytics.ingest import files as ingest
from analytics.ingest import sources
from analytics.ingest.formats import FormatError, format_names


class BadInput(Exception):
    """Turns into exit code 2 with the message on stderr and an error document on stdout."""


def _hours(text: str) -> tuple[int, ...]:
    try:
        hours = tuple(int(x) for x in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: give whole hours, e.g. 6,12,24") from exc
    if min(hours) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: hours must be >= 1")
    return hours


def _positive(text: str) -> float:
    v = float(text)
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return v


def _nonneg(text: str) -> float:
    v = float(text)
    if not (v >= 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return v


def _margin(text: str) -> float:
    v = float(text)
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 1): a fraction of the SLO")
    return v


def _unit_interval(text: str) -> float:
    v = float(text)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return v


def _open_unit(text: str) -> float:
    v = float(text)
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be strictly between 0 and 1")
    return v


def _t0(text: str) -> datetime:
    try:
        t = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--t0 {text!r} is not ISO 8601") from exc
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="headroom", description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=None,
                    help="DuckDB store (default $HEADROOM_DB or data/headroom.duckdb)")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="parse files and add them as datasets (one transaction)")
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--format", choices=format_names(), default=None,
                   help="force a format instead of detecting it")
    p.add_argument("--name", default=None, help="dataset name (one file only; default: file stem)")
    p.add_argument("--t0", type=_t0, default=DEFAULT_T0,
                   help="UTC start of relative timestamps (BurstGPT, Mooncake); default "
                        f"{DEFAULT_T0.isoformat()} - weekdays are then relative")
    p.add_argument("--site", default=None, help="site for carbon/weather/price files")
    p.add_argument("--year", type=int, default=2022, help="year given to TMY weather records")

    sub.add_parser("datasets", help="list datasets")

    p = sub.add_parser("delete", help="remove a dataset")
    p.add_argument("dataset")

    p = sub.add_parser("pull", help="download an official public dataset")
    p.add_argument("name", nargs="?", help=f"one of: {', '.join(sources.REGISTRY)}")
    p.add_argument("--dest", type=Path, default=None, help="folder (default: the data dir)")
    p.add_argument("--url", default=None, help="download from this address instead (mirror)")
    p.add_argument("--list", action="store_true", help="list the registry instead")

    p = sub.add_parser("grid", help="complete demand grid summary of a dataset")
    _grid_args(p)
    p.add_argument("--rows", action="store_true", help="include every bin in the output")

    p = sub.add_parser("envelope", help="point forecasts, conformal intervals and their coverage")
    _grid_args(p)
    p.add_argument("--alpha", type=_open_unit, default=0.1,
                   help="miscoverage (0.1 = 90%% intervals)")
    p.add_argument("--horizon", type=int, default=1, help="bins ahead")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--split-days", type=_triple(int), default=None,
                   help="fit,calibration,test days (default 42,9,10 when the series is long "
                        "enough, else --split-frac)")
    g.add_argument("--split-frac", type=_triple(float), default=None,
                   help="fit,calibration,test fractions (default .69,.15,.16)")
    p.add_argument("--base-model", default="hgb", choices=["ridge", "hgb", "extra_trees",
                                                           "lightgbm"],
                   help="point model the residual-based intervals wrap")
    p.add_argument("--aci-gamma", type=_nonneg, default=0.005,
                   help="ACI step size (Gibbs & Candes 2021 use 0.005)")
    p.add_argument("--seed", type=int, default=0, help="seed of the learned models and bootstrap")

    p = sub.add_parser("capacity", help="calibrated overbooking, GPU-hours and GPU mix")
    _grid_args(p)
    p.add_argument("--alpha", type=_open_unit, default=0.1, help="envelope miscoverage")
    p.add_argument("--target-violation", type=_open_unit, default=0.05,
                   help="tolerated share of bins whose demand exceeds capacity")
    p.add_argument("--delta", type=_open_unit, default=0.1,
                   help="Learn-then-Test failure probability of the certificate")
    p.add_argument("--objective", choices=list(mix.OBJECTIVES[:2]), default="cost",
                   help="GPU mix objective: cost or power (carbon: use the Capacity page or "
                        "dispatch)")
    p.add_argument("--scale", type=_positive, default=1.0,
                   help="traffic multiplier (scenario): a public trace is one tenant's sample")
    p.add_argument("--utilisation", type=_unit_interval, default=0.8,
                   help="GPU utilisation for power: idle + (TDP - idle) x utilisation")
    p.add_argument("--available", default="",
                   help="GPU availability, e.g. H100-80GB=64,A100-40GB=128")

    p = sub.add_parser("dispatch", help="carbon-aware dispatch of the envelope across sites")
    _grid_args(p)
    p.add_argument("--sites", required=True, help="comma-separated carbon sites, e.g. "
                                                  "CISO,ERCO,BPAT,PJM,NYIS")
    p.add_argument("--home", default=None, help="baseline home site (default: the first)")
    p.add_argument("--gpu", default="H100-80GB", help="GPU kind whose energy per unit is used")
    p.add_argument("--scale", type=_positive, default=1.0,
                   help="traffic multiplier (scenario): a public trace is one tenant's sample")
    p.add_argument("--utilisation", type=_unit_interval, default=0.8,
                   help="GPU utilisation for power: idle + (TDP - idle) x utilisation")
    p.add_argument("--max-share", type=_unit_interval, default=1.0,
                   help="most share of an hour per site")
    p.add_argument("--offset-days", type=int, default=0,
                   help="shift when aligning site-data years to the trace by day-of-year")
    p.add_argument("--basis", default=None, help="carbon basis: avg, LCA or direct")
    p.add_argument("--method", default="rolling",
                   choices=["direct_quantile", "split", "cqr", "rolling", "aci", "regime"],
                   help="envelope whose upper bound is served")
    p.add_argument("--alpha", type=_open_unit, default=0.1, help="envelope miscoverage")
    p.add_argument("--carbon", default=None, help=argparse.SUPPRESS)

    p = sub.add_parser("telemetry", help="GPU telemetry: sample NVML now")
    tsub = p.add_subparsers(dest="telemetry_command", required=True)
    t = tsub.add_parser("sample", help="poll every GPU through NVML and store the rows")
    t.add_argument("--seconds", type=float, default=10.0)
    t.add_argument("--interval-ms", type=int, default=500)
    t.add_argument("--name", default=None, help="dataset name (default nvml_<host>_<start>)")
    t.add_argument("--no-store", action="store_true", help="only print the summary")

    p = sub.add_parser("coldstart", help="fit on one trace, calibrate on the first k hours of "
                                         "another, report coverage on the rest")
    p.add_argument("source")
    p.add_argument("target")
    p.add_argument("--bin", default="5min", help="bin width: 1min, 5min, 15min, 1h, 300s")
    p.add_argument("--k-hours", type=_hours, default=(6, 12, 24, 48),
                   help="calibration lengths in hours, e.g. 6,12,24")
    p.add_argument("--alpha", type=_open_unit, default=0.1, help="interval miscoverage")

    p = sub.add_parser("advise", help="launch advisor: rank GPU kind x TP x precision arms for a "
                                      "model (OmniPilot)")
    p.add_argument("--model", required=True, help="model name")
    p.add_argument("--params-b", type=_positive, required=True, help="parameters, billions")
    p.add_argument("--active-params-b", type=_positive, default=None,
                   help="active parameters per token (MoE), billions")
    p.add_argument("--concurrency", type=_positive, required=True,
                   help="concurrent sequences")
    p.add_argument("--in-len", type=_positive, required=True, help="input tokens per request")
    p.add_argument("--out-len", type=_positive, required=True, help="output tokens per request")
    p.add_argument("--task", default="lm-arena-chat",
                   help="workload family of the benchmark catalog (lm-arena-chat, gpqa, "
                        "sourcegraph-fim, argonne-offline, ...)")
    p.add_argument("--ttft-slo-ms", type=_positive, default=None)
    p.add_argument("--itl-slo-ms", type=_positive, default=None)
    p.add_argument("--value-per-token", type=_positive, default=2e-7,
                   help="USD per served output token (paper default 2e-7)")
    p.add_argument("--price", action="append", default=[], metavar="HW=USD_PER_GPU_H",
                   help="price per GPU-hour for a hardware key, e.g. B200=14.24 (repeatable)")
    p.add_argument("--top", type=int, default=0, help="print only the best N ranked arms "
                                                     "(plus abstaining / infeasible counts)")
    p = sub.add_parser("advisor-backtest", help="leakage-free backtest of the launch advisor "
                                                "vs five baselines, and interval coverage")
    p.add_argument("--value-per-token", type=_positive, default=2e-7)
    p.add_argument("--no-record", action="store_true",
                   help="do not record the fitted model in model_versions")
    _serve_energy_args(sub)
    from analytics.cli import power as powersim_cli  # hybrid power profiles: `headroom powersim`

    powersim_cli.add_parser(sub)
    return ap


def _serve_energy_args(sub) -> None:
    """``headroom serve-energy TRACE``: Festina energy-aware serving what-ifs."""
    p = sub.add_parser("serve-energy", help="energy-aware shared-GPU serving what-ifs (Festina): "
                                            "max-clock, static DVFS, Festina and its ablation")
    p.add_argument("trace", help="request dataset in the store (e.g. AzureLLMInferenceTrace_conv)")
    p.add_argument("--policy", default="all",
                   help="all, or one of max_clock, static_dvfs, festina, stage1..stage4")
    p.add_argument("--models", type=int, default=16, help="co-hosted models")
    p.add_argument("--gpus", type=int, default=8, help="GPUs in the pool")
    p.add_argument("--gpu-kind", default="H100-80GB", help="H100-80GB or A100-40GB")
    p.add_argument("--safety-margin", type=_margin, default=0.05,
                   help="SLO slack kept by the controllers (Festina: 5%%)")
    p.add_argument("--ttft-slo-ms", type=_positive, default=1000.0)
    p.add_argument("--tbt-slo-ms", type=_positive, default=100.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--window-s", type=_positive, default=None,
                   help="simulate only the first seconds of the trace")
    p.add_argument("--zipf", type=_nonneg, default=1.0, help="Zipf exponent of model popularity")
    p.add_argument("--gamma", type=_positive, default=None,
                   help="dynamic power exponent (default: calibrated to the measured decode "
                        "saving of SM clock locking)")
    p.add_argument("--chunked-prefill", type=int, default=0, metavar="TOKENS",
                   help="chunked prefill with this token budget per iteration (vLLM "
                        "max_num_batched_tokens); 0 = off, a prefill pauses decode")
    p.add_argument("--static-scale", type=_positive, default=1.0,
                   help="multiply the cited static (idle) power of the GPU kind")
    p.add_argument("--sensitivity", action="store_true",
                   help="also sweep gamma (calibrated, 1.5, 2, 3) x static power (x0.5, 1, 1.5) "
                        "for max-clock vs Festina")
    p.add_argument("--bench", nargs="+", default=None, metavar="DATASET",
                   help="bench datasets to build profiles from (default: all bench_runs)")
    p.add_argument("--profile", default=None, metavar="CSV",
                   help="measured profile CSV (model,gpu,phase,sm_share,clock_mhz,latency_ms,"
                        "power_w) replacing the DVFS model")


def _grid_args(p) -> None:
    p.add_argument("dataset")
    p.add_argument("--bin", default="5min", help="bin width: 1min, 5min, 15min, 1h, 1d, 300s")
    p.add_argument("--w-prompt", type=_nonneg, default=1.0,
                   help="weight of a prompt token in the target (weighted tokens per bin)")
    p.add_argument("--w-completion", type=_nonneg, default=1.0,
                   help="weight of a completion token in the target")
    p.add_argument("--exclude-failed", action="store_true",
                   help="leave failed requests (BurstGPT Response tokens = 0) out of the target")
    p.add_argument("--target", choices=["weighted_tokens", "gpu_seconds"],
                   default="weighted_tokens",
                   help="demand per bin: weighted tokens, or GPU-seconds for traces that report "
                        "execution time (Alibaba GenAI LoRA)")


def _triple(kind):
    def parse(text: str):
        parts = [kind(x) for x in text.split(",")]
        if len(parts) != 3:
            raise argparse.ArgumentTypeError(f"{text!r}: give three comma-separated values")
        return tuple(parts)
    return parse


def _cmd_ingest(args, settings) -> list[dict]:
    if args.name and len(args.paths) > 1:
        raise BadInput("--name names one dataset; give one file with it")
    for path in args.paths:
        if not path.is_file():
            raise BadInput(f"{path}: no such file")
    files = [ingest.FileIn(p, str(p), args.name) for p in args.paths]
    opts = ParseOptions(t0=args.t0, site=args.site, year=args.year)
    con = store.connect(settings.db_path)
    try:
        print(f"parsing {len(files)} file(s)", file=sys.stderr)
        items = ingest.parse_all(files, args.format, opts)
        results = store.ingest(con, items)
    finally:
        con.close()
    for r in results:
        r["file"] = str(r["file"])
    return results


def _cmd_datasets(args, settings) -> list[dict]:
    con = store.connect(settings.db_path)
    try:
        df = store.list_datasets(con)
    finally:
        con.close()
    return [
        {"name": r.name, "kind": r.kind, "format": r.format, "rows": int(r.rows),
         "ts_min": _iso(r.ts_min), "ts_max": _iso(r.ts_max), "synthetic": bool(r.synthetic)}
        for r in df.itertuples()
    ]


def _iso(ts) -> str | None:
    return None if ts is None or str(ts) in ("NaT", "None") else ts.isoformat()


def _cmd_delete(args, settings) -> dict:
    con = store.connect(settings.db_path)
    try:
        store.delete_dataset(con, args.dataset)
    finally:
        con.close()
    return {"deleted": args.dataset}


def _cmd_pull(args, settings):
    if args.list or not args.name:
        return [{"name": s.name, "url": s.url, "licence": s.licence, "citation": s.citation,
                 "sha256": s.sha256} for s in sources.REGISTRY.values()]
    dest = args.dest or settings.data_dir
    return sources.pull(args.name, dest, args.url)


def _load_grid(args, settings):
    con = store.connect(settings.db_path)
    try:
        weights = Weights(args.w_prompt, args.w_completion,
                          include_failed=not args.exclude_failed, target=args.target)
        return grid.demand_grid(con, args.dataset, parse_bin(args.bin), weights)
    finally:
        con.close()


def _cmd_grid(args, settings) -> dict:
    g = _load_grid(args, settings)
    out = grid.grid_summary(g)
    out["bin_s"] = parse_bin(args.bin)
    out["target"] = ("GPU-seconds per bin" if args.target == "gpu_seconds" else
                     "weighted tokens per bin (w_prompt*prompt + w_completion*completion)")
    if args.rows:
        rows = g.copy()
        rows["ts"] = rows["ts"].map(lambda t: t.isoformat())
        out["rows"] = json.loads(rows.to_json(orient="records"))
    return out


def _cmd_envelope(args, settings) -> dict:
    g = _load_grid(args, settings)
    params = envelope.EnvelopeParams(
        alpha=args.alpha, horizon=args.horizon, split_days=args.split_days,
        split_frac=args.split_frac, base_model=args.base_model, aci_gamma=args.aci_gamma,
        seed=args.seed,
    )
    print(f"fitting on {len(g)} bins", file=sys.stderr)
    out = envelope.to_json(envelope.run_envelope(g, parse_bin(args.bin), params))
    return {"dataset": args.dataset, "bin_s": parse_bin(args.bin), **out}


def _decision_envelope(args, settings):
    """Envelope run under the capacity and dispatch commands: the dataset's own target unless
    ``--target gpu_seconds`` was asked for. Returns (envelope result, bin_s)."""
    con = store.connect(settings.db_path)
    try:
        if args.target == "weighted_tokens":
            args.target = _default_target(con, args.dataset)
    finally:
        con.close()
    bin_s = parse_bin(args.bin)
    g = _load_grid(args, settings)
    return envelope.run_envelope(g, bin_s, envelope.EnvelopeParams(alpha=args.alpha, n_boot=200)), \
        bin_s


def _cmd_capacity(args, settings) -> dict:
    env, bin_s = _decision_envelope(args, settings)
    available = {}
    known = {k.name for k in GPU_CATALOG}
    for item in filter(None, args.available.split(",")):
        name, _, count = item.partition("=")
        if name.strip() not in known:
            raise BadInput(f"--available: unknown GPU kind {name.strip()!r}; known: "
                           f"{sorted(known)}")
        try:
            available[name.strip()] = int(count)
        except ValueError as exc:
            raise BadInput(f"--available {item!r}: the count must be a whole number") from exc
    p = capacity.plan(env, bin_s, list(GPU_CATALOG), args.target, args.target_violation,
                      args.delta, args.objective, available or None, args.utilisation,
                      scale=args.scale)
    return {"dataset": args.dataset, **capacity.to_json(p)}


def _cmd_dispatch(args, settings) -> dict:
    env, _ = _decision_envelope(args, settings)
    target = args.target
    kinds = {k.name: k for k in GPU_CATALOG}
    if args.gpu not in kinds:
        raise BadInput(f"--gpu {args.gpu!r}: known kinds {list(kinds)}")
    names = [s.strip() for s in args.sites.split(",") if s.strip()]
    con = store.connect(settings.db_path)
    try:
        d, notes = dispatch.plan_dispatch(
            con, env, names, kinds[args.gpu], target, args.scale, args.utilisation,
            args.method, args.offset_days, args.basis, args.home,
            max_share={n: args.max_share for n in names})
    finally:
        con.close()
    out = dispatch.to_json(d)
    out["notes"] = notes + out["notes"]
    return {"dataset": args.dataset, "gpu": args.gpu, "scale": args.scale, **out}


def _cmd_telemetry(args, settings) -> dict:
    import socket
    from datetime import UTC, datetime

    from analytics.ingest.formats._common import Parsed

    host = socket.gethostname()
    name = args.name or f"nvml_{host}_{datetime.now(UTC):%Y%m%dT%H%M%S}"
    con = None if args.no_store else store.connect(settings.db_path)
    state = {"created": False}

    def on_batch(frame):
        if con is None:
            return
        import polars as pl

        pf = pl.from_pandas(frame)
        if not state["created"]:
            parsed = Parsed("telemetry", "nvml", pf, f"NVML sampler on {host}", 1e-3,
                            ("sampled live through NVML",))
            store.ingest(con, [store.IngestItem(parsed, name, f"nvml:{name}")])
            state["created"] = True
        else:
            store.append_rows(con, name, pf)

    try:
        print(f"sampling for {args.seconds} s every {args.interval_ms} ms", file=sys.stderr)
        frame = telemetry.sample(args.seconds, args.interval_ms, host=host, on_batch=on_batch)
    finally:
        if con is not None:
            con.close()
    return {"host": host, "dataset": None if args.no_store else name, "rows": int(len(frame)),
            "gpus": telemetry.summarize(frame)}


def _default_target(con, name: str) -> str:
    info = store.dataset(con, name)
    if info["kind"] != "requests":
        return "weighted_tokens"
    has = store.request_fields(con, int(info["dataset_id"]))
    return "weighted_tokens" if has["tokens"] else "gpu_seconds"


def _cmd_coldstart(args, settings) -> dict:
    bin_s = parse_bin(args.bin)
    con = store.connect(settings.db_path)
    try:
        grids = [grid.demand_grid(con, n, bin_s, Weights(target=_default_target(con, n)))
                 for n in (args.source, args.target)]
    finally:
        con.close()
    table = envelope.cold_start(*grids, bin_s, args.k_hours,
                                envelope.EnvelopeParams(alpha=args.alpha))
    return {"source": args.source, "target": args.target, "alpha": args.alpha,
            "rows": table.to_dict("records")}


def _prices(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        key, _, val = item.partition("=")
        try:
            out[key.strip()] = _positive(val)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise BadInput(f"--price {item!r}: expected HW=USD_PER_GPU_H, e.g. B200=14.24") \
                from exc
    return out


def _cmd_advise(args, settings) -> dict:
    from analytics import advisor
    from analytics.advisor import decide

    con = store.connect(settings.db_path)
    adv = advisor.load(con)
    u = decide.with_prices(decide.UtilityParams(value_per_token_usd=args.value_per_token),
                           _prices(args.price))
    req = decide.Request(model=args.model, params_b=args.params_b,
                         active_params_b=args.active_params_b, concurrency=args.concurrency,
                         in_len=args.in_len, out_len=args.out_len, task=args.task,
                         ttft_slo_ms=args.ttft_slo_ms, itl_slo_ms=args.itl_slo_ms)
    scored = decide.advise(adv.cost, req, u, adv.ctx)
    return advise_json(scored, req, adv, args.top)


def advise_json(scored, req, adv, top: int = 0) -> dict:
    """The ``headroom advise`` document: ranked arms first, then the rest."""
    def q(row, target):
        if f"{target}_q50" not in row or row[f"{target}_q50"] != row[f"{target}_q50"]:
            return None
        return {k: float(row[f"{target}_{k}"]) for k in ("q10", "q50", "q90")}

    arms = []
    for _, r in scored.iterrows():
        if top and r["rank"] == r["rank"] and r["rank"] > top:
            continue
        arms.append({
            "hardware": r["hardware"], "tp": int(r["tp"]), "precision": r["precision"],
            "rank": None if r["rank"] != r["rank"] else int(r["rank"]),
            "utility": None if r["utility"] != r["utility"] else float(r["utility"]),
            "throughput_tok_s": q(r, "throughput_tok_s"), "itl_ms": q(r, "itl_ms"),
            "ttft_ms": q(r, "ttft_ms"), "power_w": q(r, "power_w"),
            "abstain": bool(r["abstain"]), "abstain_axis": r["abstain_axis"] or None,
            "feasible": bool(r["feasible"]), "why_infeasible": r["why_infeasible"] or None,
            "priced": bool(r["priced"]), "fallback": bool(r["fallback"]),
            "occupancy": None if r["occupancy"] != r["occupancy"] or r["occupancy"] is None
            else float(r["occupancy"]),
            "p_launch": float(r["p_launch"]), "p_slo": float(r["p_slo"]),
        })
    if top:
        arms = [a for a in arms if a["rank"] is not None or a["fallback"]]
    ranked = scored["rank"].notna()
    return {"model": req.model, "params_b": req.params_b, "arms": arms,
            "ranked": int(ranked.sum()), "abstained": int(scored["abstain"].sum()),
            "infeasible": int((~scored["feasible"]).sum()),
            "all_abstain": bool(scored["abstain"].all()),
            "cost_model_rows": adv.cost.rows, "job_history_rows": adv.jobs_rows}


def _cmd_advisor_backtest(args, settings) -> dict:
    from analytics import advisor
    from analytics.advisor import decide, gate

    con = store.connect(settings.db_path)
    adv = advisor.load(con)
    bt = decide.backtest(adv.cost, decide.UtilityParams(value_per_token_usd=args.value_per_token),
                         adv.ctx)
    thr = adv.cost.metrics["throughput_tok_s"]
    out = {"cells": bt["cells"], "arms": bt.get("arms", 0), "policies": bt["policies"],
           "coverage": {k: thr["coverage"][k] for k in ("held_out_cell", "random_fold", "raw",
                                                         "nominal")},
           "targets": adv.cost.metrics}
    if not args.no_record:
        out["model_version"] = gate.record(con, adv.cost)
    return out


COMMANDS = {"ingest": _cmd_ingest, "datasets": _cmd_datasets, "delete": _cmd_delete,
            "pull": _cmd_pull, "grid": _cmd_grid, "envelope": _cmd_envelope,
            "coldstart": _cmd_coldstart, "capacity": _cmd_capacity,
            "dispatch": _cmd_dispatch, "telemetry": _cmd_telemetry,
            "advise": _cmd_advise, "advisor-backtest": _cmd_advisor_backtest}


def _cmd_serve_energy(args, settings) -> dict:
    from analytics.serving import engine as serving
    from analytics.serving import profiles as serving_profiles

    names = ("max_clock", "static_dvfs", "stage1", "stage2", "stage3", "stage4", "festina")
    if args.policy != "all" and args.policy not in names:
        raise BadInput(f"--policy {args.policy!r}: choose all or one of {', '.join(names)}")
    if args.models < 1 or args.gpus < 1:
        raise BadInput("--models and --gpus must be >= 1")
    if args.chunked_prefill < 0:
        raise BadInput("--chunked-prefill must be >= 0 tokens (0 = off)")
    con = store.connect(settings.db_path)
    try:
        info = store.dataset(con, args.trace)
        if info["kind"] != "requests":
            raise BadInput(f"{args.trace!r} is a {info['kind']} dataset; serve-energy needs a "
                           "request trace (e.g. AzureLLMInferenceTrace_conv)")
        requests = store.dataset_rows(con, args.trace)
        bench = store.bench_runs(con)
    finally:
        con.close()
    if args.bench:
        missing = sorted(set(args.bench) - set(bench["dataset"]))
        if missing:
            raise BadInput(f"--bench {missing[0]!r}: no bench dataset of that name")
        bench = bench[bench["dataset"].isin(args.bench)]
    profiles = serving_profiles.profiles_from_bench(bench, args.gpu_kind)
    if args.profile:
        path = Path(args.profile)
        if not path.is_file():
            raise BadInput(f"{path}: " + ("is a directory, not a CSV file" if path.is_dir()
                                          else "no such file"))
        profiles = serving_profiles.apply_measured(
            profiles, serving_profiles.parse_measured_profiles(path.read_bytes(), path.name))
    params = serving.ServingParams(
        n_models=args.models, n_gpus=args.gpus, gpu=args.gpu_kind,
        ttft_slo_ms=args.ttft_slo_ms, tbt_slo_ms=args.tbt_slo_ms,
        safety_margin=args.safety_margin, zipf_s=args.zipf, gamma=args.gamma,
        window_s=args.window_s, seed=args.seed, static_scale=args.static_scale,
        chunk_tokens=args.chunked_prefill)
    trace = serving.trace_arrays(requests, args.window_s)
    policies = names if args.policy == "all" else (args.policy,)
    print(f"serve-energy: {len(trace):,} requests, {len(policies)} policies ...", file=sys.stderr)
    comp = serving.simulate(trace, profiles, params, policies)
    out = serving.to_json(comp)
    if args.sensitivity:
        print("serve-energy: sensitivity sweep (12 x 2 runs) ...", file=sys.stderr)
        sens = serving.sensitivity(trace, profiles, params)
        out["sensitivity"] = [{k: (round(v, 6) if isinstance(v, float) else v)
                               for k, v in r.items()} for r in sens.to_dict("records")]
    return out


COMMANDS["serve-energy"] = _cmd_serve_energy


def _cmd_powersim(args, settings) -> dict:
    from analytics.cli import power as powersim_cli

    return powersim_cli.run(args, settings.db_path)


COMMANDS["powersim"] = _cmd_powersim


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``headroom`` console script. Returns the exit code."""
    import logging

    logging.getLogger().setLevel(logging.WARNING)  # MAPIE logs INFO on the root logger
    args = _parser().parse_args(argv)
    env = Settings.from_env()
    settings = Settings(db_path=args.db or env.db_path, data_dir=env.data_dir)
    try:
        result = COMMANDS[args.command](args, settings)
    except FormatError as exc:
        return _fail(2, str(exc), exc.as_dict())
    except (BadInput, store.NameTaken, store.UnknownDataset, grid.GridError, ValueError,
            KeyError) as exc:
        msg = str(exc) if not isinstance(exc, KeyError) or isinstance(exc, store.UnknownDataset) \
            else exc.args[0]
        return _fail(2, msg)
    except (sources.PullError, store.StoreError, telemetry.TelemetryUnavailable) as exc:
        return _fail(1, str(exc))
    print(json.dumps(result, indent=2, default=str))
    return 0


def _fail(code: int, message: str, detail: dict | None = None) -> int:
    print(f"headroom: error: {message}", file=sys.stderr)
    print(json.dumps({"error": message, **({"detail": detail} if detail else {})}, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
