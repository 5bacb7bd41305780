"""The ``headroom`` command: every analysis, one JSON document on stdout.

Exit codes: 0 success, 2 bad input (the message names file, line and column where there is one),
1 internal error. Progress goes to stderr. See ``DESIGN.md`` for the contract of each command.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from analytics import capacity, dispatch, envelope, grid, ingest, sources, store, telemetry
from analytics.config import DEFAULT_T0, GPU_CATALOG, ParseOptions, Settings, Weights, parse_bin
from analytics.formats import FormatError, format_names


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
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return v


def _nonneg(text: str) -> float:
    v = float(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
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
    p.add_argument("--objective", choices=list(capacity.OBJECTIVES[:2]), default="cost",
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
    return ap


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

    from analytics.formats._common import Parsed

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


COMMANDS = {"ingest": _cmd_ingest, "datasets": _cmd_datasets, "delete": _cmd_delete,
            "pull": _cmd_pull, "grid": _cmd_grid, "envelope": _cmd_envelope,
            "coldstart": _cmd_coldstart, "capacity": _cmd_capacity,
            "dispatch": _cmd_dispatch, "telemetry": _cmd_telemetry}


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
