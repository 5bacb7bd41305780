"""``vllm bench serve --save-result`` JSON (the format users produce themselves), one result
per file or several appended as JSON Lines (``--append-result``, one run per line): needs the
hardware in the result's metadata (``vllm bench serve ... --metadata hardware=H100 tp=1
precision=bf16``) or given at ingest (``ParseOptions.hardware``, ``tp``, ``precision``; the
file's own values win); throughput is ``output_throughput``, TTFT/ITL the medians, ``request_rate``
the offered rate (req/s, ``inf`` -> empty), the tail percentiles the file writes (:data:`TAILS`:
p90 / p99 TTFT, ITL and e2e, TPOT median and p99), ``concurrency`` is ``max_concurrency`` when set, else
measured by Little's law (request throughput x mean e2e latency) with ``concurrency_measured``
true; lengths are ``total_*_tokens / completed``. ``failed`` requests (vLLM PR #26478) are
kept as ``failed_requests`` and ``failed_share`` (of completed + failed); the figures count the
successes only; a run above :data:`analytics.config.HEAVY_FAILURE_SHARE` is flagged
(``failed``), one below stays usable, and each gets a warning naming its line.

Columns mean what :mod:`analytics.ingest.formats.bench` says.
"""

from __future__ import annotations

from pathlib import Path

from analytics.hardware import catalog as hardware
from analytics.ingest.formats._common import FormatError, Note, Parsed
from analytics.ingest.formats.bench import (
    TABLE,
    cell_number,
    completed_runs,
    failure_assumptions,
    failure_fields,
    failure_note,
    file_sources,
    finish_frame,
    json_records,
    params_from_name,
    tail_fields,
)

#: ``vllm bench serve``'s tail percentiles (it writes p99 by default, others with
#: ``--metric-percentiles``): bench_runs column -> (its key, factor to the column's unit).
TAILS = {"ttft_p90_ms": ("p90_ttft_ms", 1.0), "ttft_p99_ms": ("p99_ttft_ms", 1.0),
         "itl_p90_ms": ("p90_itl_ms", 1.0), "itl_p99_ms": ("p99_itl_ms", 1.0),
         "tpot_ms": ("median_tpot_ms", 1.0), "tpot_p99_ms": ("p99_tpot_ms", 1.0),
         "latency_p90_s": ("p90_e2el_ms", 1e-3), "latency_p99_s": ("p99_e2el_ms", 1e-3)}


class VllmBench:
    NAME = "vllm_bench"
    TABLE = TABLE
    SOURCE_COLUMNS = {
        "model": "model_id", "hardware": "hardware (metadata)", "tp": "tp (metadata)",
        "precision": "precision (metadata)", "in_len": "total_input_tokens / completed",
        "out_len": "total_output_tokens / completed", "request_rate": "request_rate",
        "concurrency": "max_concurrency", "throughput_tok_s": "output_throughput",
        "ttft_ms": "median_ttft_ms", "itl_ms": "median_itl_ms", "latency_s": "median_e2el_ms",
        "power_w": "power_w (metadata)", "failed_requests": "failed (else num_prompts - completed)",
        "failed_share": "failed / (completed + failed)",
        **{col: key + (" / 1000" if scale != 1.0 else "") for col, (key, scale) in TAILS.items()}}

    @staticmethod
    def detect(name: str, head: str) -> bool:
        s = head.lstrip()
        return s.startswith("{") and '"output_throughput"' in head and (
            '"median_ttft_ms"' in head or '"mean_ttft_ms"' in head)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        recs, notes = [], []
        records, left_out = completed_runs(
            json_records(Path(path), display, "vllm bench result"), display)
        if left_out:
            notes.append(left_out)
        for line, doc in records:
            rec, conc_note = _vllm_record(doc, line, display, opts)
            recs.append(rec)
            if rec["failed_requests"]:
                notes.append(failure_note(rec, line))
            if conc_note:
                notes.append(Note(conc_note[0], column="max_concurrency", lines=[line], count=1)
                             if len(records) > 1 else conc_note[0])
        head = ("one configuration per result file" if len(records) == 1 else
                f"{len(records)} runs, one per JSON line")
        given = [line for line, doc in records if not _file_hardware(doc)]
        if given:
            notes.append(Note(f"no hardware in the result: {opts.hardware} as given at ingest",
                              column="hardware", lines=given[:20], count=len(given)))
        frame = finish_frame(recs, display)
        assumed = failure_assumptions(records)
        if given:
            assumed.append(f"hardware assumed: {opts.hardware} (given at ingest) for "
                           f"{len(given)} run(s) whose result names no GPU")
        no_tp = [line for line, doc in records
                 if "tp" not in {**doc, **(doc.get("metadata") or {})}
                 and "tensor_parallel_size" not in doc]
        if no_tp:
            assumed.append(f"tensor parallel assumed: tp = {opts.tp or 1} for {len(no_tp)} "
                           "run(s) that do not give it" + ("" if opts.tp else " (give --tp)"))
        if frame["concurrency_measured"].any():
            assumed.append("concurrency measured, not configured, where max_concurrency is "
                           "absent: Little's law (request throughput x mean e2e latency)")
        return Parsed(TABLE, VllmBench.NAME, frame, display, 0.0,
                      (f"{head}; power_w only if given in metadata", *notes),
                      assumptions=tuple(assumed),
                      sources=file_sources(VllmBench.SOURCE_COLUMNS, frame, records))


def _file_hardware(doc: dict) -> str | None:
    """The GPU a result names (top level or ``--metadata``), or None."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    look = {**doc, **meta}
    return look.get("hardware") or look.get("gpu")


def _vllm_record(doc: dict, line: int, display: str, opts) -> tuple[dict, tuple[str, ...]]:
    """One ``vllm bench serve`` result object (starting on ``line``) as a ``bench_runs`` record,
    and the note on its concurrency. Raises FormatError naming line and field."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    look = {**doc, **meta}
    hw_raw = _file_hardware(doc) or opts.hardware
    if not hw_raw:
        raise FormatError(display, line, "hardware",
                          "the result does not say which GPU ran it: rerun with "
                          "`vllm bench serve ... --save-result --metadata hardware=H100 tp=1 "
                          "precision=bf16` (or add \"hardware\" to the JSON), or give it: "
                          "`headroom ingest --hardware H100 [--tp N --precision bf16]` / the "
                          "GPU field of the Data page's Parse options")
    completed = cell_number(doc.get("completed"), display, line, "completed", positive=True)
    tp = int(cell_number(look.get("tp", look.get("tensor_parallel_size", opts.tp or 1)), display,
                         line, "tp", positive=True))
    n_gpus = int(cell_number(look.get("n_gpus", tp), display, line, "n_gpus", positive=True))
    rate, conc, measured, conc_note = _vllm_load(doc, look, display, line)
    tput = cell_number(doc.get("output_throughput"), display, line, "output_throughput",
                       positive=True)
    power = cell_number(look.get("power_w"), display, line, "power_w", required=False)
    hw = hardware.normalise(str(hw_raw))
    failed = failure_fields(doc, completed, display, line)
    rec = {
        "source": "vllm bench serve", "task": "vllm-serve", "hardware": hw,
        "gpu_mem_gb": hardware.memory_gb(hw), "n_gpus": n_gpus, "tp": tp,
        "pp": int(cell_number(look.get("pp", 1), display, line, "pp", positive=True)),
        "precision": hardware.precision(look.get("precision") or look.get("dtype")
                                        or opts.precision),
        "framework": "vLLM", "model": doc.get("model_id") or look.get("model"),
        "params_b": cell_number(look.get("params_b"), display, line, "params_b", required=False)
        or params_from_name(str(doc.get("model_id") or "")),
        "active_params_b": cell_number(look.get("active_params_b"), display, line,
                                       "active_params_b", required=False),
        "in_len": cell_number(doc.get("total_input_tokens"), display, line, "total_input_tokens")
        / completed,
        "out_len": cell_number(doc.get("total_output_tokens"), display, line,
                               "total_output_tokens") / completed,
        "concurrency": conc, "concurrency_measured": measured, "request_rate": rate,
        "throughput_tok_s": tput,
        "ttft_ms": cell_number(doc.get("median_ttft_ms", doc.get("mean_ttft_ms")), display, line,
                               "median_ttft_ms"),
        "itl_ms": cell_number(doc.get("median_itl_ms", doc.get("median_tpot_ms")), display, line,
                              "median_itl_ms", required=False),
        "latency_s": None if doc.get("median_e2el_ms") is None else
        cell_number(doc["median_e2el_ms"], display, line, "median_e2el_ms") / 1000.0,
        "power_w": power, "energy_per_token_j": power / tput if power else None,
        **failed, **tail_fields(doc, TAILS, display, line),
    }
    if rec["active_params_b"] is None:
        rec["active_params_b"] = rec["params_b"]
    return rec, conc_note


def _vllm_load(doc: dict, look: dict, display: str, line: int = 1
               ) -> tuple[float | None, float | None, bool | None, tuple[str, ...]]:
    """Offered load of a ``vllm bench serve`` result: request rate and concurrency, kept apart.

    ``request_rate`` (req/s; ``inf`` = all requests at once -> None) is a rate, never a
    concurrency. ``max_concurrency`` when set is the configured concurrency; otherwise the mean
    number of requests in flight is measured by Little's law (Little 1961, L = lambda W):
    ``completed / duration`` (req/s, else ``request_throughput``) x ``mean_e2el_ms / 1000`` (s),
    e.g. 3.937 req/s x 9.150 s = 36.0. Values may be strings (``--metadata`` key=value pairs).

    Returns
    -------
    (request_rate, concurrency, concurrency_measured, notes): concurrency None when neither is
    known; notes are warnings for the Parsed record. Raises FormatError naming a bad field.
    """
    raw_rate = look.get("request_rate")
    rate = None
    if not (raw_rate is None or str(raw_rate).strip().lower() in ("inf", "infinity", "null")):
        rate = cell_number(raw_rate, display, line, "request_rate", positive=True, required=False)
    raw_conc = look.get("max_concurrency")
    if raw_conc is not None and str(raw_conc).strip().lower() not in ("", "null", "none"):
        return rate, cell_number(raw_conc, display, line, "max_concurrency", positive=True), False, ()
    latency_ms = cell_number(doc.get("mean_e2el_ms"), display, line, "mean_e2el_ms", required=False)
    duration = cell_number(doc.get("duration"), display, line, "duration", required=False)
    completed = cell_number(doc.get("completed"), display, line, "completed", required=False)
    throughput = (completed / duration if completed and duration else
                  cell_number(doc.get("request_throughput"), display, line, "request_throughput",
                       required=False))
    offered = f"request rate {rate:g} req/s" if rate else "unbounded request rate"
    if not latency_ms or not throughput:
        return rate, None, None, (f"no max_concurrency ({offered}) and no mean_e2el_ms / "
                                  "throughput to measure it: concurrency empty",)
    conc = throughput * latency_ms / 1000.0
    return rate, conc, True, (
        f"no max_concurrency ({offered}): concurrency {conc:.1f} MEASURED by Little's law "
        f"({throughput:.3f} req/s x {latency_ms / 1000.0:.3f} s mean e2e latency), "
        "concurrency_measured = true",)
