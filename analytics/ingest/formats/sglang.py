"""SGLang ``python -m sglang.bench_serving ... --output-file x.jsonl`` results -> ``bench_runs``.

Source: sgl-project/sglang ``python/sglang/bench_serving.py`` (Apache-2.0): every run appends
one JSON object to the output file, so a file is JSON Lines, one run per line, each becoming
one row. Keys read (SGLang's names): ``backend``, ``dataset_name``, ``request_rate`` (req/s;
``Infinity`` / ``"inf"`` = every request at once -> empty), ``max_concurrency`` (null when not
set), ``concurrency`` (SGLang's *measured* mean number of requests in flight: the sum of e2e
latencies / duration), ``duration`` (s), ``completed``, ``total_input_tokens``,
``total_output_tokens``, ``request_throughput``, ``output_throughput`` (output tok/s),
``median_ttft_ms`` (else ``mean_ttft_ms``), ``median_itl_ms`` (else ``median_tpot_ms``),
``median_e2e_latency_ms``, ``mean_e2e_latency_ms``, the tail percentiles it writes
(:data:`TAILS`), and ``model_id`` / ``tokenizer_id`` where the SGLang version writes them.

``concurrency`` column: ``max_concurrency`` when set (configured, ``concurrency_measured``
false); otherwise SGLang's measured ``concurrency`` (or, when absent, Little's law: request
throughput x mean e2e latency), ``concurrency_measured`` true. Lengths are ``total_*_tokens /
completed``. The file says nothing about the hardware, tensor parallelism or precision: they
come from :class:`analytics.config.ParseOptions` (``headroom ingest --hardware H100 --tp 1
--precision bf16``, the Data page's Parse options); without a hardware the file is refused
with "SGLang results carry no hardware: give --hardware". No power is measured.
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

#: SGLang's tail percentiles (``bench_serving.py`` writes p99 TTFT, p95 / p99 ITL, p90 / p99
#: e2e and median / p99 TPOT): bench_runs column -> (its key, factor to the column's unit).
TAILS = {"ttft_p90_ms": ("p90_ttft_ms", 1.0), "ttft_p99_ms": ("p99_ttft_ms", 1.0),
         "itl_p90_ms": ("p90_itl_ms", 1.0), "itl_p99_ms": ("p99_itl_ms", 1.0),
         "tpot_ms": ("median_tpot_ms", 1.0), "tpot_p99_ms": ("p99_tpot_ms", 1.0),
         "latency_p90_s": ("p90_e2e_latency_ms", 1e-3),
         "latency_p99_s": ("p99_e2e_latency_ms", 1e-3)}

#: Message of a file ingested without a hardware (the CLI option and the Data page field).
NO_HARDWARE = ("SGLang results carry no hardware: give --hardware (e.g. `headroom ingest "
               "--hardware H100 --tp 1 --precision bf16 x.jsonl`), or fill the GPU field of the "
               "Data page's Parse options")


class SGLangBench:
    """SGLang ``bench_serving`` JSON Lines -> ``bench_runs`` (one row per run)."""

    NAME = "sglang_bench"
    TABLE = TABLE
    SOURCE_COLUMNS = {
        "model": "model_id", "in_len": "total_input_tokens / completed",
        "out_len": "total_output_tokens / completed", "request_rate": "request_rate",
        "concurrency": "max_concurrency (else concurrency, measured)",
        "throughput_tok_s": "output_throughput", "ttft_ms": "median_ttft_ms",
        "itl_ms": "median_itl_ms", "latency_s": "median_e2e_latency_ms",
        "failed_requests": "failed (else num_prompts - completed)",
        "failed_share": "failed / (completed + failed)",
        **{col: key + (" / 1000" if scale != 1.0 else "") for col, (key, scale) in TAILS.items()}}

    @staticmethod
    def detect(name: str, head: str) -> bool:
        first = head.lstrip()
        return first.startswith("{") and '"output_throughput"' in head and (
            '"median_e2e_latency_ms"' in head or '"mean_e2e_latency_ms"' in head)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        records, left_out = completed_runs(
            json_records(Path(path), display, "SGLang bench_serving run"), display)
        hw_raw = opts.hardware or next((d.get("hardware") or d.get("gpu") for _, d in records
                                        if d.get("hardware") or d.get("gpu")), None)
        if not hw_raw:
            raise FormatError(display, records[0][0], "hardware", NO_HARDWARE)
        recs, measured_lines, fail_notes = [], [], []
        for line, doc in records:
            rec = _record(doc, line, display, opts, str(doc.get("hardware") or hw_raw))
            recs.append(rec)
            if rec["failed_requests"]:
                fail_notes.append(failure_note(rec, line))
            if rec["concurrency_measured"]:
                measured_lines.append(line)
        frame = finish_frame(recs, display)
        notes: list = [f"{len(recs)} SGLang run(s), one per JSON line; no power measured",
                       *fail_notes, *([left_out] if left_out else [])]
        assumed = [f"hardware assumed: {frame['hardware'][0]} (given at ingest: the file "
                   "carries none)" if not any(d.get("hardware") or d.get("gpu")
                                              for _, d in records) else None,
                   f"precision assumed: {frame['precision'][0]}"
                   + ("" if opts.precision else " (the file gives none; --precision)")]
        assumed += failure_assumptions(records)
        if opts.tp is None and not any("tp" in d for _, d in records):
            assumed.append("tensor parallel assumed: tp = 1 (not in the file; give --tp)")
        if measured_lines:
            notes.append(Note(
                "no max_concurrency: concurrency is SGLang's MEASURED mean number of requests "
                "in flight (concurrency_measured = true); the request rate is kept as a rate",
                column="concurrency", lines=measured_lines[:20], count=len(measured_lines)))
        return Parsed(TABLE, SGLangBench.NAME, frame, display, 0.0, tuple(notes),
                      assumptions=tuple(a for a in assumed if a),
                      sources=file_sources(SGLangBench.SOURCE_COLUMNS, frame, records))


def _load(doc: dict, line: int, display: str
          ) -> tuple[float | None, float | None, bool | None]:
    """(request_rate req/s or None when unbounded, concurrency, measured) of one run.

    ``max_concurrency`` when set; else SGLang's measured ``concurrency``; else Little's law
    (Little 1961, L = lambda W): ``request_throughput`` (req/s) x ``mean_e2e_latency_ms`` / 1000.
    """
    raw_rate = doc.get("request_rate")
    rate = None
    if raw_rate is not None and str(raw_rate).strip().lower() not in ("inf", "infinity", "null"):
        rate = cell_number(raw_rate, display, line, "request_rate", positive=True)
    raw_max = doc.get("max_concurrency")
    if raw_max is not None and str(raw_max).strip().lower() not in ("", "null", "none"):
        return rate, cell_number(raw_max, display, line, "max_concurrency", positive=True), False
    measured = cell_number(doc.get("concurrency"), display, line, "concurrency", required=False)
    if measured is None:
        tput = cell_number(doc.get("request_throughput"), display, line, "request_throughput",
                           required=False)
        e2e = cell_number(doc.get("mean_e2e_latency_ms"), display, line, "mean_e2e_latency_ms",
                          required=False)
        measured = tput * e2e / 1000.0 if tput and e2e else None
    return rate, measured, True if measured is not None else None


def _record(doc: dict, line: int, display: str, opts, hw_raw: str) -> dict:
    """One SGLang run as a ``bench_runs`` record. Raises FormatError naming line and key."""
    completed = cell_number(doc.get("completed"), display, line, "completed", positive=True)
    tput = cell_number(doc.get("output_throughput"), display, line, "output_throughput",
                       positive=True)
    rate, conc, measured = _load(doc, line, display)
    tp = int(cell_number(doc.get("tp", opts.tp or 1), display, line, "tp", positive=True))
    hw = hardware.normalise(hw_raw)
    model = doc.get("model_id") or doc.get("model") or doc.get("tokenizer_id")
    e2e = cell_number(doc.get("median_e2e_latency_ms"), display, line, "median_e2e_latency_ms",
                      required=False)
    params = params_from_name(str(model or ""))
    return {
        "source": "sglang bench_serving", "task": "sglang-serve", "hardware": hw,
        "gpu_mem_gb": hardware.memory_gb(hw), "n_gpus": tp, "tp": tp, "pp": 1,
        "precision": hardware.precision(doc.get("precision") or opts.precision),
        "framework": "SGLang", "model": model, "params_b": params, "active_params_b": params,
        "in_len": cell_number(doc.get("total_input_tokens"), display, line,
                              "total_input_tokens") / completed,
        "out_len": cell_number(doc.get("total_output_tokens"), display, line,
                               "total_output_tokens") / completed,
        "concurrency": conc, "concurrency_measured": measured, "request_rate": rate,
        "throughput_tok_s": tput,
        "ttft_ms": cell_number(doc.get("median_ttft_ms", doc.get("mean_ttft_ms")), display, line,
                               "median_ttft_ms"),
        "itl_ms": cell_number(doc.get("median_itl_ms", doc.get("median_tpot_ms")), display, line,
                              "median_itl_ms", required=False),
        "latency_s": None if e2e is None else e2e / 1000.0,
        "power_w": None, "energy_per_token_j": None,
        **failure_fields(doc, completed, display, line),
        **tail_fields(doc, TAILS, display, line),
    }
