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

from analytics import grid, ingest, sources, store
from analytics.config import DEFAULT_T0, ParseOptions, Settings, Weights, parse_bin
from analytics.formats import FormatError, format_names


class BadInput(Exception):
    """Turns into exit code 2 with the message on stderr and an error document on stdout."""


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
    p.add_argument("dataset")
    p.add_argument("--bin", default="5min")
    p.add_argument("--w-prompt", type=float, default=1.0)
    p.add_argument("--w-completion", type=float, default=1.0)
    p.add_argument("--exclude-failed", action="store_true")
    p.add_argument("--rows", action="store_true", help="include every bin in the output")
    return ap


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


def _cmd_grid(args, settings) -> dict:
    con = store.connect(settings.db_path)
    try:
        weights = Weights(args.w_prompt, args.w_completion, include_failed=not args.exclude_failed)
        g = grid.demand_grid(con, args.dataset, parse_bin(args.bin), weights)
    finally:
        con.close()
    out = grid.grid_summary(g)
    out["bin_s"] = parse_bin(args.bin)
    if args.rows:
        rows = g.copy()
        rows["ts"] = rows["ts"].astype(str)
        out["rows"] = json.loads(rows.to_json(orient="records"))
    return out


COMMANDS = {"ingest": _cmd_ingest, "datasets": _cmd_datasets, "delete": _cmd_delete,
            "pull": _cmd_pull, "grid": _cmd_grid}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``headroom`` console script. Returns the exit code."""
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
    except (sources.PullError, store.StoreError) as exc:
        return _fail(1, str(exc))
    print(json.dumps(result, indent=2, default=str))
    return 0


def _fail(code: int, message: str, detail: dict | None = None) -> int:
    print(f"headroom: error: {message}", file=sys.stderr)
    print(json.dumps({"error": message, **({"detail": detail} if detail else {})}, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
