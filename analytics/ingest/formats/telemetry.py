"""GPU telemetry files -> ``telemetry``; AcmeTrace distributions -> ``reference_cdf``.

* ``nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv[,noheader][,nounits]``:
  comma-and-space separated; the header names the query fields, with ``[W]``, ``[MiB]``,
  ``[%]``, ``[MHz]`` unit suffixes unless ``nounits``; values may carry the same units or not.
  A log written with ``noheader`` (its first row is data: a ``YYYY/MM/DD HH:MM:SS`` cell) needs
  the field list it was written with (``ParseOptions.fields``, CLI ``--fields``); without one it
  is refused at line 1 with the header it needs. ``timestamp`` is ``YYYY/MM/DD HH:MM:SS[.fff]``
  in the host's local time without a zone: with ``--tz`` it is converted to UTC (each GPU's
  samples in file order; the repeated DST hour's second pass, after the clock steps back or
  repeats, is standard time; a skipped-hour time moves forward by the gap); without it, read as
  UTC and rows where a GPU's clock steps back or repeats are named. Needs
  ``timestamp`` and ``index``; maps ``power.draw``, ``utilization.gpu``, ``memory.used``,
  ``temperature.gpu``, ``clocks.sm``, ``clocks.mem``, ``clocks_event_reasons.active`` /
  ``clocks_throttle_reasons.active`` and ``total_energy_consumption`` (the NVML energy counter,
  mJ unless the header says ``[J]``) when present. A GPU is (host, index, UUID): ``host`` is a
  ``host`` / ``hostname`` / ``node`` column of a log joined from several hosts, else ``--site``,
  else the file stem; ``uuid`` (else ``pci.bus_id``) goes to ``gpu_uuid``. A repeat of the
  header line (logs joined with ``cat``) is skipped.
* Sentinels (any bracketed value such as ``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``,
  ``[GPU is lost]``, and bare ``N/A`` or an empty cell) are NULL, never 0, with a warning naming
  line and column. A cumulative counter (``energy_j``) that drops below the GPU's previous
  sample (driver reload, node restart, wrap) is a reset: a warning names the line; analyses take
  reset-aware deltas (:func:`analytics.telemetry.counter_deltas`). The same (time, GPU) on two
  rows is warned about (a log joined from hosts without a host column or ``uuid``).
* DCGM exporter text: :mod:`analytics.ingest.formats.dcgm`.
* AcmeTrace ``acme_power_util_cdf.csv`` (``source_pkl, cluster, metric, cdf_percent, value``):
  per-cluster CDFs of per-GPU power (W) and utilisation (%), used as reference overlays.
"""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from analytics.config import GAP_STEPS
from analytics.ingest.formats._common import (
    ROW,
    FormatError,
    Note,
    Parsed,
    file_stem,
    header_fields,
    open_text,
    read_csv_checked,
    zone_assumption,
)
from analytics.ingest.localtime import localize_sequence, note_clock_steps
from analytics.timegaps import logging_gaps

_SMI_FIELDS = {
    # power: ``power.draw`` (older drivers; on driver >= 535 it is the 1-s average), else
    # ``power.draw.average``, else ``power.draw.instant`` (nvidia-smi --help-query-gpu)
    "power.draw": "power_w", "power.draw.average": "power_w", "power.draw.instant": "power_w",
    "utilization.gpu": "gpu_util_pct", "memory.used": "mem_used_mib",
    "temperature.gpu": "temp_c", "clocks.sm": "sm_clock_mhz", "clocks.current.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz", "clocks.current.memory": "mem_clock_mhz",
    "clocks_event_reasons.active": "throttle_reasons",
    "clocks_throttle_reasons.active": "throttle_reasons",
    "total_energy_consumption": "energy_j",
}
_HOST_FIELDS = ("host", "hostname", "node")
_TS_CELL = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?$")
_UNITS = re.compile(r"\s*(W|mW|MiB|%|MHz|mJ|J)$")
#: Cumulative counters among the telemetry columns (reset-aware deltas, reset warnings).
COUNTERS = ("energy_j",)
#: The header a header-less log needs, shown when it is refused (an example --query-gpu list).
EXAMPLE_FIELDS = "timestamp,index,power.draw,utilization.gpu,memory.used"


def is_sentinel(cell: str) -> bool:
    """nvidia-smi's "no value" cells: any ``[...]`` text, ``N/A``, or an empty cell."""
    return not cell or cell == "N/A" or (cell.startswith("[") and cell.endswith("]"))


def _split_header(line: str) -> tuple[list[str], dict[str, str]]:
    """Field names (lower case, unit suffix dropped) and the unit each one named."""
    names, units = [], {}
    for f in line.rstrip("\r\n").split(","):
        m = re.match(r"^\s*(.*?)\s*(?:\[(.*?)\])?\s*$", f)
        name = m.group(1).lower()
        names.append(name)
        if m.group(2):
            units[name] = m.group(2)
    return names, units


def _is_data_row(line: str) -> bool:
    """Whether the line is an nvidia-smi data row (a timestamp cell), not a header."""
    return any(_TS_CELL.match(c.strip()) for c in line.split(","))


class NvidiaSmi:
    NAME = "nvidia_smi"
    TABLE = "telemetry"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        first = head.splitlines()[0] if head.strip() else ""
        if first.count(",") >= 2 and _is_data_row(first):
            return True  # --format=csv,noheader: the fields come from ParseOptions.fields
        fields = _split_header(first)[0] if first else []
        return "timestamp" in fields and "index" in fields and any(f in _SMI_FIELDS
                                                                   for f in fields)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        header, units, first_line, remarks = _smi_layout(path, display, opts)
        sentinels: dict[tuple[str, str], list[int]] = {}
        errors: list[tuple[int, str]] = []
        recs = [_smi_record(line, cells, units, display, sentinels)
                for line, cells in _smi_rows(path, display, header, first_line, errors)]
        if not recs:
            raise FormatError(display, first_line, 1, "no samples in the log")
        host = opts.site or file_stem(display)
        frame = pl.DataFrame(recs, infer_schema_length=None)
        if "host" not in frame.columns:
            frame = frame.with_columns(pl.lit(host).alias("host"))
        else:
            frame = frame.with_columns(pl.col("host").fill_null(host))
            host = ", ".join(sorted(frame["host"].unique().to_list()))
        frame = frame.with_columns((pl.col("__line") - 2).alias(ROW))  # header_line=1 lines
        frame, clock_notes = _smi_clock(frame, opts.tz)
        field_of: dict[str, str] = {}
        for f, col in _SMI_FIELDS.items():
            if f in header:
                field_of.setdefault(col, f)
        unused = [f for f, col in _SMI_FIELDS.items() if f in header and field_of[col] != f]
        if unused:
            remarks.append("; ".join(f"{_SMI_FIELDS[f]} from {field_of[_SMI_FIELDS[f]]}, not "
                                     f"{f} (also in the log)" for f in unused))
        notes = [*sentinel_notes(sentinels), *clock_notes, *_error_note(errors),
                 *sample_notes(frame, lambda col: field_of.get(col, col))]
        sources = {"ts": "timestamp", "gpu_id": "index",
                   **{col: f + (f" [{units[f]}]" if f in units else "")
                      for col, f in field_of.items()}}
        for f in ("uuid", "pci.bus_id"):
            if f in header:
                sources["gpu_uuid"] = f
                break
        host_col = next((f for f in _HOST_FIELDS if f in header), None)
        assumed = [zone_assumption(opts.tz, "nvidia-smi")]
        if host_col:
            sources["host"] = host_col
        elif not opts.site:
            assumed.append(f"host assumed: the log names no host; its GPUs are on host {host!r} "
                           "(the file name; give --site to name it)")
        return Parsed("telemetry", NvidiaSmi.NAME, frame.drop(ROW), display, 1e-3,
                      (*([f"hosts {host}"] if host_col else []), *remarks, *notes),
                      sources=sources,
                      assumptions=tuple(assumed))

    LOCAL_TIMES = True  # nvidia-smi prints the host's local clock without an offset
    TIME_COLUMN = "timestamp"  # the field a time-range refusal names
    SOURCE_COLUMNS = {col: field for field, col in reversed(list(_SMI_FIELDS.items()))}


def _smi_clock(frame: pl.DataFrame, tz: str | None) -> tuple[pl.DataFrame, list]:
    """nvidia-smi local timestamps -> UTC in ``tz`` (each GPU's samples a sequence in file order,
    one per time: :func:`~analytics.ingest.localtime.localize_sequence`), or, without a zone, a
    note on rows where a GPU's clock steps back or repeats (a likely repeated DST hour)."""
    if tz is not None:
        return localize_sequence(frame, "ts", tz, by=["host", "gpu_id"], unique=True,
                                 column="timestamp")
    return frame, note_clock_steps(frame, "ts", by=["host", "gpu_id"], unique=True,
                                   column="timestamp")


def _smi_layout(path, display, opts) -> tuple[list[str], dict[str, str], int, list[str]]:
    """(field names, units by field, first data line, remarks) of an nvidia-smi log: from its
    header, else from ``opts.fields``. Raises FormatError for a header-less log without a field
    list, and for a field list without ``timestamp`` and ``index``."""
    with open_text(path) as fh:
        first = fh.readline()
    given = getattr(opts, "fields", None)
    remarks: list[str] = []
    if _is_data_row(first):
        n = len(first.split(","))
        if not given:
            shape = (EXAMPLE_FIELDS.split(",") + [f"<field {i}>" for i in range(6, n + 1)])[:n]
            raise FormatError(display, 1, 1, (
                f"the log has no header (nvidia-smi --format=csv,noheader; {n} fields a row): "
                "give the --query-gpu field list it was written with, in order (CLI --fields "
                f"{','.join(shape)}; Data page: Parse options > nvidia-smi fields), or add the "
                f"header line it needs, {n} names such as '{', '.join(shape)}' (timestamp and "
                "index are required)"))
        header, units, start = list(given), {}, 1
        remarks.append(f"no header: fields taken from the given list ({', '.join(header)})")
    else:
        header, units = _split_header(first)
        start = 2
        if given and tuple(header) != tuple(given):
            remarks.append("the log has a header; it was used and the given field list ignored")
    for need in ("timestamp", "index"):
        if need not in header:
            raise FormatError(display, 1, need, (
                f"no '{need}' field in {'the field list' if start == 1 else 'the header'} "
                f"({', '.join(header)}); nvidia-smi logs need timestamp and index"))
    return header, units, start, remarks


#: what nvidia-smi prints in place of a GPU's row when it cannot read that GPU (one line, no
#: field separators): "Unable to determine the device handle for GPU0000:3B:00.0: Unknown
#: Error", "GPU is lost", "Failed to initialize NVML", "No devices were found"
_SMI_ERROR = re.compile(r"^(Unable to determine|Unable to|Failed to|No devices|GPU is lost|"
                        r"Unknown Error|NVIDIA-SMI has failed)", re.IGNORECASE)


def _smi_rows(path, display: str, header: list[str], first_line: int,
              errors: list | None = None):
    """(line number, {field: cell}) of each non-blank nvidia-smi data row. An nvidia-smi
    error message on its own line (:data:`_SMI_ERROR`: the one GPU it could not read) is
    skipped and added to ``errors`` as ``(line, text)``."""
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if lineno < first_line or not line.strip():
                continue
            if not _is_data_row(line) and _split_header(line)[0] == header:
                continue  # the header again: logs of several hosts joined with `cat`
            if errors is not None and "," not in line and _SMI_ERROR.match(line.strip()):
                errors.append((lineno, line.strip()[:200]))
                continue
            cells = [c.strip() for c in line.rstrip("\r\n").split(",")]
            if len(cells) != len(header):
                raise FormatError(display, lineno, min(len(cells), len(header)) + 1,
                                  f"row has {len(cells)} fields, the "
                                  f"{'header' if first_line == 2 else 'field list'} has "
                                  f"{len(header)} ({', '.join(header)})")
            yield lineno, dict(zip(header, cells, strict=True))


def _error_note(errors: list[tuple[int, str]]) -> list[Note]:
    """The note naming nvidia-smi error lines skipped in a log (the other GPUs' rows kept)."""
    if not errors:
        return []
    return [Note(f"nvidia-smi error message instead of a sample, skipped (that GPU has no row "
                 f"there; the other rows are kept): {errors[0][1]!r}",
                 lines=[line for line, _ in errors])]


def _smi_time(line: int, raw: str, display: str) -> datetime:
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.strptime(raw, fmt)
        except ValueError:
            continue
    raise FormatError(display, line, "timestamp", f"{raw!r} is not YYYY/MM/DD HH:MM:SS.fff")


def _smi_record(line: int, rec: dict[str, str], units: dict[str, str], display: str,
                sentinels: dict) -> dict:
    """One nvidia-smi row as canonical telemetry values (units stripped, sentinels NULL and
    counted into ``sentinels[(field, cell)]``)."""
    ts = _smi_time(line, rec["timestamp"], display)
    try:
        gpu = int(rec["index"])
    except ValueError as exc:
        raise FormatError(display, line, "index", f"{rec['index']!r} is not an integer") from exc
    out = {"__line": line, "ts": ts, "gpu_id": gpu}
    host = next((rec[f] for f in _HOST_FIELDS if rec.get(f)), None)
    if host is not None:
        out["host"] = host
    uuid, bus = rec.get("uuid", ""), rec.get("pci.bus_id", "")
    if not is_sentinel(uuid):
        out["gpu_uuid"] = uuid
    elif not is_sentinel(bus):
        out["gpu_uuid"] = f"pci:{bus}"
    for field, col in _SMI_FIELDS.items():
        raw = rec.get(field)
        if raw is None or out.get(col) is not None:
            continue
        if is_sentinel(raw):
            sentinels.setdefault((field, raw or "empty cell"), []).append(line)
            continue
        out[col] = _smi_number(line, field, col, raw, units.get(field), display)
    return out


def _smi_number(line: int, field: str, col: str, raw: str, unit: str | None, display: str):
    value = _UNITS.sub("", raw)
    try:
        if col == "throttle_reasons":
            return int(value, 16)
        number = float(value)
    except ValueError as exc:
        raise FormatError(display, line, field, f"{raw!r} is not a number") from exc
    if col == "energy_j":  # the NVML counter is mJ; a header or cell saying J is taken at its word
        return number if (unit == "J" or raw.endswith(" J")) else number * 1e-3
    if col == "power_w" and raw.endswith("mW"):
        return number * 1e-3
    return number


def sentinel_notes(hits: dict[tuple[str, str], list[int]]) -> list[Note]:
    """One warning per (column, sentinel): its lines, the value read as NULL (never 0)."""
    return [Note(f"{cell} read as empty (NULL, not 0)", column=field, lines=lines)
            for (field, cell), lines in sorted(hits.items(), key=lambda kv: kv[1][0])]


def sample_notes(frame: pl.DataFrame, column_of=lambda col: col) -> list[Note]:
    """Warnings about a telemetry frame with a ``__line`` column: counter resets (a cumulative
    column below the same GPU's previous sample) and the same (time, GPU) on several lines.
    ``column_of`` names the file's column for a canonical one."""
    keys = [k for k in ("host", "gpu_id", "gpu_uuid") if k in frame.columns]
    frame = frame.sort([*keys, "ts", "__line"], nulls_last=True)
    notes: list[Note] = []
    for col in COUNTERS:
        if col not in frame.columns:
            continue
        seen = frame.filter(pl.col(col).is_not_null())
        drop = seen.filter(pl.col(col) < pl.col(col).shift(1).over(keys))
        if drop.height:
            lines = sorted(drop["__line"].to_list())
            notes.append(Note(
                "counter reset (the cumulative counter dropped below the GPU's previous "
                "sample: driver reload, restart or wrap); energy after it counts from the new "
                "value (reset-aware deltas), never negative",
                column=column_of(col), lines=lines))
    import numpy as np  # here: the module is imported by every ingest (issue 35 item 3)

    step = frame.with_columns(
        (pl.col("ts").diff().over(keys).dt.total_microseconds() / 1e6).alias("__dt"))
    gaps = pl.concat([part.filter(pl.Series(np.r_[False, logging_gaps(
        part["__dt"].to_numpy()[1:])])) for part in (
        step.partition_by(keys, maintain_order=True) if keys else [step])])
    if gaps.height:
        longest = float(gaps["__dt"].max())
        notes.append(Note(
            f"logging gap: no sample for more than {GAP_STEPS:g} sampling steps before these "
            f"lines (longest {longest:,.0f} s); energy from power counts measured spans only, "
            "the gaps' energy is unknown", column="timestamp",
            lines=sorted(gaps["__line"].to_list())))
    dup = frame.filter(pl.struct([*keys, "ts"]).is_duplicated())
    if dup.height:
        lines = sorted(dup["__line"].to_list())
        notes.append(Note(
            "the same (time, host, GPU) on several lines: the file may join hosts without a "
            "host column, uuid or Hostname label; rows kept as they are", lines=lines))
    return notes


class AcmeCdf:
    NAME = "acmetrace_cdf"
    TABLE = "reference_cdf"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return header_fields(head) == ["source_pkl", "cluster", "metric", "cdf_percent", "value"]

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(path, display, {"source_pkl": pl.String, "cluster": pl.String,
                                                 "metric": pl.String, "cdf_percent": pl.Float64,
                                                 "value": pl.Float64})
        bad = (frame["cdf_percent"] < 0) | (frame["cdf_percent"] > 100)
        if bad.any():
            raise FormatError(display, 2 + int(frame[ROW][int(bad.arg_true()[0])]),
                              "cdf_percent", "outside 0..100")
        out = frame.select(pl.lit("AcmeTrace").alias("source"), "cluster", "metric",
                           "cdf_percent", "value")
        return Parsed("reference_cdf", AcmeCdf.NAME, out, display, 0.0,
                      ("AcmeTrace (NSDI'24) per-cluster CDFs, for reference overlays",))
