"""CLI start-up: CPU of ``headroom --help``, ``headroom datasets`` and ``headroom ingest`` of a
small real file (the BurstGPT head, 400 rows), each a fresh ``python -m analytics.cli`` process,
against ``python -c pass`` (issue 15 goal: <= 0.4 s CPU each; they must not import MAPIE,
scikit-learn, SciPy or LightGBM).

CPU is user + system time of the child (``resource.getrusage(RUSAGE_CHILDREN)``), the median of
``--repeat`` runs, the commands alternating. Also lists which heavy libraries each command
imported (``-X importtime`` of one more run). Prints the machine load (``os.getloadavg``).
The children write and reuse byte code in a temporary ``PYTHONPYCACHEPREFIX`` (an untimed first
run fills it), as an installed package does: with ``PYTHONDONTWRITEBYTECODE`` set (this host's
default) every run would also compile headroom's own modules.

    python bench/bench_cli.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMALL = Path(os.environ.get("HEADROOM_SHARED_DATA", REPO.parent / "shared" / "data"),
             "burstgpt", "BurstGPT_1_head400.csv")
GOAL_S = 0.4
HEAVY = ("mapie", "sklearn", "scipy", "lightgbm", "plotly", "pandas", "numpy", "polars",
         "pyarrow", "duckdb")


def child_cpu(cmd: list[str], env: dict) -> float:
    """User + system CPU seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imported(cmd: list[str], env: dict) -> list[str]:
    """The heavy top-level packages ``cmd`` imports (``-X importtime`` on stderr)."""
    out = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True).stderr
    names = {line.split("|")[-1].strip().split(".")[0] for line in out.splitlines()
             if line.startswith("import time:")}
    return [h for h in HEAVY if h in names]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"goal: --help, datasets, ingest (400 rows) <= {GOAL_S} s CPU each; "
          f"load {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(Path(tmp, "pyc"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cli = [sys.executable, "-m", "analytics.cli"]
        db = Path(tmp) / "b.duckdb"

        def ingest_cmd(i: int) -> list[str]:
            return [*cli, "--db", str(Path(tmp) / f"i{i}.duckdb"), "ingest", str(SMALL)]

        subprocess.run([*cli, "--db", str(db), "ingest", str(SMALL)], cwd=REPO, env=env,
                       check=True, capture_output=True)
        subprocess.run([*cli, "--db", str(db), "datasets"], cwd=REPO, env=env, check=True,
                       capture_output=True)  # fills the byte-code cache (untimed)
        cmds = {"python -c pass": [sys.executable, "-c", "pass"],
                "headroom --help": [*cli, "--help"],
                "headroom datasets": [*cli, "--db", str(db), "datasets"]}
        times: dict[str, list[float]] = {k: [] for k in [*cmds, "headroom ingest"]}
        for i in range(args.repeat):
            for name, cmd in cmds.items():
                times[name].append(child_cpu(cmd, env))
            times["headroom ingest"].append(child_cpu(ingest_cmd(i), env))
        base = statistics.median(times["python -c pass"])
        for name, ts in times.items():
            med = statistics.median(ts)
            cmd = cmds.get(name) or ingest_cmd(args.repeat)
            heavy = imported(cmd, env) if name != "python -c pass" else []
            verdict = "" if name == "python -c pass" else \
                f"  {'met' if med <= GOAL_S else 'NOT met'}; imports {', '.join(heavy) or '-'}"
            print(f"  {name:18s} {med:.3f} s CPU ({med / base:5.1f}x python -c pass){verdict}")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
