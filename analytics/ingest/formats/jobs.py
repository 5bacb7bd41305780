"""Batch job history -> ``jobs``.

MIT SuperCloud Slurm accounting export (``slurm-log-queueing-clean.csv``; MIT SuperCloud
Datacenter Challenge, Samsi et al., HPEC 2021; third-party extract, see SOURCES.md):

* ``time_submit`` / ``time_start`` / ``time_end``: epoch seconds (UTC); a start or end of 0
  means the job never started / ended and is stored empty.
* GPUs: the Slurm trackable resources the job *requested*, ``tres_req``, as ``ID=count`` pairs;
  the dataset README maps 1001 -> ``gpu:tesla`` and 1002 -> ``gpu:volta`` (V100), so ``n_gpus``
  is the sum of those counts and ``gpu_kind`` the kind(s) present; 0 GPUs otherwise.
  (``tres_alloc`` is not used: 33 jobs carry a GPU allocation they did not request.)
* ``state``: Slurm's numeric job-state enum, decoded as 0 PENDING, 1 RUNNING, 2 SUSPENDED,
  3 COMPLETED, 4 CANCELLED, 5 FAILED, 6 TIMEOUT, 7 NODE_FAIL, 8 PREEMPTED, 9 BOOT_FAIL,
  10 DEADLINE, 11 OUT_OF_MEMORY; other codes are kept as ``STATE_<n>``.
* ``job_id`` and ``user_hash``: the export wrote ids as floats (some collide after rounding);
  they are kept as the text in the file.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

import polars as pl

from analytics.ingest.formats._common import (
    ROW,
    FormatError,
    Parsed,
    header_fields,
    open_text,
    read_csv_checked,
)

SLURM_STATES = {0: "PENDING", 1: "RUNNING", 2: "SUSPENDED", 3: "COMPLETED", 4: "CANCELLED",
                5: "FAILED", 6: "TIMEOUT", 7: "NODE_FAIL", 8: "PREEMPTED", 9: "BOOT_FAIL",
                10: "DEADLINE", 11: "OUT_OF_MEMORY"}
GPU_TRES = {"1001": "tesla", "1002": "volta"}


def _gpus(tres: str | None) -> tuple[int, str | None]:
    n, kinds = 0, []
    for pair in (tres or "").split(","):
        key, _, val = pair.partition("=")
        if key.strip() in GPU_TRES:
            n += int(val)
            kinds.append(GPU_TRES[key.strip()])
    return n, ("+".join(sorted(set(kinds))) or None)


class MITSupercloud:
    """MIT SuperCloud Slurm accounting export -> ``jobs``."""

    NAME = "mit_supercloud_slurm"
    TABLE = "jobs"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = header_fields(head)
        return {"id_job", "time_submit", "tres_req", "state"} <= set(fields)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(
            path, display,
            {"id_job": pl.String, "id_user": pl.String, "time_submit": pl.Float64,
             "time_start": pl.Float64, "time_end": pl.Float64, "state": pl.Int64,
             "tres_req": pl.String},
            optional={"exit_code": pl.Int64},
        )
        for col in ("time_submit", "time_start", "time_end"):
            bad = (frame[col] < 0) | (frame[col] > 4.1e9)
            if bad.any():
                idx = int(bad.arg_true()[0])
                raise FormatError(display, 2 + int(frame[ROW][idx]), col,
                                  f"{frame[col][idx]} is not an epoch second")
        decoded = []
        for row, tres in zip(frame[ROW].to_list(), frame["tres_req"].to_list(), strict=True):
            try:
                decoded.append(_gpus(tres))
            except ValueError as exc:
                raise FormatError(display, 2 + int(row), "tres_req",
                                  f"{tres!r}: a GPU count is not an integer") from exc

        def epoch(col: str) -> pl.Expr:
            c = pl.col(col)
            return pl.when(c > 0).then(pl.from_epoch((c * 1e6).round().cast(pl.Int64), "us"))

        out = frame.select(
            pl.col("id_job").alias("job_id"),
            epoch("time_submit").alias("submit_ts"),
            epoch("time_start").alias("start_ts"),
            epoch("time_end").alias("end_ts"),
            pl.Series("n_gpus", [d[0] for d in decoded], dtype=pl.Int32),
            pl.Series("gpu_kind", [d[1] for d in decoded], dtype=pl.String),
            pl.col("state").replace_strict(SLURM_STATES, default=None, return_dtype=pl.String)
            .fill_null(pl.format("STATE_{}", pl.col("state"))).alias("state"),
            (pl.col("exit_code") if "exit_code" in frame.columns else pl.lit(None))
            .cast(pl.Int32).alias("exit_code"),
            pl.col("id_user").alias("user_hash"),
        )
        n_gpu = int((out["n_gpus"] > 0).sum())
        return Parsed("jobs", MITSupercloud.NAME, out, display, 1.0, (
            f"{n_gpu} of {out.height} jobs request GPUs (tres 1001 gpu:tesla / 1002 gpu:volta)",
            "job and user ids were floats in the export; kept as text",
        ))


class Sacct:
    """Slurm ``sacct --parsable2`` output -> ``jobs``.

    Run e.g. ``sacct -a -X --parsable2 --format=JobID,User,Submit,Start,End,State,ExitCode,
    AllocTRES,ReqTRES -S 2024-01-01``. ``|``-separated with a header; job steps (``123.batch``)
    are skipped; ``Unknown`` / ``None`` times are empty; times are the cluster's local time, read
    as UTC. GPUs come from ``gres/gpu[:kind]=n`` in ``AllocTRES`` (else ``ReqTRES``); ``State``
    keeps its first word (``CANCELLED by 123`` -> ``CANCELLED``); ``ExitCode`` ``2:0`` -> 2; the
    user name is stored only as a sha256 prefix (``user_hash``).
    """

    NAME = "slurm_sacct"
    TABLE = "jobs"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        first = head.splitlines()[0] if head else ""
        cols = first.split("|")
        return "JobID" in cols and "Submit" in cols and "State" in cols

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        recs = []
        with open_text(path) as fh:
            header = fh.readline().rstrip("\r\n").split("|")
            for need in ("JobID", "Submit", "State"):
                if need not in header:
                    raise FormatError(display, 1, need, f"missing column {need!r}")
            for lineno, line in enumerate(fh, start=2):
                if not line.strip():
                    continue
                cells = line.rstrip("\r\n").split("|")
                if len(cells) != len(header):
                    raise FormatError(display, lineno, min(len(cells), len(header)) + 1,
                                      f"row has {len(cells)} fields, header has {len(header)}")
                row = dict(zip(header, cells, strict=True))
                if "." in row["JobID"]:
                    continue  # a job step, not a job
                times = {}
                for col in ("Submit", "Start", "End"):
                    raw = row.get(col, "")
                    if raw in ("", "Unknown", "None"):
                        times[col] = None
                        continue
                    try:
                        times[col] = datetime.fromisoformat(raw)
                    except ValueError as exc:
                        raise FormatError(display, lineno, col,
                                          f"{raw!r} is not YYYY-MM-DDTHH:MM:SS") from exc
                if times["Submit"] is None:
                    raise FormatError(display, lineno, "Submit", "empty submit time")
                tres = row.get("AllocTRES") or row.get("ReqTRES") or ""
                n, kinds = 0, []
                for m in re.finditer(r"gres/gpu(?::([\w.-]+))?=(\w+)", tres):
                    try:
                        n += int(m.group(2))
                    except ValueError as exc:
                        raise FormatError(display, lineno, "AllocTRES",
                                          f"GPU count {m.group(2)!r} is not an integer") from exc
                    if m.group(1):
                        kinds.append(m.group(1))
                code = row.get("ExitCode", "")
                user = row.get("User", "")
                recs.append({
                    "job_id": row["JobID"], "submit_ts": times["Submit"],
                    "start_ts": times["Start"], "end_ts": times["End"], "n_gpus": n,
                    "gpu_kind": "+".join(sorted(set(kinds))) or None,
                    "state": row["State"].split(" ")[0] or None,
                    "exit_code": int(code.split(":")[0]) if code.split(":")[0].isdigit()
                    else None,
                    "user_hash": hashlib.sha256(user.encode()).hexdigest()[:16] if user
                    else None,
                })
        if not recs:
            raise FormatError(display, 2, 1, "no jobs (only steps or no rows)")
        return Parsed("jobs", Sacct.NAME, pl.DataFrame(recs), display,
                      1.0, ("job steps skipped; user names stored as sha256 prefixes; times read "
                            "as UTC",))
