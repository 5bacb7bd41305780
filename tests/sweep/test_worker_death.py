"""Issue 34 item 8: the local pool's workers die with the process that runs the sweep. A sweep
of two 120 s tasks runs in a child process; once its workers are busy the child is SIGKILLed
(no ``finally`` runs): every process it started is gone within seconds, not after the tasks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
from harness import REPO

SWEEP = """
from analytics.sweep import Task, run_sweep
run_sweep([Task("test.sleep", "analytics.sweep.worker:sleepy", {"sleep_s": 120}, seed=i)
           for i in range(2)], backend="local")
"""


def test_pool_workers_exit_when_the_sweep_process_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", SWEEP], cwd=REPO)
    try:
        proc = psutil.Process(parent.pid)
        deadline = time.monotonic() + 60
        children: list[psutil.Process] = []
        while time.monotonic() < deadline:  # the forkserver and two busy workers
            children = proc.children(recursive=True)
            if len(children) >= 3:
                break
            time.sleep(0.2)
        assert len(children) >= 3, children
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        gone, alive = psutil.wait_procs(children, timeout=15)
        assert alive == [], [p.cmdline() for p in alive]
    finally:
        if parent.poll() is None:
            parent.kill()
