"""``headroom live``: a running fleet's demand from Prometheus, bin by bin against its envelope
(JSON Lines: one object per closed bin)."""

from __future__ import annotations

import os

from analytics.cli.common import LazyChoices, nonneg, open_unit, positive, positive_int
from analytics.cli.telemetry import _utc
from analytics.live import PROMETHEUS_ENV as ENV_URL

COMMANDS = {"live": "a model's demand from Prometheus, bin by bin against its envelope "
                    "(JSON Lines)",
            "live-config": "write the Prometheus alerting rules and the Grafana dashboard over "
                           "headroom's /metrics"}
#: The Prometheus URL is operator configuration: this flag, or the environment.


def _models() -> tuple[str, ...]:
    from analytics.envelope import forecast

    return (*forecast.LEARNED, forecast.AUTO)


def _engines() -> tuple[str, ...]:
    from analytics.live.source import COUNTERS

    return tuple(COUNTERS)


def _label(text: str) -> str:
    """A non-blank name (the engine's ``model_name``, a run, a site)."""
    import argparse

    if not text.strip():
        raise argparse.ArgumentTypeError("give a name that is not blank (for --model: the "
                                         "model_name label of the engine's metrics)")
    return text


def _refit_hours(text: str) -> float:
    """Hours between scheduled refits: 0 (never) to a year."""
    import argparse

    v = nonneg(text)
    if v > 8760:
        raise argparse.ArgumentTypeError(f"{text!r}: give at most 8760 hours (a year), or 0 "
                                         "for never")
    return v


def add_parsers(sub) -> None:
    """Add ``live`` to the ``headroom`` parser."""
    p = sub.add_parser("live", help=COMMANDS["live"])
    p.add_argument("--prometheus", default=None, metavar="URL",
                   help=f"the Prometheus server (default ${ENV_URL})")
    p.add_argument("--scrape", default=None, metavar="URL",
                   help="no Prometheus: scrape the engine's own /metrics every 15 s (with "
                        "--follow; no back-fill: what headroom missed is a gap)")
    p.add_argument("--model", required=True, type=_label, help="the model_name label of the engine's metrics")
    p.add_argument("--engine", default="vllm", choices=LazyChoices(_engines),
                   help="whose metric names: %(choices)s")
    p.add_argument("--history", required=True, metavar="DATASET",
                   help="stored demand the envelope starts from (its bins before --from)")
    p.add_argument("--from", dest="start", type=_utc, default=None,
                   help="first bin, ISO 8601 UTC (default: the bin after the history's last)")
    p.add_argument("--to", dest="end", type=_utc, default=None,
                   help="end of the window, ISO 8601 UTC (a past window: read and exit; with "
                        "--follow: follow until then)")
    p.add_argument("--follow", action="store_true",
                   help="keep going as bins close, storing each bin under --run (a restart "
                        "resumes and back-fills what it missed)")
    p.add_argument("--run", dest="run_name", default=None, metavar="NAME", type=_label,
                   help="the live run's name in the store (default live:MODEL)")
    p.add_argument("--lag-s", type=nonneg, default=30.0,
                   help="seconds after a bin's end before it is read (default 30: two 15-s "
                        "scrapes)")
    p.add_argument("--bin-s", type=positive_int, default=300, help="bin width in seconds (default 300)")
    p.add_argument("--alpha", type=open_unit, default=0.1, help="miscoverage (default 0.1)")
    p.add_argument("--base-model", default="hgb", choices=LazyChoices(_models), metavar="MODEL",
                   help="point model under the band: %(choices)s")
    p.add_argument("--k-above", type=positive_int, default=4,
                   help="bins in a row above the band that raise the alarm (default 4: 20 min of 5-min bins)")
    p.add_argument("--w-prompt", type=nonneg, default=1.0,
                   help="weight of a prompt token in the target (default 1)")
    p.add_argument("--w-completion", type=nonneg, default=1.0,
                   help="weight of a completion token in the target (default 1)")
    p.add_argument("--energy-selector", type=_selector, default=None, metavar="MATCHERS",
                   help="PromQL label matchers of the GPUs serving the model (e.g. "
                        "'Hostname=\"gpu-node-1\"'): their DCGM energy counter gives J/token")
    p.add_argument("--carbon-site", default=None, metavar="SITE", type=_label,
                   help="a site whose hourly carbon intensity the store holds: gCO2/token")
    p.add_argument("--carbon-basis", default=None, choices=("LCA", "direct"),
                   help="carbon basis when the site has both (default LCA)")
    p.add_argument("--refit-every-h", type=_refit_hours, default=24.0,
                   help="refit the envelope on the history and the live bins every this many "
                        "hours of live bins (default 24; 0: never)")
    p.add_argument("--no-refit-on-alarm", action="store_true",
                   help="do not refit when the alarm is raised")
    p.add_argument("--timeout-s", type=positive, default=10.0,
                   help="seconds one request to Prometheus may take")
    p.set_defaults(run=live)
    c = sub.add_parser("live-config", help=COMMANDS["live-config"])
    c.add_argument("--out", required=True, metavar="DIR",
                   help="folder to write headroom-alerts.yml and headroom-dashboard.json into")
    c.set_defaults(run=live_config)


def live_config(args, settings):
    """Write :func:`analytics.live.exposition.alert_rules` (YAML) and
    :func:`~analytics.live.exposition.dashboard` (JSON) into ``--out``; the document names the
    files, the series they use and the scrape to add to Prometheus."""
    from pathlib import Path

    import yaml

    from analytics.cli.common import BadInput
    from analytics.live import exposition

    if not args.out.strip():
        raise BadInput("--out: give a folder")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out}: not a folder")
    rules, board = out / "headroom-alerts.yml", out / "headroom-dashboard.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        rules.write_text(yaml.safe_dump(exposition.alert_rules(), sort_keys=False))
        board.write_text(exposition.dashboard_json())
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot write there ({exc.strerror or exc})") from exc
    return {"rules": str(rules), "dashboard": str(board),
            "series": [*exposition.METRICS, *exposition.CONSTANTS, "headroom_live_runs"],
            "scrape": {"job_name": "headroom", "metrics_path": "/metrics",
                       "static_configs": [{"targets": ["HOST:8501"]}]},
            "note": "add the scrape to prometheus.yml (HOST:8501: where make run serves the "
                    "app), the rules file under rule_files, and import the dashboard in "
                    "Grafana choosing the Prometheus data source"}


def live(args, settings):
    """The bins of the window as JSON Lines (:func:`analytics.services.live.live_window`)."""
    from analytics.cli.common import BadInput
    from analytics.cli.output import JsonLines
    from analytics.live.source import SourceError
    from analytics.services import live as live_service
    from analytics.services import open_store

    url = args.prometheus or (None if args.scrape else os.environ.get(ENV_URL))
    if args.scrape and url:
        raise BadInput("give one source: --prometheus URL or --scrape URL")
    if args.scrape and not args.follow:
        raise BadInput("--scrape reads the engine as it runs, with no past samples: use it "
                       "with --follow (a past window needs --prometheus)")
    if args.scrape and args.energy_selector:
        raise BadInput("--energy-selector reads DCGM's energy counter from a Prometheus: "
                       "give --prometheus, or leave --energy-selector out")
    if not url and not args.scrape:
        raise BadInput(f"no Prometheus server: give --prometheus URL (or set ${ENV_URL}), or "
                       "--scrape an engine's /metrics with --follow")
    if args.w_prompt == 0 and args.w_completion == 0:
        raise BadInput("--w-prompt and --w-completion are both 0: the demand would be 0 in "
                       "every bin")
    if args.start is not None and args.end is not None and args.end <= args.start:
        raise BadInput(f"--to {args.end.isoformat()} is not after --from "
                       f"{args.start.isoformat()}")
    if args.follow:
        return JsonLines(_follow(args, settings, url))
    if args.end is None:
        raise BadInput("give --to (a past window) or --follow")
    with open_store(settings.db_path) as con:
        try:
            rows = list(live_service.live_window(con, url, _config(args), args.start, args.end,
                                                 args.timeout_s))
        except SourceError as exc:
            raise BadInput(str(exc)) from exc
    return JsonLines(rows)


def _config(args):
    """The :class:`~analytics.live.follow.LiveConfig` of the options."""
    from analytics.live.follow import LiveConfig

    return LiveConfig(args.model, args.history, args.engine, args.bin_s, args.alpha,
                      args.base_model, args.k_above, args.w_prompt, args.w_completion,
                      args.energy_selector, args.carbon_site, args.carbon_basis,
                      int(round(args.refit_every_h * 3600)), not args.no_refit_on_alarm)


def _selector(text: str) -> str:
    """PromQL label matchers (:func:`analytics.live.source.check_selector`)."""
    import argparse

    from analytics.live.source import check_selector

    try:
        return check_selector(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _follow(args, settings, url: str):
    """The bins of ``headroom live --follow`` as they close; source failures go to stderr as
    JSON lines (``{"event": "source_error", ...}``) while it retries."""
    import sys

    from analytics.cli.common import BadInput
    from analytics.cli.output import dumps_line
    from analytics.live.source import SourceError
    from analytics.services import live as live_service

    try:
        if args.scrape:
            from analytics.live.scrape import ScrapeSource

            source = ScrapeSource(args.scrape, args.timeout_s, model=args.model)
        else:
            source = url
        f = live_service.follower(settings.db_path, source, _config(args),
                                  args.run_name or f"live:{args.model}",
                                  args.start, args.timeout_s, args.lag_s, args.end)
    except SourceError as exc:  # a URL that is not http(s)
        raise BadInput(str(exc)) from exc
    try:
        yield from live_service.follow(
            f, args.end, on_event=lambda e: print(dumps_line(e), file=sys.stderr, flush=True))
    except KeyboardInterrupt:  # Ctrl-C ends a follow: every bin so far is stored
        return
