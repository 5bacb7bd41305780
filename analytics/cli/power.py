"""``headroom powersim``: the hybrid power co-simulation from the command line.

DESIGN.md contract::

    headroom powersim [--inference-share X] [--utilization U] [--sweep]
        -> {"cv", "ramp_p50": {"1min", "5min", "15min"}, "sweep": [...]}

``cv`` and ``ramp_p50`` are the scenario (X, U); ``sweep`` is empty unless ``--sweep``, which
runs every share of ``--shares`` at every utilisation of ``--sweep-utilizations`` (default 11
shares x 2 utilisations). Extra keys: ``scenario``, ``metrics``, ``shape`` (whether the sweep
shows a U-shaped CV and a 15-minute ramp hump), ``inputs`` (datasets, resource groups, LLM
templates, power sources) and ``synthetic``.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from analytics import power as powersim
from analytics import store
from analytics.cli.main import _unit_interval as _util  # utilisation in (0, 1]


def _share(text: str) -> float:
    v = float(text)
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 1]")
    return v


def _list(kind):
    def parse(text: str) -> tuple[float, ...]:
        try:
            return tuple(kind(x) for x in text.split(",") if x.strip())
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from exc
    return parse


def _positive_int(text: str) -> int:
    v = int(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive whole number")
    return v


def add_parser(sub) -> None:
    """Add the ``powersim`` subcommand to the ``headroom`` parser."""
    p = sub.add_parser("powersim", help="hybrid batch + inference power profiles: coefficient of "
                                        "variation and ramps vs inference share")
    p.add_argument("--inference-share", type=_share, default=0.5,
                   help="share of offered GPU-time that is inference, 0..1 (default 0.5)")
    p.add_argument("--utilization", type=_util, default=0.8,
                   help="target utilisation: offered GPU-time / pool GPU-time (default 0.8)")
    p.add_argument("--sweep", action="store_true",
                   help="also sweep the inference share at --sweep-utilizations")
    p.add_argument("--shares", type=_list(_share), default=powersim.DEFAULT_SHARES,
                   help="inference shares of the sweep (default 0,0.1,...,1)")
    p.add_argument("--sweep-utilizations", type=_list(_util),
                   default=powersim.DEFAULT_UTILIZATIONS,
                   help="utilisations of the sweep (default 0.5,0.8)")
    p.add_argument("--replications", type=_positive_int, default=3,
                   help="seeds per sweep cell, metrics averaged (default 3)")
    p.add_argument("--jobs", default=None,
                   help="jobs dataset (default: the largest in the store)")
    p.add_argument("--inference", default=None,
                   help="demand dataset at <= 1 min resolution, or 'synthetic' (default: the "
                        "longest in the store, else the synthetic envelope)")
    p.add_argument("--gpus", type=_positive_int, default=256, help="GPUs in the pool")
    p.add_argument("--days", type=float, default=7.0, help="measured window, days")
    p.add_argument("--warmup-days", type=float, default=2.0, help="discarded warm-up, days")
    p.add_argument("--scheduler", choices=list(powersim.SCHEDULERS), default="fcfs",
                   help="fcfs (with backfilling) or swf (smallest work first)")
    p.add_argument("--checkpoint-min", type=float, default=60.0,
                   help="checkpoint segment length in minutes; 0 = no checkpointing")
    p.add_argument("--capped", action="store_true",
                   help="cap inference at --cap-factor x its mean GPU allocation")
    p.add_argument("--cap-factor", type=float, default=1.25)
    p.add_argument("--speed", choices=list(powersim.TEMPLATES), default="M",
                   help="LLM serving speed: F/M/S = vLLM max_num_seqs 32/64/128 (ML.ENERGY)")
    p.add_argument("--clock-offset-h", type=float, default=None,
                   help="hours from UTC to the job trace's site clock (default: -5 for MIT "
                        "SuperCloud, else 0)")
    p.add_argument("--seed", type=int, default=0)


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        return _clean(value.item())
    return value


def run(args, db_path) -> dict:
    """Execute ``headroom powersim``; returns the JSON document (NaN -> null).

    Raises
    ------
    ValueError
        Bad parameters or no job trace (exit 2 with the message).
    """
    if args.capped and args.cap_factor < 1:
        raise ValueError("--cap-factor must be >= 1")
    scenario = powersim.Scenario(
        inference_share=args.inference_share, utilization=args.utilization, gpus=args.gpus,
        days=args.days, warmup_days=args.warmup_days, scheduler=args.scheduler,
        checkpoint_min=args.checkpoint_min if args.checkpoint_min > 0 else None,
        capped=args.capped, cap_factor=args.cap_factor, speed=args.speed)
    rng = np.random.default_rng(args.seed)
    con = store.connect(db_path)
    try:
        sys.stderr.write("fitting the batch arrival model\n")
        inputs = powersim.load_inputs(con, args.jobs, args.inference, rng, args.clock_offset_h)
    finally:
        con.close()
    result = powersim.run_scenario(inputs, scenario, np.random.default_rng(args.seed))
    metrics = dict(result.metrics)
    out = {"cv": metrics.pop("cv"), "ramp_p50": metrics.pop("ramp_p50"), "sweep": [],
           "scenario": {**scenario.__dict__, "seed": args.seed}, "metrics": metrics}
    if args.sweep:
        from tqdm import tqdm

        total = len(args.shares) * len(args.sweep_utilizations) * args.replications
        bar = tqdm(total=total, file=sys.stderr, desc="sweep", unit="run")

        def progress(done, _total):
            bar.update(done - bar.n)

        table = powersim.sweep(inputs, scenario, np.random.default_rng(args.seed), args.shares,
                               args.sweep_utilizations, args.replications, progress)
        bar.update(total - bar.n)
        bar.close()
        out["sweep"] = table.to_dict("records")
        out["shape"] = powersim.shape_report(table)
    out["inputs"] = powersim.describe_inputs(inputs, scenario)
    out["synthetic"] = inputs.synthetic
    return _clean(out)
