"""Sweep runner speed (issue 17): the local process pool against serial on the power sweep, the
Dask overhead per task against the local pool, and the Dask scheduler's throughput.

Goals (issue 17):

* local pool speedup over serial for the power sweep >= 1.7x on 2 cores (wall time: a pool
  spends the same CPU, spread over the cores);
* Dask overhead per task vs the local pool <= 5 ms (median): no-op tasks, wall per task on a
  ``distributed.LocalCluster`` (2 worker processes, 1 thread each, on 127.0.0.1) minus wall per
  task on the local pool;
* scheduler throughput: no-op tasks per second through the cluster.

Power sweep: MIT SuperCloud jobs + BurstGPT week-1 per-minute tokens from the staged data
(``HEADROOM_SHARED_DATA`` or ``../shared/data``), the default scenario (256 GPUs, 7 measured
days + 2 warm-up, FCFS + backfilling, 60-minute checkpoints), 11 shares x 2 utilisations x
``--replications`` seeds, no store (every task computed). Runs alternate serial / local pool
(and local / Dask for the no-op tasks), ``--repeat`` times; medians are quoted. CPU seconds are
``time.process_time`` of this process plus ``RUSAGE_CHILDREN`` (reaped children: the Dask
workers; the local pool's workers are children of the forkserver, so their CPU is the tasks'
own ``cpu_s``, summed). "Cores obtained" = task CPU / wall: on a shared host the pool's
speedup is capped by the cores the scheduler gives it, so it is printed beside the speedup, with
the load average before and after.

    python bench/bench_sweep.py [--replications 2] [--repeat 3] [--noop 300]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analytics import store  # noqa: E402
from analytics.ingest import files as ingest  # noqa: E402
from analytics.power import Scenario, sweep_points  # noqa: E402
from analytics.services import power  # noqa: E402
from analytics.sweep import Task, cores, run_sweep  # noqa: E402

SHARED = Path(os.environ.get("HEADROOM_SHARED_DATA",
                             Path(__file__).resolve().parents[2] / "shared" / "data"))


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(tasks, **kwargs) -> tuple[float, float, object]:
    """(wall s, CPU s of this process and reaped children, SweepResult) of one sweep."""
    c0, k0, w0 = time.process_time(), _children_cpu(), time.perf_counter()
    res = run_sweep(tasks, **kwargs)
    return time.perf_counter() - w0, time.process_time() - c0 + _children_cpu() - k0, res


def power_inputs(tmp: Path):
    db = tmp / "bench_sweep.duckdb"
    con = store.connect(db)
    files = [SHARED / "mit_supercloud/slurm-log-queueing-clean.csv",
             SHARED / "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"]
    ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in files])
    inputs = power.load_inputs(con, None, None, 0)
    con.close()
    return inputs


def bench_pool(inputs, replications: int, repeat: int) -> dict:
    tasks = sweep_points.point_tasks(Scenario(), power.SWEEP_SHARES, (0.5, 0.8),
                                     replications=replications, seed=0)
    print(f"\npower sweep: {len(tasks)} tasks (11 shares x 2 utilisations x {replications} "
          f"seeds; 256 GPUs, 7 + 2 days), {repeat} x alternating serial / local pool "
          f"({min(cores(), len(tasks))} workers)")
    rows = {"serial": [], "local": []}
    for i in range(repeat):
        for backend in ("serial", "local"):
            wall, cpu, res = timed(tasks, shared={"inputs": inputs}, backend=backend)
            rows[backend].append((wall, cpu, res))
            task_cpu = sum(t["cpu_s"] for t in res.timings)
            print(f"  run {i + 1} {backend:>6}: wall {wall:7.2f} s, CPU {cpu:6.2f} s here + "
                  f"{task_cpu:6.2f} s in the tasks -> {task_cpu / wall:.2f} cores obtained, "
                  f"load {os.getloadavg()[0]:.2f}")
    assert rows["serial"][0][2].results == rows["local"][0][2].results  # same numbers
    serial = statistics.median(w for w, _, _ in rows["serial"])
    local = statistics.median(w for w, _, _ in rows["local"])
    task_cpu = statistics.median(t["cpu_s"] for t in rows["serial"][0][2].timings)
    print(f"  median wall: serial {serial:.2f} s, local pool {local:.2f} s -> speedup "
          f"{serial / local:.2f}x (goal >= 1.7x on 2 cores); median task CPU {task_cpu:.3f} s")
    return {"speedup": serial / local, "task_cpu_s": task_cpu, "tasks": len(tasks)}


def bench_dask(n: int, repeat: int) -> dict:
    from distributed import LocalCluster

    tasks = [Task("bench.noop", "analytics.sweep.worker:noop", {"x": i}, i) for i in range(n)]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cluster:
        address = cluster.scheduler_address
        print(f"\nno-op tasks: {n} per sweep, {repeat} x alternating local pool / Dask "
              f"({address}, 2 workers x 1 thread)")
        per = {"local": [], "dask": []}
        for i in range(repeat):
            for name, backend in (("local", "local"), ("dask", address)):
                wall, cpu, _ = timed(tasks, backend=backend, shared={"blob": list(range(1000))})
                per[name].append(wall / n)
                print(f"  run {i + 1} {name:>5}: wall {wall:6.2f} s = {1e3 * wall / n:6.2f} ms "
                      f"per task, CPU {cpu:6.2f} s, load {os.getloadavg()[0]:.2f}")
    local, dask = statistics.median(per["local"]), statistics.median(per["dask"])
    overhead_ms = 1e3 * (dask - local)
    print(f"  median per task: local pool {1e3 * local:.2f} ms, Dask {1e3 * dask:.2f} ms -> "
          f"Dask overhead {overhead_ms:+.2f} ms per task (goal <= 5 ms); scheduler throughput "
          f"{1 / dask:,.0f} tasks/s")
    return {"overhead_ms": overhead_ms, "throughput": 1 / dask}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--noop", type=int, default=300)
    args = ap.parse_args()
    print("goal: local pool >= 1.7x serial on the power sweep (2 cores); Dask overhead <= 5 ms "
          "per task vs the local pool (median); scheduler throughput reported")
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} "
          f"CPUs ({cores()} usable)")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        pool = bench_pool(power_inputs(Path(tmp)), args.replications, args.repeat)
    dask = bench_dask(args.noop, args.repeat)
    load = os.getloadavg()
    print(f"\nsummary: speedup {pool['speedup']:.2f}x, Dask overhead {dask['overhead_ms']:+.2f} ms"
          f"/task, {dask['throughput']:,.0f} tasks/s, task CPU {pool['task_cpu_s']:.3f} s")
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
