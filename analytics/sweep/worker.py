"""What runs on a worker process: import a task's function by name, call it, time it.

Every backend of :mod:`analytics.sweep.runner` calls :func:`execute` (the local process pool
through :func:`execute_local`, which reads the shared data its initializer left in the worker
process): the same code path locally, in the serial fallback and on a Dask worker, so a seeded
task gives the same numbers everywhere.
"""

from __future__ import annotations

import importlib
import math
import os
import socket
import threading
import time
from collections.abc import Callable

#: The shared data of a local-pool worker process, set once by :func:`init_local` (a worker
#: process serves one sweep: the pool is created and shut down per sweep).
_LOCAL_SHARED: dict = {}


def resolve(fn: str) -> Callable:
    """The function named ``"package.module:function"``.

    Raises
    ------
    ValueError
        ``fn`` is not of the form ``module:function``; ImportError / AttributeError when the
        module or the function does not exist.
    """
    module, sep, name = fn.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"task function {fn!r} must be 'package.module:function'")
    return getattr(importlib.import_module(module), name)


def jsonable(value):
    """``value`` with numpy scalars as Python numbers, tuples as lists and non-finite floats as
    None (strict JSON: a fresh result and one read back from the store are then equal)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def execute(fn: str, params: dict, seed: int, **shared) -> dict:
    """Run one task: ``fn(params, seed, **shared)``.

    Returns
    -------
    dict: ``result`` (the function's dict, :func:`jsonable`), ``cpu_s`` (CPU seconds of the
    thread that ran it), ``wall_s``, ``started`` / ``finished`` (UNIX seconds) and ``host``
    (``hostname:pid``).
    """
    func = resolve(fn)
    started, t0, c0 = time.time(), time.perf_counter(), time.thread_time()
    result = func(dict(params), int(seed), **shared)
    if not isinstance(result, dict):
        raise TypeError(f"{fn} returned {type(result).__name__}, not a dict")
    cpu_s, wall_s = time.thread_time() - c0, time.perf_counter() - t0
    return {"result": jsonable(result), "cpu_s": cpu_s, "wall_s": wall_s, "started": started,
            "finished": time.time(), "host": f"{socket.gethostname()}:{os.getpid()}"}


#: Seconds between a local worker's checks that the process that started its pool still runs.
WATCH_S = 1.0


def _die_with(parent: int) -> None:
    """Exit this worker as soon as ``parent`` is gone (SIGKILL, OOM kill: no ``finally`` of
    the parent's runs, and a pool worker in a long task kept running for minutes)."""
    from analytics.tempfiles import alive

    while alive(parent):
        time.sleep(WATCH_S)
    os._exit(1)


def init_local(shared: dict, modules: tuple[str, ...] = (), parent: int | None = None) -> None:
    """Initializer of a local-pool worker: keep the shared data (sent once per worker, not per
    task), import the task modules, and (``parent``: the PID of the process that runs the
    sweep) watch that process from a daemon thread and exit when it is gone."""
    if parent is not None:
        threading.Thread(target=_die_with, args=(parent,), daemon=True,
                         name="headroom-parent-watch").start()
    _LOCAL_SHARED.clear()
    _LOCAL_SHARED.update(shared or {})
    for module in modules:
        importlib.import_module(module)


def execute_local(fn: str, params: dict, seed: int) -> dict:
    """:func:`execute` with the shared data of :func:`init_local`."""
    return execute(fn, params, seed, **_LOCAL_SHARED)


def noop(params: dict, seed: int, **shared) -> dict:
    """A task that does nothing (scheduler throughput and overhead benches, tests): echoes the
    seed, the parameter ``x`` and the sizes of the shared values."""
    return {"seed": seed, "x": params.get("x"),
            "shared": {k: len(v) if hasattr(v, "__len__") else None for k, v in shared.items()}}


def sleepy(params: dict, seed: int, **shared) -> dict:
    """A task that sleeps ``params["sleep_s"]`` seconds and returns ``seed * 2`` (tests of a
    worker killed mid-sweep)."""
    time.sleep(float(params.get("sleep_s", 0.0)))
    return {"seed": seed, "twice": seed * 2, "x": params.get("x")}
