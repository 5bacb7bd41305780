"""The sweep runner: tasks in, results in task order out, on a serial, local-pool or Dask
backend, each finished task stored as it completes (see :mod:`analytics.sweep` for the API).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from analytics.sweep import keys as K
from analytics.sweep import worker
from analytics.sweep.cluster import Cluster, connect_client, operator_cluster

log = logging.getLogger("headroom.sweep")


@dataclass(frozen=True)
class Task:
    """One unit of a sweep.

    Attributes
    ----------
    analysis : name of the analysis (first part of the store key), e.g. ``"power.sweep_point"``
    fn : ``"package.module:function"``: a pure top-level function
        ``fn(params: dict, seed: int, **shared) -> dict`` (JSON-able; NaN becomes null)
    params : the task's parameters (JSON-able; hashed into the key)
    seed : the task's seed (part of the key; the only randomness the function may use)
    """

    analysis: str
    fn: str
    params: dict
    seed: int = 0


@dataclass
class SweepResult:
    """What :func:`run_sweep` returns.

    Attributes
    ----------
    results : one result dict per task, in task order
    computed : tasks computed in this call
    cached : tasks read from the store
    timings : per task ``{"cpu_s", "wall_s", "ran_on", "cached"}`` (seconds; of the original
        run for a cached task)
    backend : ``"serial"``, ``"local"`` or the scheduler address the computed tasks ran on
        (``"store"`` when every task was read from the store)
    workers : processes the computed tasks could use
    wall_s : wall seconds of this call
    dashboard : the Dask dashboard link (None off Dask)
    unsaved : finished tasks the store could not take (busy); their results are in ``results``
    """

    results: list[dict]
    computed: int = 0
    cached: int = 0
    timings: list[dict] = field(default_factory=list)
    backend: str = "serial"
    workers: int = 1
    wall_s: float = 0.0
    dashboard: str | None = None
    unsaved: int = 0

    def summary(self) -> dict:
        """The JSON block a CLI document carries about the run."""
        return {"tasks": len(self.results), "computed": self.computed, "cached": self.cached,
                "backend": self.backend, "workers": self.workers,
                "wall_s": round(self.wall_s, 3), "dashboard": self.dashboard,
                "unsaved": self.unsaved,
                "task_cpu_s": round(sum(t["cpu_s"] for t in self.timings if not t["cached"]), 3)}


class SweepCancelled(RuntimeError):
    """The sweep was cancelled; ``partial`` holds the results so far (None for the tasks that
    did not finish), every finished one already stored."""

    def __init__(self, partial: SweepResult):
        self.partial = partial
        done = sum(r is not None for r in partial.results)
        super().__init__(f"sweep cancelled after {done} of {len(partial.results)} tasks; the "
                         "finished ones are stored, and the same command resumes from them")


def resolve_backend(cli_value: str | None = None, secrets=None) -> Cluster | str | None:
    """The backend to use: ``"local"`` / ``"serial"`` as given, else the operator's cluster
    (:func:`analytics.sweep.cluster.operator_cluster`: the CLI's ``--cluster`` value, else
    ``$HEADROOM_DASK_SCHEDULER``, else the app's ``secrets``), else None (local). Empty strings
    count as unset."""
    value = (cli_value or "").strip()
    if value in ("local", "serial"):
        return value
    return operator_cluster(value or None, secrets)


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _kind(backend: Cluster | str | None, n: int) -> str:
    if isinstance(backend, Cluster):
        return "dask"
    if backend in (None, "", "local"):
        return "serial" if n <= 1 or cores() == 1 else "local"
    if backend == "serial":
        return "serial"
    if "://" in backend:
        return "dask"
    raise ValueError(f"backend {backend!r}: use 'serial', 'local' or a Dask scheduler address "
                     "like tcp://HOST:8786")


def _key(task: Task, inputs_sha: str) -> tuple:
    return (task.analysis, K.sha256_of(task.params), int(task.seed), K.code_version(task.fn),
            inputs_sha)


def _read_cached(store: Path | None, keys: list[tuple]) -> dict:
    if store is None:
        return {}
    from analytics import store as db

    with closing(db.connect(store, read_only=True)) as con:  # short-lived, before any task
        return db.sweep_results(con, keys)


#: Finished tasks are written at once, unless the last write was less than this many seconds
#: ago: then they wait for the next finished task after it (or the end of the sweep, a cancel or
#: an error), so a sweep of very short tasks does not spend its time opening the store.
FLUSH_S = 1.0


class _Writer:
    """Writes finished tasks to the store through short-lived connections (none held between
    writes)."""

    def __init__(self, store: Path | None):
        self.store, self.buffer, self.last, self.unsaved = store, [], -FLUSH_S, 0

    def add(self, key: tuple, params: dict, out: dict, ran_on: str) -> None:
        if self.store is None:
            return
        from analytics import store as db

        record = dict(zip(db.KEY_COLUMNS, key, strict=True))
        record.update(params=worker.jsonable(params), result=out["result"],
                      started=out["started"], finished=out["finished"], cpu_s=out["cpu_s"],
                      wall_s=out["wall_s"], ran_on=ran_on)
        self.buffer.append(record)
        if time.monotonic() - self.last >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self.store is None or not self.buffer:
            return
        from analytics import store as db

        try:
            with closing(db.connect(self.store)) as con:
                db.save_sweep_runs(con, self.buffer)
        except db.StoreBusy as exc:
            log.warning("%d sweep result(s) not stored (kept in memory): %s", len(self.buffer),
                        exc)
            self.unsaved += len(self.buffer)
        self.buffer, self.last = [], time.monotonic()


#: Seconds between the local pool's heartbeats while no task finishes: the progress bar shows
#: the work running (and its elapsed time) from its first second, and Cancel is heard.
HEARTBEAT_S = 1.0


def run_sweep(tasks: list[Task], *, shared: dict | None = None,
              key_inputs: dict[str, str] | None = None, store: str | Path | None = None,
              backend: str | None = None, progress: Callable | None = None,
              cancel: Callable[[], bool] | None = None) -> SweepResult:
    """Run ``tasks``; see :mod:`analytics.sweep` for the parameters.

    Raises
    ------
    SweepCancelled
        ``cancel()`` returned True (or KeyboardInterrupt); finished tasks are stored.
    ValueError
        An unknown backend. Any exception a task raises is re-raised (finished tasks stored).
    """
    t0 = time.perf_counter()
    store = Path(store) if store is not None else None
    inputs_sha = K.sha256_of(key_inputs or {})
    task_keys = [_key(t, inputs_sha) for t in tasks]
    found = _read_cached(store, task_keys)
    out = SweepResult(results=[None] * len(tasks), timings=[None] * len(tasks))
    for i, key in enumerate(task_keys):
        if key in found:
            row = found[key]
            out.results[i] = row["result"]
            out.timings[i] = {"cpu_s": row["cpu_s"], "wall_s": row["wall_s"],
                              "ran_on": row["ran_on"], "cached": True}
    out.cached = sum(r is not None for r in out.results)
    todo = [i for i, r in enumerate(out.results) if r is None]
    kind = _kind(backend, len(todo))
    out.backend = "store" if not todo else str(backend) if kind == "dask" else kind
    out.workers = 0 if not todo else out.workers
    if progress:
        progress(out.cached, len(tasks))
    if todo:
        _compute(tasks, todo, task_keys, shared or {}, store, kind, backend, out, progress,
                 cancel)
    out.wall_s = time.perf_counter() - t0
    return out


def _compute(tasks, todo, task_keys, shared, store, kind, backend, out: SweepResult,
             progress, cancel) -> None:
    """Run the ``todo`` tasks on ``kind``, storing and reporting each as it finishes."""
    runs = {"serial": _serial, "local": _local, "dask": _dask}[kind]
    stream = runs([tasks[i] for i in todo], shared, backend, out)
    writer = _Writer(store)
    done = out.cached
    try:
        with closing(stream):
            for j, result in stream:
                if j is None:  # a heartbeat: nothing finished yet; the bar says what runs
                    if progress:
                        progress(done, len(tasks), f"{min(out.workers, len(tasks) - done)} "
                                                   f"running on {out.workers} worker(s)")
                    if cancel is not None and cancel():
                        raise SweepCancelled(out)
                    continue
                i = todo[j]
                writer.add(task_keys[i], tasks[i].params, result, out.backend)
                out.results[i] = result["result"]
                out.timings[i] = {"cpu_s": result["cpu_s"], "wall_s": result["wall_s"],
                                  "ran_on": out.backend, "cached": False}
                out.computed += 1
                done += 1
                if progress:
                    progress(done, len(tasks))
                if cancel is not None and cancel():
                    raise SweepCancelled(out)
    except KeyboardInterrupt as exc:
        raise SweepCancelled(out) from exc
    finally:
        writer.flush()
        out.unsaved = writer.unsaved


def _serial(tasks: list[Task], shared: dict, backend, out: SweepResult) -> Iterator:
    out.workers = 1
    for j, t in enumerate(tasks):
        yield j, worker.execute(t.fn, t.params, t.seed, **shared)


@contextmanager
def _main_not_rerun() -> Iterator[None]:
    """While worker processes start, ``__main__`` is a bare module: a spawned or forkserver
    child then does not run the parent's main script again (under Streamlit ``__main__`` is the
    app script, which a child would execute; task functions are named by module, never in
    ``__main__``)."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _local(tasks: list[Task], shared: dict, backend, out: SweepResult) -> Iterator:
    """A process pool of min(cores, tasks) workers (forkserver: each worker starts from a clean
    single-threaded server process, safe under Streamlit's threads); the shared data is sent
    once per worker by the initializer, and each worker exits within a second of this process
    dying (:func:`analytics.sweep.worker.init_local`). On exit (done, error, cancel) pending tasks are
    cancelled and running ones terminated."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    modules = tuple(sorted({t.fn.partition(":")[0] for t in tasks}))
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["analytics.sweep.worker", *modules])
    out.workers = min(cores(), len(tasks))
    pool = ProcessPoolExecutor(out.workers, mp_context=ctx, initializer=worker.init_local,
                               initargs=(shared, modules, os.getpid()))
    with _main_not_rerun():  # the workers start during these submits
        futures = {pool.submit(worker.execute_local, t.fn, t.params, t.seed): j
                   for j, t in enumerate(tasks)}
    finished = False
    try:
        pending = set(futures)
        while pending:  # a heartbeat each HEARTBEAT_S while none finishes (issue 31 item 4)
            done, pending = wait(pending, timeout=HEARTBEAT_S, return_when=FIRST_COMPLETED)
            if not done:
                yield None, None
            for fut in done:
                yield futures[fut], fut.result()
        finished = True
    finally:
        processes = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=finished, cancel_futures=True)
        if not finished:
            for proc in processes:  # running tasks of a cancelled sweep stop now
                proc.terminate()


def _dask(tasks: list[Task], shared: dict, backend, out: SweepResult) -> Iterator:
    """Tasks on a Dask cluster: shared values scattered once (broadcast to every worker) and
    passed as futures; tasks submitted in one ``client.map``; results gathered in batches as
    they complete; a worker lost mid-sweep has its tasks re-run
    by the scheduler elsewhere. On exit (done, error, cancel) unfinished futures are
    cancelled and the client closed."""
    from distributed import as_completed

    client = connect_client(backend)
    futures = []
    try:
        out.dashboard = client.dashboard_link
        out.workers = max(1, sum(w.get("nthreads", 1) for w in
                                 client.scheduler_info()["workers"].values()))
        # one future per shared value (a bare list or dict would be scattered element-wise)
        remote = {k: client.scatter([v], broadcast=True, hash=False)[0]
                  for k, v in shared.items()}
        futures = client.map(worker.execute, [t.fn for t in tasks], [t.params for t in tasks],
                             [t.seed for t in tasks], **remote, pure=False)
        index = {f.key: j for j, f in enumerate(futures)}
        for batch in as_completed(futures, loop=client.loop).batches():
            for fut, result in zip(batch, client.gather(batch), strict=True):
                yield index[fut.key], result
    finally:
        pending = [f for f in futures if not f.done()]
        if pending:
            client.cancel(pending, force=True)
        client.close()
