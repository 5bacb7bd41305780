"""``headroom ingest | datasets | summary | delete | pull | migrate | sweeps``: the store's datasets."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from analytics.cli.common import BadInput, LazyChoices, log, positive_int, t0, zone
from analytics.config import (
    CARBON_BASES,
    DEFAULT_T0,
    ParseOptions,
    check_dataset_name,
    field_list,
    not_a_file,
)

COMMANDS = {
    "ingest": "parse files and add them as datasets (one transaction)",
    "datasets": "list datasets",
    "summary": "what one dataset holds (jobs: GPU-hours, GPUs per job, MIG jobs; telemetry: GPUs "
               "per host; requests: tokens)",
    "delete": "remove a dataset",
    "demo": "add the labelled synthetic demo (requests, carbon, jobs, benchmarks, telemetry)",
    "pull": "download an official public dataset",
    "sweeps": "the sweep points kept in the store: what ran, where, how many tasks and how long",
    "migrate": "bring the store to this headroom's schema (reading commands never migrate)",
    "export": "write every row of a dataset to a CSV or Parquet file (streamed, any size)",
    "attach": "register request logs left where they live (Parquet or CSV files, a glob over "
              "hive partitions) as a dataset read in place, never copied; --refresh checks an "
              "attached dataset's files again",
}


def _format_names() -> list[str]:
    from analytics.ingest.formats import format_names

    return format_names()


def add_parsers(sub) -> None:
    """Add the data subcommands to the ``headroom`` parser."""
    from analytics.ingest.sources import REGISTRY

    p = sub.add_parser("ingest", help=COMMANDS["ingest"])
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--format", choices=LazyChoices(_format_names), default=None,
                   metavar="FORMAT", help="force a format instead of detecting it: "
                                          "%(choices)s")
    p.add_argument("--name", default=None, type=dataset_name,
                   help="dataset name (one file only; default: the file stem); letters, digits, "
                        "'.', '_', '-' and '&'")
    p.add_argument("--append", default=None, type=dataset_name, metavar="DATASET",
                   help="add the files' rows to this existing dataset instead (one "
                        "transaction; rows already stored are dropped and counted, a key "
                        "stored with other values is refused, a file already ingested is a "
                        "duplicate)")
    p.add_argument("--t0", type=t0, default=None,
                   help="UTC start of relative timestamps (BurstGPT, Mooncake); default "
                        f"{DEFAULT_T0.isoformat()} - weekdays are then relative")
    p.add_argument("--site", default=None,
                   help="site of carbon, weather and price files; host of a telemetry file "
                        "(nvidia-smi, DCGM) that names none (default: from the file name)")
    p.add_argument("--year", type=int, default=2022, help="year given to TMY weather records")
    p.add_argument("--fields", type=field_list, default=None,
                   help="field list of a header-less log, in order: the --query-gpu list an "
                        "nvidia-smi --format=csv,noheader log was written with, e.g. "
                        "timestamp,index,power.draw,utilization.gpu")
    p.add_argument("--carbon-basis", choices=list(CARBON_BASES), default="all",
                   help="Electricity Maps / Green-DCC carbon files: store every basis in the "
                        "file (all, default), only life-cycle (LCA) or only direct")
    p.add_argument("--tz", type=zone, default=None,
                   help="IANA time zone the files' local times (written without an offset: sacct, "
                        "nvidia-smi, ...) are in, e.g. America/New_York; converted to UTC with "
                        "the repeated / skipped DST hour handled and kept in the ledger "
                        "(default: read as UTC)")
    p.add_argument("--hardware", default=None,
                   help="GPU that ran serving-benchmark results that do not say (SGLang "
                        "bench_serving JSON Lines, vllm bench without --metadata), e.g. H100")
    p.add_argument("--tp", type=positive_int, default=None,
                   help="tensor-parallel degree of those runs (default: the file's, else 1)")
    p.add_argument("--precision", default=None,
                   help="weight precision of those runs: bf16, fp16, fp8 ... (default bf16)")
    p.add_argument("--scrape-interval-s", type=scrape_seconds, default=None, metavar="S",
                   help="seconds between the scrapes of a DCGM exporter file that appends "
                        "several scrapes without timestamps (curl .../metrics >> file every S "
                        "s): scrape k is placed at t0 + k*S (default: such a file is refused)")
    p.set_defaults(run=ingest)

    sub.add_parser("datasets", help=COMMANDS["datasets"]).set_defaults(run=datasets)
    p = sub.add_parser("summary", help=COMMANDS["summary"])
    p.add_argument("dataset")
    p.set_defaults(run=summary)

    p = sub.add_parser("delete", help=COMMANDS["delete"])
    p.add_argument("dataset")
    p.set_defaults(run=delete)

    p = sub.add_parser("demo", help=COMMANDS["demo"])
    p.set_defaults(run=demo)

    p = sub.add_parser("pull", help=COMMANDS["pull"])
    p.add_argument("name", nargs="?", help="one of: " + ", ".join(REGISTRY))
    p.add_argument("--dest", type=Path, default=None, help="folder (default: the data dir)")
    p.add_argument("--url", default=None, help="download from this https address instead "
                                               "(a mirror; the hash is still checked)")
    p.add_argument("--insecure-url", action="store_true",
                   help="accept a non-https --url (a trusted http or file:// mirror)")
    p.add_argument("--list", action="store_true", help="list the registry instead")
    p.set_defaults(run=pull)

    sub.add_parser("migrate", help=COMMANDS["migrate"]).set_defaults(run=migrate)

    p = sub.add_parser("export", help=COMMANDS["export"])
    p.add_argument("dataset")
    p.add_argument("--out", type=Path, required=True, help="file to write")
    p.add_argument("--format", choices=["csv", "parquet"], default=None,
                   help="default: from --out's suffix (.parquet), else csv")
    p.set_defaults(run=export)

    p = sub.add_parser("attach", help=COMMANDS["attach"])
    p.add_argument("name", type=dataset_name, help="dataset name")
    p.add_argument("pattern", nargs="?", default=None,
                   help="the files, a path or glob in quotes: 'logs/date=*/*.parquet', "
                        "'logs/**/*.csv' (folders named key=value are columns: hive "
                        "partitioning); s3://... with DuckDB's httpfs installed")
    p.add_argument("--refresh", action="store_true",
                   help="check the attached dataset NAME's files again (its recorded pattern; "
                        "new files are taken in) and move the data version")
    p.set_defaults(run=attach)

    p = sub.add_parser("sweeps", help=COMMANDS["sweeps"])
    p.add_argument("--analysis", default=None, help="only this analysis, e.g. power.sweep_point")
    p.set_defaults(run=sweeps)


def scrape_seconds(text: str) -> float:
    """``--scrape-interval-s``: seconds in (0, 86400]."""
    try:
        v = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from exc
    if not 0 < v <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds in (0, 86400]")
    return v


def dataset_name(text: str) -> str:
    """argparse type of ``--name``: a valid dataset name, else a usage error (exit 2)."""
    try:
        return check_dataset_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def ingest(args, settings) -> list[dict]:
    """Parse every file, then write them in one transaction."""
    from analytics.services import data, open_store

    if args.name and len(args.paths) > 1:
        raise BadInput("--name names one dataset; give one file with it")
    if args.name and args.append:
        raise BadInput("--name and --append both name the dataset; give one of them")
    for path in args.paths:
        if (why := not_a_file(path)) is not None:
            raise BadInput(f"{path}: {why}")
    opts = ParseOptions(t0=args.t0 or DEFAULT_T0, t0_given=args.t0 is not None, site=args.site,
                        year=args.year, fields=args.fields,
                        carbon_basis=args.carbon_basis, tz=args.tz, hardware=args.hardware,
                        tp=args.tp, precision=args.precision,
                        scrape_interval_s=args.scrape_interval_s)
    log(f"parsing {len(args.paths)} file(s)")
    # the store is opened (for writing) only once every file parsed: a long parse locks nothing
    # (a large BurstGPT / Azure trace is read in batches as it is written: analytics.ingest.fastcsv)
    writer = functools.partial(open_store, settings.db_path, write=True)
    return data.ingest_paths(writer, args.paths, args.format, args.name, opts, args.append)


def attach(args, settings) -> dict:
    """Attach files in place, or refresh an attached dataset (:mod:`analytics.ingest.attach`)."""
    from analytics.services import data, open_store

    if args.refresh and args.pattern:
        raise BadInput("--refresh checks the recorded pattern again; give no pattern with it")
    if not args.refresh and not args.pattern:
        raise BadInput("give the files to attach, e.g. headroom attach logs "
                       "'logs/date=*/*.parquet'")
    with open_store(settings.db_path, write=True) as con:
        return data.attach(con, args.name, args.pattern, args.refresh)


def datasets(args, settings) -> list[dict]:
    """The dataset ledger."""
    from analytics.services import data, open_store

    with open_store(settings.db_path) as con:
        return data.ledger_document(con)


def summary(args, settings) -> dict:
    """One dataset's summary in its kind's terms."""
    from analytics.services import data, open_store

    with open_store(settings.db_path) as con:
        return data.summary(con, args.dataset)


def delete(args, settings) -> dict:
    """Remove one dataset."""
    from analytics.services import data, open_store

    with open_store(settings.db_path, write=True) as con:
        return data.delete(con, args.dataset)


def demo(args, settings) -> list[dict]:
    """Add the synthetic demo (:mod:`analytics.ingest.demo`): the ingest report, one object per
    dataset (``duplicate`` when it is already stored)."""
    from analytics.services import data, open_store

    with open_store(settings.db_path, write=True) as con:
        return data.add_synthetic_demo(con)


def pull(args, settings):
    """Download a registry file (or list the registry)."""
    from analytics.services import data

    if args.list or not args.name:
        return [{k: r[k] for k in ("name", "url", "licence", "citation", "sha256")}
                for r in data.registry()]
    return data.pull(args.name, args.dest or settings.data_dir, args.url,
                     allow_insecure=args.insecure_url)


def migrate(args, settings) -> dict:
    """Migrate the store (:func:`analytics.store.migrate_file`): ``{"store",
    "schema_version_before", "schema_version", "migrated"}``."""
    from analytics import store

    before, after = store.migrate_file(settings.db_path)
    return {"store": str(settings.db_path), "schema_version_before": before,
            "schema_version": after, "migrated": after != before}


def export(args, settings) -> dict:
    """Write a dataset to a file (:func:`analytics.services.data.export_file`)."""
    from analytics.services import data, open_store

    fmt = args.format or ("parquet" if args.out.suffix == ".parquet" else "csv")
    with open_store(settings.db_path) as con:
        return data.export_file(con, args.dataset, args.out, fmt)


def sweeps(args, settings) -> list[dict]:
    """The ``sweep_runs`` ledger (:func:`analytics.services.data.sweep_ledger`)."""
    from analytics.services import data, open_store

    with open_store(settings.db_path) as con:
        return data.sweep_ledger(con, args.analysis)
