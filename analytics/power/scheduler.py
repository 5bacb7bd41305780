"""Batch scheduling policies of the hybrid power engine, as registered objects.

Two registries, each ``name -> class``:

* :data:`QUEUE_ORDERS` - the priority of queued jobs (hybrid power paper, Methods, "Batch
  scheduling"): ``fcfs`` (first-come first-served by submit time) and ``swf`` (smallest work
  first: GPU request, then realised runtime).
* :data:`BACKFILL_POLICIES` - what starts at a scheduling instant: ``none`` (strict queue order:
  the head starts while it fits, a blocked head blocks everyone) and ``easy`` (EASY
  backfilling: a blocked head gets a reservation and later jobs may start out of order only if
  they fit now and end by it, paper: "Later jobs may then start out of order only if they can
  complete before that reserved time").

A policy works on the engine it is given (:class:`analytics.power.engine.PowerPoolEngine`)
through its queue, its capacity plan and :meth:`~analytics.power.engine.PowerPoolEngine.
start_segment`; it keeps no state between instants but a cache of the queue behind the head.
On a constant-capacity pool (no inference) a segment fits iff it fits now, since running
segments only end; otherwise capacity is booked per whole minute on the per-minute plan, so a
segment ending mid-minute frees that minute only when it ends (conservative by under a minute).
"""

from __future__ import annotations

import math

import numpy as np

from analytics.power.entities import minute_span


class QueueOrder:
    """Priority of queued jobs: a job with a smaller :meth:`key` starts first.

    Parameters
    ----------
    submit_s, gpu_milli, runtime_s : ndarrays of shape (n_jobs,) of the run's jobs (s,
        thousandths of a GPU, s)
    """

    name = ""

    def __init__(self, submit_s: np.ndarray, gpu_milli: np.ndarray, runtime_s: np.ndarray):
        self.submit_s = submit_s
        self.gpu_milli = gpu_milli
        self.runtime_s = runtime_s

    def key(self, job: int) -> tuple:
        """Sort key of ``job`` in the queue; its last element is the job index."""
        raise NotImplementedError


class FirstComeFirstServed(QueueOrder):
    """FCFS: by submit time, ties by job index (= submit order)."""

    name = "fcfs"

    def key(self, job: int) -> tuple:
        return (float(self.submit_s[job]), job, job)


class SmallestWorkFirst(QueueOrder):
    """SWF: by GPU request, then realised runtime, then job index."""

    name = "swf"

    def key(self, job: int) -> tuple:
        return (float(self.gpu_milli[job]), float(self.runtime_s[job]), job)


#: queue orders by name
QUEUE_ORDERS: dict[str, type[QueueOrder]] = {cls.name: cls for cls in (FirstComeFirstServed,
                                                                       SmallestWorkFirst)}
#: the scheduler names accepted by :class:`~analytics.power.engine.SimParams`
SCHEDULERS = tuple(QUEUE_ORDERS)


class HeadFirst:
    """Strict queue order: start the head while it fits; a blocked head blocks the queue.

    Parameters
    ----------
    backfill_depth : queue entries behind the head a backfilling subclass examines per pass
    """

    name = "none"

    def __init__(self, backfill_depth: int = 1000):
        self.backfill_depth = backfill_depth

    def schedule(self, engine, now_s: float) -> None:
        """Start what the policy allows at ``now_s`` (all events of the instant are applied)."""
        if not engine.queue:
            return
        if engine.constant_capacity:
            self.schedule_constant(engine, now_s)
        else:
            self.schedule_booked(engine, now_s)

    def schedule_constant(self, engine, now_s: float) -> None:
        """Constant batch capacity (no inference)."""
        self.start_heads_constant(engine, now_s)

    def schedule_booked(self, engine, now_s: float) -> None:
        """Batch capacity left by inference, minute by minute."""
        self.start_heads_booked(engine, now_s)

    @staticmethod
    def start_heads_constant(engine, now_s: float) -> int:
        """Start queue heads while they fit on a constant pool; returns the milli-GPUs free."""
        queue, gpu_milli = engine.queue, engine.gpu_milli
        free = engine.capacity_milli - engine.used_milli
        while queue and gpu_milli[queue[0][-1]] <= free:
            job = engine.pop_head()
            engine.start_segment(job, now_s)
            free -= gpu_milli[job]
        return free

    @staticmethod
    def start_heads_booked(engine, now_s: float):
        """Start queue heads while their segment fits under the batch capacity in every minute
        it spans, beside the running segments.

        Returns
        -------
        ``None`` when nothing is free this minute, else ``(minute, avail, fit)``: the current
        minute, milli-GPUs free in each of the next ``lookahead_min`` minutes after the starts,
        and its running minimum (``fit[w - 1]``: most GPUs free over the next ``w`` minutes).
        """
        minute = int(now_s // 60.0)
        look = engine.lookahead_min
        avail = (engine.batch_capacity_milli[minute:minute + look]
                 - engine.booked_milli[minute:minute + look])
        # per-minute booking forgives float overruns of a minute boundary (minute_span's
        # tolerance), so the running segments themselves bound what is free right now
        avail[0] = min(avail[0], engine.batch_capacity_milli[minute] - engine.used_milli)
        if avail[0] <= 0:
            return None
        fit = np.minimum.accumulate(avail)
        queue, gpu_milli = engine.queue, engine.jobs.gpu_milli
        while queue:
            job = queue[0][-1]
            width = minute_span(now_s, engine.next_segment_s(job))[1] - minute
            if gpu_milli[job] > fit[width - 1]:
                break
            engine.pop_head()
            engine.start_segment(job, now_s)
            avail[:width] -= gpu_milli[job]
            fit = np.minimum.accumulate(avail)
        return minute, avail, fit


class EasyBackfilling(HeadFirst):
    """EASY backfilling behind a head-job reservation (hybrid power paper, Methods, "Batch
    scheduling").

    A blocked head gets a reservation: the first instant (constant pool) or minute boundary
    (per-minute plan) from which its next segment fits throughout, counting running segments
    (a running job ahead of the head in queue order is counted until its whole job ends, since
    its next segment requeues ahead of the head). A later job may backfill only if it fits now
    and its segment ends by the reservation, so it cannot delay the head. The reservation is only
    worked out when some job behind the head fits now.
    """

    name = "easy"

    def __init__(self, backfill_depth: int = 1000):
        super().__init__(backfill_depth)
        self._cache_version = -1
        self._cache: tuple = ()

    def candidates(self, engine) -> tuple:
        """The queue behind the head, up to ``backfill_depth`` entries, as ``(entries, jobs,
        segment_s, gpu_milli)`` (list of queue entries, then ndarrays of shape (k,)); cached
        until the queue changes."""
        if self._cache_version != engine.queue_version:
            entries = engine.queue[1:self.backfill_depth + 1]
            jobs = np.fromiter((e[-1] for e in entries), np.int64, len(entries))
            self._cache = (entries, jobs, np.minimum(engine.remaining_s[jobs], engine.segment_s),
                           engine.jobs.gpu_milli[jobs])
            self._cache_version = engine.queue_version
        return self._cache

    def schedule_constant(self, engine, now_s: float) -> None:
        free = self.start_heads_constant(engine, now_s)
        if not engine.queue or free <= 0:
            return
        entries, jobs, segment_s, need = self.candidates(engine)
        ok = need <= free
        if not ok.any():
            return
        head = engine.queue[0][-1]
        reservation = self.reservation_constant(engine, head, free)
        engine.record_reservation(head, now_s, reservation)
        ok &= now_s + segment_s <= reservation + 1e-9
        while ok.any():
            i = int(np.argmax(ok))
            job = int(jobs[i])
            engine.remove_entry(entries[i])
            engine.start_segment(job, now_s)
            free -= engine.gpu_milli[job]
            ok[i] = False
            ok &= need <= free

    def schedule_booked(self, engine, now_s: float) -> None:
        window = self.start_heads_booked(engine, now_s)
        if window is None or not engine.queue:
            return
        minute, avail, fit = window
        if fit[0] <= 0:
            return
        entries, jobs, segment_s, need = self.candidates(engine)
        if jobs.size == 0:
            return
        width = np.maximum(np.ceil((now_s + segment_s) / 60.0 - 1e-9).astype(np.int64) - minute, 1)
        ok = need <= fit[width - 1]
        if not ok.any():
            return
        head = engine.queue[0][-1]
        reservation = self.reservation_booked(engine, head, minute)
        engine.record_reservation(head, now_s, reservation)
        ok &= now_s + segment_s <= reservation + 1e-9
        while ok.any():
            i = int(np.argmax(ok))
            job = int(jobs[i])
            engine.remove_entry(entries[i])
            engine.start_segment(job, now_s)
            avail[:width[i]] -= engine.jobs.gpu_milli[job]
            fit = np.minimum.accumulate(avail)
            ok[i] = False
            ok &= need <= fit[width - 1]

    @staticmethod
    def reservation_constant(engine, head: int, free: int) -> float:
        """Earliest instant (s) at which enough running segments have ended for the head."""
        head_key = engine.order.key(head)
        remaining = engine.remaining_s
        reservation, avail = math.inf, free
        for end_s, milli in sorted(
                (seg.end_s if remaining[job] == 0 or engine.order.key(job) > head_key
                 else seg.end_s + remaining[job], seg.gpu_milli)
                for job, seg in engine.running.items()):
            avail += milli
            if avail >= engine.gpu_milli[head]:
                reservation = end_s
                break
        return reservation

    @staticmethod
    def reservation_booked(engine, head: int, minute: int) -> float:
        """First minute boundary (s) after ``minute`` from which the head's next segment fits
        throughout the per-minute plan (inf: none within the plan)."""
        need = int(engine.jobs.gpu_milli[head])
        width = int(math.ceil(engine.next_segment_s(head) / 60.0 - 1e-9))
        avail = engine.batch_capacity_milli[minute:] - engine.booked_milli[minute:]
        head_key = engine.order.key(head)
        remaining = engine.remaining_s
        for job, seg in engine.running.items():
            if remaining[job] > 0 and engine.order.key(job) < head_key:  # requeues ahead: holds on
                first, last = minute_span(seg.end_s, remaining[job])
                first = max(first, seg.booked_until_min)  # its current end minute is booked already
                avail[max(first - minute, 0):max(last - minute, 0)] -= seg.gpu_milli
        bad = np.concatenate([[0], np.cumsum(avail < need)])
        if len(bad) <= width + 1:
            return math.inf
        clear = np.flatnonzero(bad[1 + width:] - bad[1:-width] == 0)  # windows from minute + 1 on
        return (minute + 1 + int(clear[0])) * 60.0 if clear.size else math.inf


#: start policies by name; :class:`~analytics.power.engine.SimParams` ``backfill`` picks ``easy``
#: (True) or ``none`` (False)
BACKFILL_POLICIES: dict[str, type[HeadFirst]] = {cls.name: cls for cls in (HeadFirst,
                                                                          EasyBackfilling)}
