"""``headroom grid | envelope | coldstart | envelope-atlas``: demand grids, envelopes and their
coverage.

``headroom envelope-atlas [--alphas 0.05,0.1,0.2] [--bins 5min,1h] [--datasets A,B]
[--cluster tcp://HOST:8786] [--no-store]`` -> ``{"rows": [{dataset, bin_s, alpha, method,
coverage, target_coverage, coverage_gap_pp, mean_width, wape, n_test, reason}], "hits",
"alphas", "synthetic", "sweep_run"}``: every interval method's coverage and width for every
demand dataset x bin x alpha (:func:`analytics.services.atlas.run_atlas`), one sweep task per
(dataset, bin, alpha) kept in the store's ``sweep_runs`` (a rerun reads them). A refused cell
is a row per method with null values and the reason.
"""

from __future__ import annotations

import argparse

from analytics.cli.common import (
    LazyChoices,
    add_cluster_args,
    add_grid_args,
    grid_request,
    hours,
    log,
    nonneg,
    open_unit,
    triple,
)
from analytics.config import parse_bin

COMMANDS = {
    "grid": "complete demand grid summary of a dataset",
    "envelope": "point forecasts, conformal intervals and their coverage",
    "coldstart": "fit on one trace, calibrate on the first k hours of another, report coverage "
                 "on the rest",
    "envelope-atlas": "coverage and width of every interval method for every demand dataset x "
                      "bin x alpha, on the sweep runner",
}


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _alphas(text: str) -> tuple[float, ...]:
    return tuple(open_unit(x) for x in _names(text))


def _bins(text: str) -> tuple[int, ...]:
    try:
        return tuple(parse_bin(x) for x in _names(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _learned() -> tuple[str, ...]:
    from analytics.envelope import forecast  # scikit-learn, LightGBM: only when asked

    return (*forecast.LEARNED, forecast.AUTO)


def add_parsers(sub) -> None:
    """Add the demand subcommands to the ``headroom`` parser."""
    p = sub.add_parser("grid", help=COMMANDS["grid"])
    add_grid_args(p)
    p.add_argument("--rows", action="store_true", help="include every bin in the output")
    p.set_defaults(run=grid)

    p = sub.add_parser("envelope", help=COMMANDS["envelope"])
    add_grid_args(p)
    p.add_argument("--alpha", type=open_unit, default=0.1,
                   help="miscoverage (0.1 = 90%% intervals)")
    p.add_argument("--horizon", type=int, default=1, help="bins ahead")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--split-days", type=triple(int), default=None,
                   help="fit,calibration,test days (default 42,9,10 when the series is long "
                        "enough, else --split-frac)")
    g.add_argument("--split-frac", type=triple(float), default=None,
                   help="fit,calibration,test fractions (default .69,.15,.16)")
    p.add_argument("--base-model", default="hgb", choices=LazyChoices(_learned),
                   metavar="MODEL", help="point model the residual-based intervals wrap: "
                                         "%(choices)s")
    p.add_argument("--aci-gamma", type=nonneg, default=0.005,
                   help="ACI step size (Gibbs & Candes 2021 use 0.005)")
    p.add_argument("--seed", type=int, default=0, help="seed of the learned models and bootstrap")
    p.set_defaults(run=envelope)

    p = sub.add_parser("coldstart", help=COMMANDS["coldstart"])
    p.add_argument("source")
    p.add_argument("target_trace", metavar="target")
    p.add_argument("--bin", default="5min", help="bin width: 1min, 5min, 15min, 1h, 300s")
    p.add_argument("--k-hours", type=hours, default=(6, 12, 24, 48),
                   help="calibration lengths in hours, e.g. 6,12,24")
    p.add_argument("--alpha", type=open_unit, default=0.1, help="interval miscoverage")
    p.set_defaults(run=coldstart)

    p = sub.add_parser("envelope-atlas", help=COMMANDS["envelope-atlas"])
    p.add_argument("--alphas", type=_alphas, default=(0.05, 0.1, 0.2),
                   help="miscoverages, e.g. 0.05,0.1,0.2 (the default)")
    p.add_argument("--bins", type=_bins, default=(),
                   help="bin widths, e.g. 5min,1h (default: each dataset's bins the envelope "
                        "pages offer)")
    p.add_argument("--datasets", type=_names, default=(),
                   help="demand datasets, comma-separated (default: every one in the store)")
    add_cluster_args(p, "the cells")
    p.set_defaults(run=envelope_atlas)


def grid(args, settings) -> dict:
    """Summary of the complete grid (and every bin with ``--rows``)."""
    from analytics.services import demand, open_store

    req = grid_request(args)
    with open_store(settings.db_path) as con:
        return demand.grid_document(con, req, rows=args.rows)


def envelope(args, settings) -> dict:
    """Forecasts, the six interval methods and their coverage."""
    from analytics.envelope.pipeline import EnvelopeParams
    from analytics.services import demand, open_store

    req = grid_request(args)
    params = EnvelopeParams(alpha=args.alpha, horizon=args.horizon, split_days=args.split_days,
                            split_frac=args.split_frac, base_model=args.base_model,
                            aci_gamma=args.aci_gamma, seed=args.seed)
    with open_store(settings.db_path) as con:
        log(f"envelope of {args.dataset} at {req.bin_s} s bins")
        doc = demand.envelope_document(con, req, params)
    if doc["cache"] == "hit":
        log("read from the envelope cache beside the store (same grid, parameters and code)")
    return doc


def coldstart(args, settings) -> dict:
    """Cross-trace cold-start coverage after k hours of target calibration."""
    from analytics.services import demand, open_store

    bin_s = parse_bin(args.bin)  # ValueError -> exit 2
    with open_store(settings.db_path) as con:
        table = demand.cold_start(con, args.source, args.target_trace, bin_s, args.k_hours,
                                  args.alpha)
    return {"source": args.source, "target": args.target_trace, "alpha": args.alpha,
            "rows": table.to_dict("records")}


def envelope_atlas(args, settings) -> dict:
    """Every interval method's coverage and width per dataset x bin x alpha."""
    import sys

    from tqdm import tqdm

    from analytics.services import atlas, open_store
    from analytics.sweep import resolve_backend

    with open_store(settings.db_path) as con:  # closed before the cells run
        inputs = atlas.atlas_inputs(con, args.datasets, args.bins)
    log(f"envelope atlas: {len(inputs.cells)} dataset x bin grids x {len(args.alphas)} alphas"
        + (f", {len(inputs.refused)} refused" if inputs.refused else ""))
    with tqdm(total=len(inputs.cells) * len(set(args.alphas)), file=sys.stderr, desc="atlas",
              unit="cell") as bar:
        return atlas.run_atlas(inputs, args.alphas,
                               store_path=None if args.no_store else settings.db_path,
                               backend=resolve_backend(args.cluster),
                               progress=lambda done, _total, *_label: bar.update(done - bar.n))
