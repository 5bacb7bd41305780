"""Envelope atlas on the sweep runner (issue 17 item 5): the local process pool against serial.

Goal (issue 17's goal for sweeps on this 2-core machine): local pool speedup over serial
>= 1.7x in wall time (a pool spends the same CPU, spread over the cores).

Store: the staged demand datasets (``HEADROOM_SHARED_DATA`` or ``../shared/data``): Azure 2023
conv and code traces, BurstGPT week-1 per-minute tokens, Alibaba GenAI LoRA requests and
BurstGPT daily totals (refused: daily bins), in a temporary DuckDB file. The atlas: every bin the
envelope pages offer per dataset x ``--alphas`` x every interval method, default envelope
parameters, no store (every cell computed). Runs alternate serial / local pool ``--repeat``
times; medians are quoted. CPU seconds: ``time.process_time`` of this process plus the cells'
own ``cpu_s`` (the pool's workers are children of the forkserver, not reaped here); "cores
obtained" = cell CPU / wall, printed beside the speedup with the load average before and after.
The first run's hit table (cells at or above target coverage per method) is printed as well.

    python bench/bench_atlas.py [--alphas 0.05,0.1,0.2] [--repeat 1] [--datasets A,B]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics import store  # noqa: E402
from analytics.ingest import files as ingest  # noqa: E402
from analytics.services import atlas  # noqa: E402
from analytics.sweep import cores  # noqa: E402

SHARED = Path(os.environ.get("HEADROOM_SHARED_DATA",
                             Path(__file__).resolve().parents[2] / "shared" / "data"))
FILES = ("azure_llm/AzureLLMInferenceTrace_conv.csv", "azure_llm/AzureLLMInferenceTrace_code.csv",
         "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv",
         "alibaba_gpu_traces/v2026_genai/lora_request_trace.csv",
         "burstgpt/derived/burstgpt1_daily_requests_tokens.csv")


def staged_inputs(folder: Path, datasets: tuple[str, ...]) -> atlas.AtlasInputs:
    db = folder / "atlas.duckdb"
    con = store.connect(db)
    try:
        ingest.ingest_files(con, [ingest.FileIn(SHARED / f, Path(f).name) for f in FILES])
        return atlas.atlas_inputs(con, datasets)
    finally:
        con.close()


def timed(inputs, alphas, backend) -> tuple[float, float, dict]:
    c0, w0 = time.process_time(), time.perf_counter()
    doc = atlas.run_atlas(inputs, alphas, backend=backend)
    wall = time.perf_counter() - w0
    own = time.process_time() - c0
    cells = doc["sweep_run"]["task_cpu_s"]
    return wall, (own + cells if backend == "local" else own), doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--alphas", default="0.05,0.1,0.2")
    ap.add_argument("--repeat", type=int, default=1,
                    help="serial / local pairs (3 for medians: about 6 min on a quiet 2-core host)")
    ap.add_argument("--datasets", default="")
    args = ap.parse_args()
    logging.getLogger().setLevel(logging.WARNING)  # MAPIE logs INFO on the root logger
    alphas = tuple(float(a) for a in args.alphas.split(","))
    datasets = tuple(d for d in args.datasets.split(",") if d)
    print("goal: local pool speedup over serial >= 1.7x wall on 2 cores (issue 17)")
    print(f"cores {cores()}, load before {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        inputs = staged_inputs(Path(tmp), datasets)
    print(f"{len(inputs.cells)} dataset x bin grids x {len(alphas)} alphas = "
          f"{len(inputs.cells) * len(alphas)} cells; {len(inputs.refused)} refused before any "
          "task: " + "; ".join(f"{r['dataset']}: {r['reason']}" for r in inputs.refused))
    runs: dict[str, list] = {"serial": [], "local": []}
    first = None
    for _ in range(args.repeat):
        for backend in ("serial", "local"):
            wall, cpu, doc = timed(inputs, alphas, backend)
            runs[backend].append((wall, cpu, doc["sweep_run"]["task_cpu_s"]))
            first = first or doc
            print(f"  {backend:6s} wall {wall:7.2f} s  CPU {cpu:7.2f} s  cell CPU "
                  f"{doc['sweep_run']['task_cpu_s']:7.2f} s  workers {doc['sweep_run']['workers']}")
    med = {b: [statistics.median(x[i] for x in r) for i in range(3)] for b, r in runs.items()}
    speed = med["serial"][0] / med["local"][0]
    print(f"median serial: wall {med['serial'][0]:.2f} s, CPU {med['serial'][1]:.2f} s")
    print(f"median local:  wall {med['local'][0]:.2f} s, CPU {med['local'][1]:.2f} s, cores "
          f"obtained {med['local'][2] / med['local'][0]:.2f}")
    print(f"local pool speedup over serial (wall, median of {args.repeat}): {speed:.2f}x "
          f"(goal >= 1.7x)")
    print(f"load after {os.getloadavg()}")
    print("cells at or above target coverage per method (first run):")
    for method, h in first["hits"].items():
        gap = "n/a" if h["mean_gap_pp"] is None else f"{h['mean_gap_pp']:+.1f} pp"
        print(f"  {method:16s} {h['hit_target']:3d} of {h['cells']:3d} measured "
              f"({h['refused']} refused), mean gap {gap}")


if __name__ == "__main__":
    main()
