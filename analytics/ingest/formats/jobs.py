"""Batch job history -> ``jobs``.

MIT SuperCloud Slurm accounting export (``slurm-log-queueing-clean.csv``; MIT SuperCloud
Datacenter Challenge, Samsi et al., HPEC 2021; third-party extract, see SOURCES.md):

* ``time_submit`` / ``time_start`` / ``time_end``: epoch seconds (UTC by definition: ``--tz``
  does not apply); a start or end of 0 means the job never started / ended and is stored empty.
* GPUs: the Slurm trackable resources the job *requested*, ``tres_req``, as ``ID=count`` pairs;
  the dataset README maps 1001 -> ``gpu:tesla`` and 1002 -> ``gpu:volta`` (V100), so ``n_gpus``
  is the sum of those counts (both ids are typed; no untyped total exists to double count, see
  :func:`count_gpus`) and ``gpu_kind`` the kind(s) present; 0 GPUs otherwise.
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
from datetime import UTC, datetime, timedelta

import polars as pl

from analytics.ingest.formats._common import (
    ROW,
    FormatError,
    Note,
    Parsed,
    check_header_unique,
    header_fields,
    note_rows,
    open_text,
    read_csv_checked,
    zone_assumption,
)
from analytics.ingest.localtime import localize_rows

SLURM_STATES = {0: "PENDING", 1: "RUNNING", 2: "SUSPENDED", 3: "COMPLETED", 4: "CANCELLED",
                5: "FAILED", 6: "TIMEOUT", 7: "NODE_FAIL", 8: "PREEMPTED", 9: "BOOT_FAIL",
                10: "DEADLINE", 11: "OUT_OF_MEMORY"}
GPU_TRES = {"1001": "tesla", "1002": "volta"}


#: a MIG profile as Slurm's gres type names it: ``[<gpu>_]<n>g.<memory>gb`` (``a100_3g.20gb``,
#: ``1g.10gb``; NVIDIA MIG user guide, "Supported MIG profiles")
MIG_PROFILE = re.compile(r"(?:^|[_:])\d+g\.\d+gb$", re.IGNORECASE)


def is_mig(kind: str | None) -> bool:
    """Whether a GPU kind names a MIG slice (``a100_3g.20gb`` -> True, ``h100`` -> False)."""
    return bool(kind) and bool(MIG_PROFILE.search(kind))


def count_gpus(entries: list[tuple[str | None, int]]) -> tuple[int, str | None, bool]:
    """GPUs of one job from its trackable-resource GPU entries, never counting one GPU twice.

    Slurm lists a typed GPU request both by type and as the untyped total (``AllocTRES``
    ``gres/gpu:h100=1,gres/gpu=1`` is ONE GPU; Slurm ``gres.conf`` / ``sacct`` TRES docs), so the
    untyped total is the count when present, else the sum of the typed entries.

    Parameters
    ----------
    entries : ``(kind, count)`` per GPU entry; ``kind`` None for the untyped ``gres/gpu`` total

    Returns
    -------
    (n_gpus, gpu_kind, mig_slice): GPUs (int), the typed kinds joined by ``+`` (None when no
    type is given) and whether any kind is a MIG profile (:func:`is_mig`).
    """
    untyped = [n for kind, n in entries if kind is None]
    typed = [(kind, n) for kind, n in entries if kind is not None]
    total = max(untyped) if untyped else sum(n for _, n in typed)
    kinds = sorted({kind for kind, _ in typed})
    return total, ("+".join(kinds) or None), any(is_mig(k) for k in kinds)


def _gpus(tres: str | None) -> tuple[int, str | None, bool]:
    """GPUs in a MIT SuperCloud ``tres_req`` (``1=20,2=170000,1002=2``): every GPU id it lists
    is typed (1001 ``gpu:tesla``, 1002 ``gpu:volta``; the dataset has no untyped GPU id), so the
    count is their sum (:func:`count_gpus`). Raises ValueError for a non-integer count."""
    entries = []
    for pair in (tres or "").split(","):
        key, _, val = pair.partition("=")
        if key.strip() in GPU_TRES:
            entries.append((GPU_TRES[key.strip()], int(val)))
    return count_gpus(entries)


class MITSupercloud:
    """MIT SuperCloud Slurm accounting export -> ``jobs``."""

    NAME = "mit_supercloud_slurm"
    TABLE = "jobs"
    SOURCE_COLUMNS = {"job_id": "id_job", "submit_ts": "time_submit", "start_ts": "time_start",
                      "end_ts": "time_end", "n_gpus": "tres_req (1001, 1002)",
                      "gpu_kind": "tres_req (1001 tesla, 1002 volta)", "state": "state",
                      "exit_code": "exit_code", "user_hash": "id_user"}

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
            pl.Series("mig_slice", [d[2] for d in decoded], dtype=pl.Boolean),
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
    AllocTRES,ReqTRES,Elapsed -S 2024-01-01``; ``Submit`` may be left out when ``Elapsed`` (or
    ``ElapsedRaw``, whole seconds) is given (``elapsed_s``; times then empty). ``|``-separated
    with a header; job steps (``123.batch``) are skipped; ``Unknown`` / ``None`` times are empty.
    Times are the cluster's local wall clock without an offset (sacct man page, "TIME FORMAT"):
    with ``--tz`` (``ParseOptions.tz``) they are converted to UTC, the repeated / skipped DST
    hour resolved as :func:`sacct_times` says; without it they are read as UTC (an assumption
    the report states) and rows that end before they start are named. Epoch-second times
    (``SLURM_TIME_FORMAT=%s``) are UTC by definition (``--tz`` is then not applied).
    GPUs are the *allocated* ones: ``gres/gpu[:kind]=n`` in ``AllocTRES`` or, in exports of
    Slurm before 20.11, ``gpu[:kind]:n`` in ``AllocGRES``; a job with an empty allocation
    (pending) has 0, its request named in a note; only a file without an allocation column is
    read from ``ReqTRES`` / ``ReqGRES``. The untyped total counts when listed, else the sum of
    the typed entries, never both (:func:`count_gpus`); a MIG type (``gres/gpu:a100_3g.20gb``)
    is kept in ``gpu_kind`` and sets ``mig_slice``; ``State``
    keeps its first word (``CANCELLED by 123`` -> ``CANCELLED``); ``ExitCode`` ``2:0`` -> 2; the
    user name is stored only as a sha256 prefix (``user_hash``).
    """

    NAME = "slurm_sacct"
    TABLE = "jobs"
    SOURCE_COLUMNS = {"n_gpus": "AllocTRES", "elapsed_s": "Elapsed", "submit_ts": "Submit",
                      "start_ts": "Start", "end_ts": "End"}  # messages; parse sets the file's
    LOCAL_TIMES = True  # times without an offset are local in --tz when given

    @staticmethod
    def detect(name: str, head: str) -> bool:
        first = head.splitlines()[0] if head else ""
        cols = first.split("|")
        return "JobID" in cols and "State" in cols and bool(
            {"Submit", "Elapsed", "ElapsedRaw"} & set(cols))

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        recs, n_mig, epoch_line, clock_line = [], 0, None, None
        with open_text(path) as fh:
            header = fh.readline().rstrip("\r\n").split("|")
            check_header_unique(header, display)
            for need in ("JobID", "State"):
                if need not in header:
                    raise FormatError(display, 1, need, f"missing column {need!r}")
            if not {"Submit", "Elapsed", "ElapsedRaw"} & set(header):
                raise FormatError(display, 1, "Submit",
                                  "missing column 'Submit' (or 'Elapsed' / 'ElapsedRaw')")
            gpu_col, req_col = _gpu_columns(header)
            elapsed_col = "Elapsed" if "Elapsed" in header else (
                "ElapsedRaw" if "ElapsedRaw" in header else None)
            unallocated: list[int] = []
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
                    if _EPOCH_S.match(raw):  # SLURM_TIME_FORMAT=%s: epoch seconds, UTC
                        epoch_line = epoch_line or (lineno, col)
                        times[col] = datetime.fromtimestamp(int(raw), UTC).replace(tzinfo=None)
                    else:
                        clock_line = clock_line or (lineno, col)
                        try:
                            times[col] = datetime.fromisoformat(raw)
                        except ValueError as exc:
                            raise FormatError(display, lineno, col, f"{raw!r} is not "
                                              "YYYY-MM-DDTHH:MM:SS or epoch seconds") from exc
                    if epoch_line and clock_line:
                        raise FormatError(display, lineno, col, (
                            "the file mixes epoch-second times (line {}, {}) and date-times "
                            "(line {}, {}); export with one SLURM_TIME_FORMAT").format(
                                *epoch_line, *clock_line))
                if times["Submit"] is None and "Submit" in header:
                    raise FormatError(display, lineno, "Submit", "empty submit time")
                n, kind, mig = _sacct_gpus(row, gpu_col, display, lineno)
                if gpu_col and gpu_col.startswith("Alloc") and not row.get(gpu_col) \
                        and req_col and _sacct_gpus(row, req_col, display, lineno)[0]:
                    unallocated.append(lineno)
                n_mig += mig
                code = row.get("ExitCode", "")
                user = row.get("User", "")
                recs.append({
                    ROW: lineno - 2, "job_id": row["JobID"], "submit_ts": times["Submit"],
                    "start_ts": times["Start"], "end_ts": times["End"], "n_gpus": n,
                    "gpu_kind": kind, "mig_slice": mig,
                    "elapsed_s": _elapsed_s(row.get(elapsed_col, "") if elapsed_col else "",
                                            display, lineno, elapsed_col),
                    "state": row["State"].split(" ")[0] or None,
                    "exit_code": int(code.split(":")[0]) if code.split(":")[0].isdigit()
                    else None,
                    "user_hash": hashlib.sha256(user.encode()).hexdigest()[:16] if user
                    else None,
                })
        if not recs:
            raise FormatError(display, 2, 1, "no jobs (only steps or no rows)")
        epoch = epoch_line is not None
        frame, notes = sacct_times(pl.DataFrame(recs, infer_schema_length=None),
                                   None if epoch else opts.tz)
        warns = ["job steps skipped; user names stored as sha256 prefixes",
                 _GPU_RULE.format(col=gpu_col) if gpu_col else
                 "no AllocTRES / ReqTRES / AllocGRES / ReqGRES column: 0 GPUs on every job"]
        if unallocated:
            warns.append(Note(f"jobs with no allocation in {gpu_col} (pending, or cancelled "
                              f"before they started): 0 GPUs allocated, the request in {req_col} "
                              "not counted", column=gpu_col, lines=unallocated))
        if n_mig:
            warns.append(f"{n_mig} jobs ran on MIG slices (mig_slice; gpu_kind names the MIG "
                         "profile)")
        if "Submit" not in header:
            warns.append(f"no Submit/Start/End columns: times empty, run time from {elapsed_col}")
        if elapsed_col and (off := _elapsed_mismatch(frame)) is not None:
            warns.append(Note(f"{elapsed_col} differs from End - Start by more than 1 s (up to "
                              f"{off[1]:,.0f} s): suspended time, a clock change or an edited "
                              f"file; elapsed_s is {elapsed_col}, the times are kept as read",
                              column=elapsed_col, lines=off[0]))
        if epoch and opts.tz:
            warns.append(f"time zone {opts.tz} not applied: the times are epoch seconds, UTC by "
                         "definition")
        sources = {f: c for f, c in (("submit_ts", "Submit"), ("start_ts", "Start"),
                                     ("end_ts", "End")) if c in header}
        if gpu_col:
            sources.update(n_gpus=gpu_col, gpu_kind=gpu_col, mig_slice=gpu_col)
        if elapsed_col:
            sources["elapsed_s"] = elapsed_col
        sources.update({f: c for f, c in (("state", "State"), ("exit_code", "ExitCode"),
                                          ("user_hash", "User")) if c in header},
                       job_id="JobID")
        assumed = () if epoch or not sources.keys() & {"submit_ts", "start_ts", "end_ts"} \
            else (zone_assumption(opts.tz, "sacct"),)
        return Parsed("jobs", Sacct.NAME, frame, display, 1.0, (*warns, *notes),  # __row: lines
                      sources=sources, assumptions=assumed)


def _elapsed_mismatch(frame: pl.DataFrame) -> tuple[list[int], float] | None:
    """``(lines, largest difference in s)`` of jobs whose ``elapsed_s`` differs from
    ``end_ts - start_ts`` by more than 1 s (both known), or None."""
    diff = ((pl.col("end_ts") - pl.col("start_ts")).dt.total_seconds() - pl.col("elapsed_s")
            ).abs()
    off = frame.filter(diff > 1).select((pl.col(ROW) + 2).alias("line"), diff.alias("d"))
    return None if off.is_empty() else (off["line"].to_list(), float(off["d"].max()))


#: how ``sacct`` GPU counts are read, per column family (Slurm sacct man page: TRES since 20.11
#: replaced the GRES fields; both list ``gpu[:type]`` with a count)
_GPU_RULE = ("GPUs per job from {col}: the untyped GPU total when listed, else the sum of the "
             "typed gpu:<type> entries (never both)")
_EPOCH_S = re.compile(r"^\d{9,11}$")


def _gpu_columns(header: list[str]) -> tuple[str | None, str | None]:
    """``(column GPUs are read from, the request column)`` of a ``sacct`` header: the
    allocation when the export has it (``AllocTRES``, else the pre-20.11 ``AllocGRES``), else
    the request (``ReqTRES`` / ``ReqGRES``); None when no GPU column is present."""
    alloc = next((c for c in ("AllocTRES", "AllocGRES") if c in header), None)
    req = next((c for c in ("ReqTRES", "ReqGRES") if c in header), None)
    return alloc or req, req if alloc else None


_SACCT_TIMES = {"submit_ts": "Submit", "start_ts": "Start", "end_ts": "End"}


def sacct_times(frame: pl.DataFrame, tz: str | None) -> tuple[pl.DataFrame, list]:
    """Job times of a ``sacct`` frame (naive local wall clock, with ``__row``) as naive UTC.

    With ``tz`` (IANA zone of the cluster clock) the times are converted by
    :func:`analytics.ingest.localtime.localize_rows` (Submit <= Start <= End decides an
    ambiguous repeated-hour value; a skipped-hour value moves forward by the gap). Without it
    they stay as written (read as UTC). Either way a Note names the rows still impossible: End
    before Start (by up to an hour: "likely a repeated DST hour"), Start before Submit.

    Returns (frame, notes). Columns absent or all empty are left alone.
    """
    cols = [c for c in _SACCT_TIMES if c in frame.columns]
    frame = frame.with_columns([pl.col(c).cast(pl.Datetime("us")) for c in cols])
    notes: list = []
    if tz is not None and cols:
        frame, notes = localize_rows(frame, cols, tz, names=_SACCT_TIMES)
    if {"start_ts", "end_ts"} <= set(frame.columns):
        back = frame["start_ts"] - frame["end_ts"]
        hour = back <= timedelta(hours=1)
        where = f"even read in {tz}" if tz else "times read as UTC"
        hint = ("" if tz else ": likely a repeated DST hour (clocks set back); give --tz with "
                "the cluster's time zone")
        notes.append(note_rows(frame, (back > timedelta(0)) & hour,
                               f"End before Start ({where}){hint}", "End"))
        notes.append(note_rows(frame, (back > timedelta(0)) & ~hour,
                               f"End more than an hour before Start ({where})", "End"))
    if {"submit_ts", "start_ts"} <= set(frame.columns):
        notes.append(note_rows(frame, frame["start_ts"] < frame["submit_ts"],
                               "Start before Submit" + ("" if tz else " (times read as UTC)"),
                               "Start"))
    return frame, [n for n in notes if n is not None]


_ELAPSED = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")


def _elapsed_s(raw: str, display: str, lineno: int, col: str | None = "Elapsed") -> float | None:
    """Slurm ``Elapsed`` (``[D-][HH:]MM:SS``) or ``ElapsedRaw`` (whole seconds; sacct man page
    "Elapsed", "ElapsedRaw") in seconds; empty -> None. Raises FormatError (line, column) for
    any other text."""
    raw = raw.strip()
    if not raw:
        return None
    if col == "ElapsedRaw":
        if not raw.isdigit():
            raise FormatError(display, lineno, col, f"{raw!r} is not whole seconds")
        return float(raw)
    m = _ELAPSED.match(raw)
    if not m:
        raise FormatError(display, lineno, "Elapsed", f"{raw!r} is not [D-][HH:]MM:SS")
    days, hours, minutes, seconds = m.groups()
    return (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60
            + float(seconds))


_GRES_GPU = re.compile(r"gres/gpu(?::([\w.-]+))?=(-?[\w.]+)")  # "1.5" whole, to refuse it
#: pre-20.11 ``AllocGRES`` / ``ReqGRES``: ``gpu:2``, ``gpu:tesla:4``, ``gpu:tesla:4(IDX:0-3)``
_OLD_GRES_GPU = re.compile(r"(?:^|,)gpu(?::([A-Za-z][\w.-]*))?:(-?[\w.]+?)(?=\(|,|$)")


def _sacct_gpus(row: dict[str, str], col: str | None, display: str,
                lineno: int) -> tuple[int, str | None, bool]:
    """GPUs of one ``sacct`` row from the column ``col`` (:func:`_gpu_columns`) via
    :func:`count_gpus`: TRES ``gres/gpu:a100_3g.20gb=1,gres/gpu=1`` -> ``(1, "a100_3g.20gb",
    True)``; GRES ``gpu:tesla:4(IDX:0-3)`` -> ``(4, "tesla", False)``. With ``AllocTRES`` an
    empty cell falls back to ``ReqTRES`` only when the header has no allocation column. Raises
    FormatError (line, column) for a count that is not an integer or is negative."""
    if col is None:
        return 0, None, False
    pattern = _OLD_GRES_GPU if col.endswith("GRES") else _GRES_GPU
    entries = []
    for m in pattern.finditer(row.get(col) or ""):
        try:
            entries.append((m.group(1), int(m.group(2))))
        except ValueError as exc:
            raise FormatError(display, lineno, col,
                              f"GPU count {m.group(2)!r} is not an integer") from exc
        if entries[-1][1] < 0:
            raise FormatError(display, lineno, col,
                              f"GPU count {m.group(2)} is negative ({m.group(0)})")
    return count_gpus(entries)
