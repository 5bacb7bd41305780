"""``headroom advise | advisor-backtest | advisor-voi``: the launch advisor (OmniPilot paper)."""

from __future__ import annotations

import argparse

from analytics.cli.common import BadInput, add_cluster_args, log, nonneg, positive

COMMANDS = {
    "advise": "launch advisor: rank GPU kind x TP x precision arms for a model, say whether "
              "to launch at this value per token and its break-even (OmniPilot)",
    "advisor-backtest": "leakage-free backtest of the launch advisor vs five baselines, and "
                        "interval coverage",
    "advisor-voi": "value-of-information benchmark gate: unmeasured benchmarks ranked by "
                   "expected gain in the best arm's utility per node-hour, cut at a budget; "
                   "--backtest adds regret-vs-benchmark-hours curves of four policies",
}


def add_parsers(sub) -> None:
    """Add the advisor subcommands to the ``headroom`` parser."""
    p = sub.add_parser("advise", help=COMMANDS["advise"])
    p.add_argument("--model", required=True, help="model name")
    p.add_argument("--params-b", type=positive, required=True, help="parameters, billions")
    p.add_argument("--active-params-b", type=positive, default=None,
                   help="active parameters per token (MoE), billions")
    p.add_argument("--concurrency", type=positive, required=True,
                   help="concurrent sequences")
    p.add_argument("--in-len", type=positive, required=True, help="input tokens per request")
    p.add_argument("--out-len", type=positive, required=True, help="output tokens per request")
    p.add_argument("--task", default="lm-arena-chat",
                   help="workload family of the benchmark catalog (lm-arena-chat, gpqa, "
                        "sourcegraph-fim, argonne-offline, ...)")
    p.add_argument("--ttft-slo-ms", type=positive, default=None)
    p.add_argument("--itl-slo-ms", type=positive, default=None)
    p.add_argument("--value-per-token", type=positive, default=2e-7,
                   help="USD per served output token (paper default 2e-7); below the "
                        "break-even the JSON says decision do_not_launch")
    _price_arg(p)
    p.add_argument("--top", type=int, default=0, help="print only the best N ranked arms "
                                                     "(plus abstaining / infeasible counts)")
    p.add_argument("--queue-weight", type=nonneg, default=1.0,
                   help="weight of expected queue wait, hours x the arm's cost rate (headroom's "
                        "constant: the paper gives the term no weight)")
    p.add_argument("--restart-h", type=nonneg, default=0.5,
                   help="hours of the arm's cost lost per failed launch (headroom's constant: "
                        "the paper gives the restart cost no value)")
    _fit_args(p)
    p.set_defaults(run=advise)

    p = sub.add_parser("advisor-backtest", help=COMMANDS["advisor-backtest"])
    p.add_argument("--value-per-token", type=positive, default=2e-7)
    p.add_argument("--ttft-slo-ms", type=positive, default=None,
                   help="score the backtest with this TTFT SLO (violation term)")
    p.add_argument("--itl-slo-ms", type=positive, default=None,
                   help="score the backtest with this ITL SLO (violation term)")
    p.add_argument("--no-record", action="store_true",
                   help="do not record the fitted model in model_versions")
    _fit_args(p)
    p.set_defaults(run=backtest)

    p = sub.add_parser("advisor-voi", help=COMMANDS["advisor-voi"])
    p.add_argument("--value-per-token", type=positive, default=2e-7,
                   help="USD per served output token (paper default 2e-7)")
    _price_arg(p)
    p.add_argument("--budget-node-h", type=positive, default=0.2,
                   help="node-hours the ranked benchmarks may spend (greedy by gain per "
                        "node-hour; the paper's 0.2)")
    p.add_argument("--depth", type=int, default=3,
                   help="most benchmarks selected (the paper's depth 3)")
    p.add_argument("--setup-min", type=positive, default=5.0,
                   help="launch overhead per benchmark, minutes (an assumption: weights load "
                        "and warm-up)")
    p.add_argument("--epsilon-usd", type=float, default=0.05,
                   help="smallest expected gain (USD over the runtime) worth a benchmark "
                        "(the paper's gate epsilon 0.05)")
    p.add_argument("--top", type=int, default=20,
                   help="print the best N benchmarks (0: every one within the budget)")
    p.add_argument("--backtest", action="store_true",
                   help="add the sequential backtest: regret vs benchmark node-hours for the "
                        "VoI, uncertainty, random and cheapest-first policies")
    p.add_argument("--seeds", type=int, default=5,
                   help="backtest runs, each on a random half of the eligible cells")
    _fit_args(p)
    p.set_defaults(run=voi)


def _price_arg(p) -> None:
    """``--price HW=USD_PER_GPU_H`` (repeatable), as ``advise`` and ``advisor-voi`` take it."""
    p.add_argument("--price", action="append", default=[], metavar="HW=USD_PER_GPU_H",
                   help="price per GPU-hour for a hardware key, e.g. B200=14.24 (repeatable)")


def _fit_args(p) -> None:
    """Where the cost model's out-of-fold fits run when no fit is stored for this data."""
    add_cluster_args(p, "the cost model's fold fits")


def _prices(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        key, _, val = item.partition("=")
        try:
            out[key.strip()] = positive(val)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise BadInput(f"--price {item!r}: expected HW=USD_PER_GPU_H, e.g. B200=14.24") \
                from exc
    return out


def advise(args, settings) -> dict:
    """Ranked arms for one launch question."""
    from analytics.advisor import decide
    from analytics.services import advisor

    u = advisor.utility(args.value_per_token, _prices(args.price),
                        queue_weight=args.queue_weight, restart_h=args.restart_h)
    req = decide.Request(model=args.model, params_b=args.params_b,
                         active_params_b=args.active_params_b, concurrency=args.concurrency,
                         in_len=args.in_len, out_len=args.out_len, task=args.task,
                         ttft_slo_ms=args.ttft_slo_ms, itl_slo_ms=args.itl_slo_ms)
    adv, fitted = _fitted(args, settings)
    return {**advisor.advise_document(adv, req, u, args.top), **fitted}


def _fitted(args, settings):
    """(advisor, {"model_cache": "hit" | "miss", "fold_sweep": runner summary or null}): the
    fit stored beside the store for this data, or a new one whose fold fits run on the sweep
    runner (tqdm progress on stderr)."""
    import sys

    from tqdm import tqdm

    from analytics.services import advisor
    from analytics.sweep import resolve_backend

    log("loading or fitting the cost model on the stored benchmarks")
    bars = []  # made at the first report: a stored fit shows no bar

    def progress(done, total, _label=""):
        if not bars:
            bars.append(tqdm(total=total, file=sys.stderr, desc="cost-model folds", unit="fold"))
        bars[0].update(done - bars[0].n)
    try:
        adv, cache, sweep = advisor.fit_cached(settings.db_path, settings.cache_dir,
                                               backend=resolve_backend(args.cluster),
                                               keep=not args.no_store, progress=progress)
    finally:
        for bar in bars:
            bar.close()
    log("cost model: " + ("cached fit for this data" if cache == "hit" else "fitted and stored"))
    return adv, {"model_cache": cache, "fold_sweep": sweep}


def backtest(args, settings) -> dict:
    """Top-1 / regret of the advisor and five baselines; coverage; the promotion gate."""
    from analytics.services import advisor, open_store

    adv, fitted = _fitted(args, settings)
    with open_store(settings.db_path, write=not args.no_record) as con:
        return {**advisor.backtest_document(con, adv, args.value_per_token,
                                            record=not args.no_record,
                                            ttft_slo_ms=args.ttft_slo_ms,
                                            itl_slo_ms=args.itl_slo_ms), **fitted}


def voi(args, settings) -> dict:
    """Benchmarks worth running (and, with --backtest, the regret curves)."""
    from analytics.advisor.voi import VoIParams
    from analytics.services import advisor, open_store

    if args.top < 0 or args.seeds < 1:
        raise BadInput("--top must be >= 0 and --seeds >= 1")
    u = advisor.utility(args.value_per_token, _prices(args.price))
    if args.epsilon_usd < 0:
        raise BadInput("--epsilon-usd must be >= 0")
    if args.depth < 1:
        raise BadInput("--depth must be >= 1")
    p = VoIParams(budget_node_h=args.budget_node_h, setup_min=args.setup_min,
                  epsilon_usd=args.epsilon_usd, depth=args.depth)
    adv, fitted = _fitted(args, settings)
    with open_store(settings.db_path) as con:
        if args.backtest:
            log(f"VoI backtest: four policies x {args.seeds} seeds")
        doc = advisor.voi_document(con, adv, u, p, args.top, args.backtest, args.seeds,
                                   cache_dir=settings.cache_dir)
    return {**doc, **fitted}
