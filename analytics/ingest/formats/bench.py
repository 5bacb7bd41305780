"""Serving benchmarks -> ``bench_runs`` (one row per measured configuration).

Canonical meaning of the columns (all formats):

* ``hardware``: canonical accelerator key (:func:`analytics.hardware.catalog.normalise`), ``gpu_mem_gb``
  its datasheet memory; ``n_gpus`` devices in the run, ``tp`` / ``pp`` tensor / pipeline degrees.
* ``precision``: weight precision (``bf16``, ``fp16``, ``fp8``, ``mxfp4`` ...).
* ``in_len`` / ``out_len``: tokens per request (means where the source gives means);
  ``concurrency``: the configured batch size / maximum number of concurrent sequences, or, where
  ``concurrency_measured`` is true, the measured mean number in flight; ``request_rate``: the
  offered request rate in req/s (a rate, never a concurrency).
* ``throughput_tok_s``: **output** (generated) tokens per second of the whole run;
  ``power_w``: mean power of **all** devices of the run together; ``energy_per_token_j``: joules
  per output token; ``ttft_ms`` / ``itl_ms``: time to first token / inter-token latency;
  ``latency_s``: end-to-end latency of a request (or of the batch, for offline batch runs).
* ``task``: the workload the run served (ML.ENERGY task, ``argonne-offline``, ``vllm-serve``),
  kept because ML.ENERGY does not report input lengths: the task names the prompt distribution.

A field a source does not measure stays empty, never filled in. Formats:

ML.ENERGY leaderboard v2 (``llm_text_generation_runs.csv``, flattened from ``ml-energy/
leaderboard-v2``; Apache-2.0; Chung et al., NeurIPS'25 D&B): no power or input lengths measured;
``energy_per_token_j = Energy/req / Avg Output Tokens``, ``power_w = energy_per_token_j x Token
tput`` (J/token x token/s), ``itl_ms = Avg TPOT x 1000``, ``concurrency = Max BS``; ``params_b``
from the sibling ``llm_text_generation__<task>__models.json`` when present, else from a
``<n>b`` in the model name, else empty.

ML.ENERGY leaderboard v3: :mod:`analytics.ingest.formats.mlenergy_v3`.

Argonne LLM-Inference-Bench (``argonne-lcf/LLM-Inference-Bench`` ``Plots/**.csv``; BSD-3;
Chitty-Venkata et al., 2024): files with ``Hardware, Num of Hardware, Framework, Model, Input
Output Length, Batch Size, ..., Latency, Throughput``. ``Input Output Length`` is used for both
lengths (the benchmark sets them equal); its ``Throughput`` counts input + output tokens
(``batch x 2L / Latency`` on every row checked), so ``throughput_tok_s = Throughput / 2``;
``tp = Num of Hardware`` except where ``Parallelism Type`` says pipeline; precision ``fp16``
unless a ``kv_cache_dtype`` cell says ``Weight = fp8`` or the model is an ``-FP8`` checkpoint.
``avg_power`` is not labelled with a unit: values above 10,000 are milliwatts (a single A100
reading 222,122 cannot be watts) and are divided by 1,000. The quantisation tables whose
``kv_cache_dtype`` holds an unquoted comma are read with a fixed split from the right. TTFT
tables (``Input Length, Output Length, ..., TTFT Latency``) give ``ttft_ms``.

``vllm bench serve --save-result`` JSON: :mod:`analytics.ingest.formats.vllm`.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import polars as pl

from analytics.config import HEAVY_FAILURE_SHARE
from analytics.hardware import catalog as hardware
from analytics.ingest.formats._common import (
    FormatError,
    Note,
    Parsed,
    check_header_unique,
    header_fields,
    open_text,
    wide_csv_fields,
)
from analytics.schema import conform

TABLE = "bench_runs"


def finish_frame(recs: list[dict], display: str) -> pl.DataFrame:
    """Benchmark records as a canonical ``bench_runs`` frame. Raises FormatError if empty."""
    if not recs:
        raise FormatError(display, 2, 1, "no benchmark rows")
    return conform(pl.DataFrame(recs, infer_schema_length=None), TABLE)


def failure_fields(doc: dict, completed: float, display: str, line: int) -> dict:
    """``failed_requests``, ``failed_share`` and ``failed`` of one serving-benchmark result:
    its ``failed`` count (``vllm bench serve``, vLLM PR #26478), else ``num_prompts`` minus
    ``completed`` when the result gives both; the share is of completed + failed, and the run
    is flagged (``failed``) above :data:`analytics.config.HEAVY_FAILURE_SHARE`. Raises
    FormatError naming a count that is not whole or is negative."""
    raw = doc.get("failed")
    if raw is None and doc.get("num_prompts") not in (None, ""):
        sent = whole(cell_number(doc["num_prompts"], display, line, "num_prompts"), display, line,
                     "num_prompts")
        raw = max(sent - int(completed), 0)
    n = whole(cell_number(raw, display, line, "failed", required=False) or 0, display, line,
              "failed")
    if n < 0:
        raise FormatError(display, line, "failed", f"{n} failed requests (negative)")
    share = n / (completed + n)
    return {"failed_requests": n, "failed_share": share, "failed": share > HEAVY_FAILURE_SHARE}


def failure_assumptions(records: list[tuple[int, dict]]) -> list[str]:
    """What :func:`failure_fields` assumed over ``records`` (``(line, result)``): counts taken
    as ``num_prompts - completed`` where a result has no ``failed`` field, and 0 where it has
    neither, naming the lines."""
    inferred = [ln for ln, d in records if d.get("failed") is None
                and d.get("num_prompts") not in (None, "")]
    none = [ln for ln, d in records if d.get("failed") is None
            and d.get("num_prompts") in (None, "")]
    out = []
    if inferred:
        out.append(f"failed requests counted as num_prompts - completed for {len(inferred)} "
                   f"run(s) whose result has no failed field (line {_lines(inferred)})")
    if none:
        out.append(f"no failed requests assumed for {len(none)} run(s) whose result gives "
                   f"neither failed nor num_prompts (line {_lines(none)})")
    return out


def file_sources(static: dict[str, str], frame: pl.DataFrame,
                 records: list[tuple[int, dict]]) -> dict[str, str]:
    """``Parsed.sources`` of a serving-benchmark result file: the fields of ``static`` (the
    format's ``SOURCE_COLUMNS``) the frame has values in, with ``failed_requests`` naming what
    this file's counts came from (``failed``, ``num_prompts - completed``, both, or none)."""
    got = {f: c for f, c in static.items()
           if f in frame.columns and frame[f].null_count() < frame.height}
    given = sum(d.get("failed") is not None for _, d in records)
    counted = sum(d.get("failed") is None and d.get("num_prompts") not in (None, "")
                  for _, d in records)
    got["failed_requests"] = (
        "failed" if given == len(records) else "num_prompts - completed"
        if counted == len(records) else "failed (else num_prompts - completed)"
        if given + counted == len(records) else
        "failed (else num_prompts - completed, else none: 0 assumed)")
    return got


def _lines(lines: list[int]) -> str:
    return ", ".join(map(str, lines[:10])) + (f" and {len(lines) - 10} more"
                                               if len(lines) > 10 else "")


def completed_runs(records: list[tuple[int, dict]], display: str
                   ) -> tuple[list[tuple[int, dict]], Note | None]:
    """``records`` without the runs in which no request completed (``completed`` = 0: every
    request failed, so there is no throughput or latency to keep), and the warning naming
    them. Raises FormatError when no run completed a request."""
    def none_done(doc: dict) -> bool:
        try:
            return float(doc.get("completed")) == 0
        except (TypeError, ValueError):
            return False

    empty = [(ln, d) for ln, d in records if none_done(d)]
    if not empty:
        return records, None
    if len(empty) == len(records):
        ln, d = empty[0]
        raise FormatError(display, ln, "completed", (
            f"no request completed ({d.get('failed', d.get('num_prompts', '?'))} failed): "
            "there is no throughput or latency to keep" + (
                f" in any of the {len(records)} runs" if len(records) > 1 else "")))
    lines = [ln for ln, _ in empty]
    note = Note(f"{len(empty)} run(s) in which every request failed (completed = 0) left out: "
                "no throughput or latency to keep; rerun them", column="completed",
                lines=lines[:20], count=len(lines))
    return [(ln, d) for ln, d in records if not none_done(d)], note


def failure_note(rec: dict, line: int) -> Note:
    """The warning on a run with failed requests (``rec`` a bench record with
    ``failed_requests`` / ``failed_share`` / ``failed``), naming its line: kept usable below
    :data:`~analytics.config.HEAVY_FAILURE_SHARE`, flagged above it."""
    n, share = rec["failed_requests"], rec["failed_share"]
    sent = round(n / share)
    verdict = (f"flagged (failed = true; above {HEAVY_FAILURE_SHARE:.0%}): left out of the "
               "launch advisor's fit" if rec["failed"] else
               f"kept usable (at most {HEAVY_FAILURE_SHARE:.0%} failed)")
    return Note(f"{n} of {sent} requests failed ({share:.1%}); its throughput and latency "
                f"count the {sent - n} successes only; {verdict}", column="failed", lines=[line],
                count=1)


def whole(value: float, display: str, line: int, col: str) -> int:
    """A count (GPUs, parallel degree) as an int; FormatError for a fractional one, which
    ``int()`` would silently cut (the rule of :data:`analytics.schema.RULES`: whole counts)."""
    if value != int(value):
        raise FormatError(display, line, col, f"{value:g} is not a whole number (a count)")
    return int(value)


def cell_number(raw, display: str, line: int, col: str, *, positive: bool = False,
                required: bool = True) -> float | None:
    """A finite number from a cell, or FormatError naming the cell."""
    if raw is None or (isinstance(raw, str) and raw.strip() in ("", "None", "nan", "NaN")):
        if required:
            raise FormatError(display, line, col, "empty value")
        return None
    try:
        val = float(raw)
    except (TypeError, ValueError) as exc:
        raise FormatError(display, line, col, f"{raw!r} is not a number") from exc
    if not math.isfinite(val):
        raise FormatError(display, line, col, f"{raw!r} is not a finite number")
    if val < 0 or (positive and val == 0):
        raise FormatError(display, line, col, f"{raw!r} must be {'> 0' if positive else '>= 0'}")
    return val


def tail_fields(doc: dict, keys: dict[str, tuple[str, float]], display: str,
                line: int) -> dict[str, float | None]:
    """The tail percentiles a result ``doc`` carries: ``keys`` maps a ``bench_runs`` column
    (``ttft_p99_ms``, ...) to the file's key and the factor to its unit (``1e-3``: ms to s);
    None where the file does not write the key. Raises FormatError naming a bad value."""
    out = {}
    for col, (key, scale) in keys.items():
        v = cell_number(doc.get(key), display, line, key, required=False)
        out[col] = None if v is None else v * scale
    return out


def json_records(path: Path, display: str, what: str) -> list[tuple[int, dict]]:
    """The JSON objects of a result file with the line each starts on: one object (a
    ``--save-result`` JSON, pretty-printed or not), a list of objects, or JSON Lines (one
    object per line, as ``--output-file x.jsonl`` / ``--append-result`` append runs).

    ``Infinity`` (Python's ``json.dumps`` of an unbounded request rate) is read as a float.
    Raises FormatError naming the line of invalid JSON or of a value that is not an object;
    ``what`` names the result kind in messages.
    """
    with open_text(Path(path)) as fh:
        text = fh.read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise FormatError(display, exc.lineno, exc.colno, f"invalid JSON: {exc.msg}") from exc
        doc = None  # several values: JSON Lines, one run per line
    if isinstance(doc, dict):
        return [(1, doc)]
    if isinstance(doc, list) and doc and all(isinstance(d, dict) for d in doc):
        return [(1, d) for d in doc]
    if doc is not None:
        raise FormatError(display, 1, 1, f"a {what} is a JSON object (or one per line)")
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(display, lineno, exc.colno,
                              f"invalid JSON on this line of a JSON Lines file (one {what} "
                              f"object per line): {exc.msg}") from exc
        if not isinstance(rec, dict):
            raise FormatError(display, lineno, 1, f"line is not a JSON object (one {what} "
                                                  "per line)")
        out.append((lineno, rec))
    return out


def params_from_name(model: str) -> float | None:
    """Parameter count (billions) written in a model name: ``Llama-2-7b`` -> 7; MoE ``8x7B`` and
    names without a size -> None."""
    if re.search(r"\d+x\d+(\.\d+)?b", model.lower()):
        return None
    m = re.findall(r"(?<![\w.])(\d+(?:\.\d+)?)b(?![a-z])", model.lower().replace("-", " "))
    return float(m[-1]) if m else None


def csv_rows(path: Path, display: str):
    """(line number, cells) of a CSV, skipping blank lines; tolerant of CR/LF mixes."""
    with open_text(path) as fh:
        text = fh.read().replace("\r\n", "\n").replace("\r", "\n")
    lineno = 0
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                with wide_csv_fields():  # a huge cell is named by its column, not "malformed"
                    cells = next(csv.reader([line]))
                yield lineno, cells
            except csv.Error as exc:
                raise FormatError(display, lineno, 1, f"malformed CSV: {exc}") from exc


# --------------------------------------------------------------------------- ML.ENERGY v2
class MLEnergyV2:
    NAME = "mlenergy_v2"
    SOURCE_COLUMNS = {"hardware": "GPU", "model": "Model", "tp": "TP", "pp": "PP",
                      "task": "task", "out_len": "Avg Output Tokens",
                      "concurrency": "Max BS (reqs)", "throughput_tok_s": "Token tput (tok/s)",
                      "itl_ms": "Avg TPOT (s)", "params_b": "the models' JSON (else the name)",
                      "energy_per_token_j": "Energy/req (J) / Avg Output Tokens",
                      "power_w": "Energy/req (J) / Avg Output Tokens x Token tput (tok/s)"}
    TABLE = TABLE
    _COLS = ("Model", "GPU", "TP", "PP", "Energy/req (J)", "Avg TPOT (s)", "Token tput (tok/s)",
             "Avg Output Tokens", "Max BS (reqs)")

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return set(MLEnergyV2._COLS) <= set(header_fields(head))

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        path = Path(path)
        rows = csv_rows(path, display)
        _, header = next(rows)
        check_header_unique(header, display)
        missing = [c for c in MLEnergyV2._COLS if c not in header]
        if missing:
            raise FormatError(display, 1, missing[0], f"missing column {missing[0]!r}")
        params = {}
        for side in path.parent.glob("llm_text_generation__*__models.json"):
            try:
                params.update({k: v.get("params") for k, v in json.loads(side.read_text()).items()})
            except (OSError, ValueError, AttributeError):
                continue
        recs, from_name = [], 0
        for line, cells in rows:
            if len(cells) != len(header):
                raise FormatError(display, line, min(len(cells), len(header)) + 1,
                                  f"row has {len(cells)} fields, header has {len(header)}")
            r = dict(zip(header, cells, strict=True))
            e_req = cell_number(r["Energy/req (J)"], display, line, "Energy/req (J)", positive=True)
            out = cell_number(r["Avg Output Tokens"], display, line, "Avg Output Tokens", positive=True)
            tput = cell_number(r["Token tput (tok/s)"], display, line, "Token tput (tok/s)",
                        positive=True)
            tpot = cell_number(r["Avg TPOT (s)"], display, line, "Avg TPOT (s)", positive=True)
            tp = whole(cell_number(r["TP"], display, line, "TP", positive=True), display, line, "TP")
            pp = whole(cell_number(r["PP"], display, line, "PP", positive=True), display, line, "PP")
            p_b = params.get(r["Model"])
            if p_b is None:
                p_b = params_from_name(r["Model"])
                from_name += p_b is not None
            hw = hardware.normalise(r["GPU"])
            ept = e_req / out
            recs.append({
                "source": "ML.ENERGY v2", "task": r.get("task") or None, "hardware": hw,
                "gpu_mem_gb": hardware.memory_gb(hw), "n_gpus": tp * pp, "tp": tp, "pp": pp,
                "precision": "bf16", "framework": "vLLM", "model": r["Model"],
                "params_b": p_b, "active_params_b": p_b,
                "out_len": out, "concurrency": cell_number(r["Max BS (reqs)"], display, line,
                                                    "Max BS (reqs)", positive=True),
                "throughput_tok_s": tput, "itl_ms": tpot * 1000.0,
                "power_w": ept * tput, "energy_per_token_j": ept, "failed": False,
            })
        frame = finish_frame(recs, display)
        # MoE models (Mixtral 8x7B/8x22B): active parameters are not in the source files
        frame = frame.with_columns(
            pl.when(pl.col("model").str.to_lowercase().str.contains(r"\d+x\d+b"))
            .then(None).otherwise(pl.col("params_b")).alias("active_params_b"))
        warns = ["ML.ENERGY v2 measures no power and no input lengths: power_w = energy per "
                 "token x token throughput; in_len empty",
                 "precision not recorded by v2; its runs are BF16 (leaderboard v2 methodology)"]
        if from_name:
            warns.append(f"{from_name} rows: parameter count read from the model name")
        return Parsed(TABLE, MLEnergyV2.NAME, frame, display, 0.0, tuple(warns))



# --------------------------------------------------------------------------- Argonne
_ARGONNE_BASE = ("Hardware", "Num of Hardware", "Framework", "Model", "Batch Size")


class Argonne:
    NAME = "argonne_bench"
    SOURCE_COLUMNS = {"hardware": "Hardware", "model": "Model", "framework": "Framework",
                      "params_b": "Model (the name)", "power_w": "avg_power",
                      "latency_s": "end_latency (else the latency column)",
                      "precision": "kv_cache_dtype (weight=...)"}
    TABLE = TABLE

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = [f.strip() for f in header_fields(head)]
        return set(_ARGONNE_BASE) <= set(fields) and (
            "Input Output Length" in fields or "Input Length" in fields)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        rows = csv_rows(Path(path), display)
        _, header = next(rows)
        check_header_unique([h.strip() for h in header], display)
        cols = _ArgonneColumns([h.strip() for h in header])
        recs, mw, dropped = [], 0, 0
        for line, cells in rows:
            cells = _argonne_cells(cells, cols, display, line)
            if cells is None:
                dropped += 1
                continue
            rec, in_mw = _argonne_record(dict(zip(cols.header, (c.strip() for c in cells),
                                                  strict=True)), cols, display, line)
            recs.append(rec)
            mw += in_mw
        frame = finish_frame(recs, display)
        frame = frame.with_columns(pl.col("params_b").alias("active_params_b"))
        frame = frame.with_columns(
            pl.when(pl.col("model").str.to_lowercase().str.contains(r"\d+x\d+b"))
            .then(None).otherwise(pl.col("active_params_b")).alias("active_params_b"))
        warns = []
        if "Input Output Length" in cols.idx:
            warns.append("Argonne: Input Output Length used for both lengths")
        if cols.tput:
            warns.append("throughput_tok_s = Throughput x out/(in+out) (output tokens only)")
        over = frame.filter(pl.col("power_w") > 1.1 * pl.col("n_gpus") * pl.col("hardware")
                            .replace_strict({k: s.tdp_w for k, s in hardware.CATALOG.items()},
                                            default=None, return_dtype=pl.Float64)).height
        if over:
            warns.append(f"{over} rows report power above 110% of the datasheet TDP "
                         "(kept as measured)")
        if mw:
            warns.append(f"{mw} avg_power values above 10,000 read as milliwatts (/1000)")
        if dropped:
            warns.append(f"{dropped} ragged rows without their measurement skipped")
        return Parsed(TABLE, Argonne.NAME, frame, display, 0.0, tuple(warns))


class _ArgonneColumns:
    """Which measurement columns an Argonne result table has (header names stripped)."""

    def __init__(self, header: list[str]):
        self.header = header
        self.idx = {h: i for i, h in enumerate(header)}
        self.latency = next((h for h in header if h.lower() == "latency"), None)
        self.tput = next((h for h in header if h.lower() == "throughput"), None)
        self.ttft = "TTFT Latency" if "TTFT Latency" in self.idx else None


def _argonne_cells(cells: list[str], cols: _ArgonneColumns, display: str,
                   line: int) -> list[str] | None:
    """The row's cells matched to the header, or None for a ragged row that only lacks a
    trailing measurement (skipped). Raises FormatError for any other ragged row."""
    header, idx = cols.header, cols.idx
    if len(cells) > len(header) and "kv_cache_dtype" in idx:
        # unquoted comma inside kv_cache_dtype: rejoin the middle from a fixed split
        k = idx["kv_cache_dtype"]
        tail = len(header) - k - 1
        cells = cells[:k] + [",".join(cells[k:len(cells) - tail])] + cells[len(cells) - tail:]
    if len(cells) < len(header):
        # a ragged row: only a trailing measurement may be missing
        if header[len(cells)] in (cols.latency, cols.tput, "end_latency", "avg_power"):
            return None
        raise FormatError(display, line, len(cells) + 1,
                          f"row has {len(cells)} fields, header has {len(header)}")
    if len(cells) > len(header):
        raise FormatError(display, line, len(header) + 1,
                          f"row has {len(cells)} fields, header has {len(header)}")
    return cells


def _argonne_record(r: dict[str, str], cols: _ArgonneColumns, display: str,
                    line: int) -> tuple[dict, bool]:
    """One Argonne row as a ``bench_runs`` record, and whether its power was in milliwatts."""
    n = whole(cell_number(r["Num of Hardware"], display, line, "Num of Hardware", positive=True),
              display, line, "Num of Hardware")
    batch = cell_number(r["Batch Size"], display, line, "Batch Size", positive=True)
    if "Input Output Length" in r:
        in_len = out_len = cell_number(r["Input Output Length"], display, line,
                                "Input Output Length", positive=True)
    else:
        in_len = cell_number(r["Input Length"], display, line, "Input Length", positive=True)
        out_len = cell_number(r["Output Length"], display, line, "Output Length", positive=True)
    lat_col, tput_col, ttft_col = cols.latency, cols.tput, cols.ttft
    latency = cell_number(r[lat_col], display, line, lat_col, positive=True) if lat_col else None
    tput = None
    if tput_col:
        total = cell_number(r[tput_col], display, line, tput_col, positive=True)
        tput = total * out_len / (in_len + out_len)
    ttft_ms = None
    if ttft_col:
        ttft_ms = 1000 * cell_number(r[ttft_col], display, line, ttft_col, positive=True)
    elif lat_col and not tput_col and out_len == 1:
        ttft_ms = 1000 * latency  # one generated token: the latency is the TTFT
    if "end_latency" in r:
        latency = cell_number(r["end_latency"], display, line, "end_latency", positive=True)
    power, in_mw = None, False
    if "avg_power" in r:
        power = cell_number(r["avg_power"], display, line, "avg_power", positive=True)
        if power > 10_000:
            power, in_mw = power / 1000.0, True
    kv = r.get("kv_cache_dtype", "")
    m = re.search(r"weight\s*=\s*(\w+)", kv, re.I)
    prec = hardware.precision(m.group(1)) if m else (
        "fp8" if "fp8" in r["Model"].lower() else "fp16")
    pipeline = "pipeline" in r.get("Parallelism Type", "").lower()
    hw = hardware.normalise(r["Hardware"])
    task = "argonne-offline"  # ablation variants are other workloads, not arms
    if r.get("KV Cache", "").lower().startswith("without"):
        task += "-no-kv-cache"
    if r.get("speculative_decoding", "").lower().startswith("with speculative"):
        task += "-speculative"
    return {
        "source": "Argonne LLM-Inference-Bench", "task": task,
        "hardware": hw, "gpu_mem_gb": hardware.memory_gb(hw), "n_gpus": n,
        "tp": 1 if pipeline else n, "pp": n if pipeline else 1, "precision": prec,
        "framework": r["Framework"], "model": r["Model"],
        "params_b": params_from_name(r["Model"]), "in_len": in_len, "out_len": out_len,
        "concurrency": batch, "throughput_tok_s": tput, "ttft_ms": ttft_ms,
        "latency_s": latency, "power_w": power,
        "energy_per_token_j": power / tput if power and tput else None,
        "failed": False,
    }, in_mw
