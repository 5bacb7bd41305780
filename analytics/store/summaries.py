"""What one dataset holds, in its kind's terms (:func:`dataset_summary`), and where its fields
came from and what its readers assumed (the per-file provenance of ``dataset_files``, schema
15: written by :func:`provenance_json`, read back merged over a dataset's files)."""

from __future__ import annotations

import json

from analytics.schema import Parsed
from analytics.store import attached
from analytics.store.core import _run
from analytics.store.reads import dataset

#: Per dataset kind, the summary aggregates (SQL over that kind's table, one row).
_RUNTIME_S = ("coalesce(elapsed_s, CASE WHEN end_ts > start_ts "
              "THEN epoch(end_ts) - epoch(start_ts) END)")
_SUMMARY_SQL = {
    "requests": """count(*) AS requests, count(*) FILTER (WHERE failed) AS failed_requests,
        sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
        count(*) FILTER (WHERE prompt_tokens IS NULL OR completion_tokens IS NULL)
            AS unknown_token_requests,
        count(DISTINCT model) AS models, sum(gpu_s) AS gpu_s""",
    "demand_series": """count(*) AS bins, min(bin_s) AS bin_s, sum(tokens) AS tokens,
        sum(requests) AS requests""",
    "jobs": f"""count(*) AS jobs, count(*) FILTER (WHERE n_gpus > 0) AS gpu_jobs,
        sum(coalesce(gpu_milli / 1000.0, n_gpus) * {_RUNTIME_S}) / 3600.0 AS gpu_hours,
        count(*) FILTER (WHERE n_gpus > 0 AND {_RUNTIME_S} IS NULL) AS gpu_jobs_without_runtime,
        count(*) FILTER (WHERE mig_slice) AS mig_jobs,
        string_agg(job_id, ', ' ORDER BY job_id) FILTER (WHERE mig_slice) AS mig_job_ids,
        count(*) FILTER (WHERE end_ts < start_ts) AS end_before_start""",
    "telemetry": """count(DISTINCT (host, gpu_id, gpu_uuid)) AS gpus, count(DISTINCT host) AS hosts,
        count(*) AS samples, avg(power_w) AS mean_power_w,
        count(*) FILTER (WHERE power_w IS NULL) AS samples_without_power""",
    "carbon_intensity": """count(DISTINCT (site, basis)) AS series, count(DISTINCT site) AS sites,
        count(DISTINCT basis) AS bases, count(DISTINCT (site, ts)) AS hours,
        count(*) FILTER (WHERE gco2_per_kwh IS NULL) AS empty_values,
        avg(gco2_per_kwh) AS mean_gco2_per_kwh""",
    "weather": """count(DISTINCT site) AS sites, count(*) AS hours,
        count(*) FILTER (WHERE temp_c IS NULL) AS empty_values, avg(temp_c) AS mean_temp_c""",
    "prices": """count(DISTINCT site) AS sites, count(*) AS hours,
        count(*) FILTER (WHERE usd_per_mwh IS NULL) AS empty_values,
        avg(usd_per_mwh) AS mean_usd_per_mwh""",
    "bench_runs": """count(*) AS runs, count(DISTINCT model) AS models,
        string_agg(DISTINCT hardware, ', ' ORDER BY hardware) AS hardware,
        count(*) FILTER (WHERE concurrency_measured) AS measured_concurrency_runs,
        count(*) FILTER (WHERE failed_requests > 0) AS runs_with_failed_requests,
        count(*) FILTER (WHERE failed) AS flagged_failed_runs""",
    "reference_cdf": """count(DISTINCT (source, cluster, metric)) AS curves, count(*) AS points""",
}


def dataset_summary(con, name: str) -> dict:
    """What one dataset holds, in its kind's terms (one row of aggregates).

    ``jobs``: jobs, GPU jobs, GPU-hours (GPUs, or the ``gpu_milli`` share, x the run time:
    Slurm's ``Elapsed`` when the source gives it, else end - start), GPU jobs without a run
    time, MIG-slice jobs and their ids, jobs whose End is before their Start; plus
    ``gpus_per_job`` ``{n_gpus: jobs}``. ``requests``: requests, failed, token sums, requests
    with an unknown token count, models, GPU-seconds. ``telemetry``: GPUs as (host, index,
    UUID), hosts, samples, mean power. Site tables: series, sites, hours, empty values, mean
    (carbon: hours counted once per site and hour, and the mean per basis; the mean over all
    rows is null with a reason when the dataset holds two bases).
    ``bench_runs``: runs, models, hardware. Sums over no rows are None. Every kind:
    ``sources`` (field -> the column of the file it came from) and ``assumptions`` (what the
    reader assumed: start time, interval, zone, basis), over the dataset's files.

    Raises UnknownDataset.
    """
    info = dataset(con, name)
    kind, dataset_id = info["kind"], int(info["dataset_id"])
    with con.cursor() as cur:
        att = attached.attachment(cur, dataset_id) if kind == "requests" else None
        if att is not None and attached.changed_files(att):  # nothing to scan until refreshed
            row = {"rows_unread": "its files changed since they were validated: refresh it"}
        else:
            table = attached.source(cur, dataset_id, name) if att is not None else kind
            cur_ = _run(cur, f"SELECT {_SUMMARY_SQL[kind]} FROM {table} AS rows "
                             "WHERE dataset_id = ?", [dataset_id])
            names = [d[0] for d in cur_.description]
            row = dict(zip(names, cur_.fetchone(), strict=True))
        if kind == "carbon_intensity":
            row["mean_gco2_per_kwh_by_basis"] = {b: m for b, m in _run(
                cur, "SELECT basis, avg(gco2_per_kwh) FROM carbon_intensity WHERE dataset_id = ? "
                     "GROUP BY basis ORDER BY basis", [dataset_id]).fetchall()}
            if row["bases"] > 1:  # one mean over two bases is no figure (issue 27)
                row["mean_gco2_per_kwh"] = None
                row["mean_gco2_per_kwh_null_reason"] = (
                    f"{row['bases']} carbon bases (life-cycle and direct differ): see "
                    "mean_gco2_per_kwh_by_basis")
        if kind == "jobs":
            row["gpus_per_job"] = {int(n): int(c) for n, c in _run(
                cur, "SELECT n_gpus, count(*) FROM jobs WHERE dataset_id = ? AND n_gpus IS NOT "
                     "NULL GROUP BY n_gpus ORDER BY n_gpus", [dataset_id]).fetchall()}
        row.update(_provenance(cur, dataset_id))
    if att is not None:  # left where it lives: what it reads, and whether that moved
        row["attached"] = attached.status(con, name)
    return {"dataset": name, "kind": kind, **row}


def _provenance(cur, dataset_id: int) -> dict:
    """``sources`` (canonical field -> the file's column; a field read from different columns
    in different files lists them joined by `` | ``) and ``assumptions`` (each once, in file
    order; in a dataset of several files, one that not every file made names the files it
    holds for: ``in a.csv, b.csv: ...``) over every file of one dataset (``dataset_files``,
    schema 15; files stored before it recorded neither: ``provenance_unknown_files`` counts
    them)."""
    sources: dict[str, list[str]] = {}
    by: dict[str, list[str]] = {}  # assumption -> the files that made it, in file order
    unknown = known = 0
    for src, ass, file in _run(cur, "SELECT sources, assumptions, file FROM dataset_files "
                                    "WHERE dataset_id = ? ORDER BY added_at, rowid",
                               [dataset_id]).fetchall():
        if src is None:
            unknown += 1
            continue
        known += 1
        for field, col in json.loads(src).items():
            if col not in sources.setdefault(field, []):
                sources[field].append(col)
        for a in json.loads(ass or "[]"):
            by.setdefault(a, []).append(file)
    assumed = [a if len(files) == known else f"in {', '.join(dict.fromkeys(files))}: {a}"
               for a, files in by.items()]
    out = {"sources": {f: " | ".join(c) for f, c in sources.items()}, "assumptions": assumed}
    if unknown:
        out["provenance_unknown_files"] = unknown
    return out


def provenance_json(p: Parsed) -> tuple[str, str]:
    """``(sources, assumptions)`` of a parsed file as the JSON text ``dataset_files`` keeps."""
    return json.dumps(dict(p.sources)), json.dumps(list(p.assumptions))
