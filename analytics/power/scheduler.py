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

import heapq
import math

import numpy as np

from analytics.power.entities import minute_span

#: queues up to this long are scanned for backfilling in Python (numpy calls cost more there)
SHORT_QUEUE = 64


class QueueOrder:
    """Priority of queued jobs: a job with a smaller :meth:`key` starts first.

    Parameters
    ----------
    submit_s, gpu_milli, runtime_s : ndarrays of shape (n_jobs,) of the run's jobs (s,
        thousandths of a GPU, s)

    Attributes
    ----------
    rank : ndarray of shape (n_jobs,), int: each job's position in :meth:`key` order (keys are
        unique, their last element being the job index), so comparing ranks compares keys; the
        engine's queue holds ranks (int comparisons instead of tuple ones)
    """

    name = ""

    def __init__(self, submit_s: np.ndarray, gpu_milli: np.ndarray, runtime_s: np.ndarray):
        self.submit_s = submit_s
        self.gpu_milli = gpu_milli
        self.runtime_s = runtime_s
        order = np.lexsort(self.sort_columns())
        self.rank = np.empty(order.size, np.int64)
        self.rank[order] = np.arange(order.size)

    def key(self, job: int) -> tuple:
        """Sort key of ``job`` in the queue; its last element is the job index."""
        raise NotImplementedError

    def sort_columns(self) -> tuple:
        """The key's columns for :func:`numpy.lexsort` (last = primary)."""
        raise NotImplementedError


class FirstComeFirstServed(QueueOrder):
    """FCFS: by submit time, ties by job index (= submit order)."""

    name = "fcfs"

    def key(self, job: int) -> tuple:
        return (float(self.submit_s[job]), job, job)

    def sort_columns(self) -> tuple:
        return (np.arange(self.submit_s.size), np.asarray(self.submit_s, float))


class SmallestWorkFirst(QueueOrder):
    """SWF: by GPU request, then realised runtime, then job index."""

    name = "swf"

    def key(self, job: int) -> tuple:
        return (float(self.gpu_milli[job]), float(self.runtime_s[job]), job)

    def sort_columns(self) -> tuple:
        return (np.arange(self.submit_s.size), np.asarray(self.runtime_s, float),
                np.asarray(self.gpu_milli, float))


#: queue orders by name
QUEUE_ORDERS: dict[str, type[QueueOrder]] = {cls.name: cls for cls in (FirstComeFirstServed,
                                                                       SmallestWorkFirst)}
#: the scheduler names accepted by :class:`~analytics.power.runspec.SimParams`
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

    @staticmethod
    def start_heads_constant(engine, now_s: float) -> int:
        """Start queue heads while they fit on a constant pool; returns the milli-GPUs free."""
        queue, gpu_milli, job_of_rank = engine.queue, engine.gpu_milli, engine.job_of_rank_list
        free = engine.capacity_milli - engine.used_milli
        while queue:
            rank = queue[0]
            job = job_of_rank[rank]
            need = gpu_milli[job]
            if need > free:
                break
            del queue[0]  # = engine.pop_head(), inlined: once per started head
            engine.queued_flags[rank] = False
            engine.reserved_rank = -1
            engine.start_segment(job, now_s)
            free -= need
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
        free_now = int(engine.batch_capacity_milli[minute]) - engine.used_milli
        if free_now < avail[0]:
            avail[0] = free_now
        if avail[0] <= 0:
            return None
        fit = np.minimum.accumulate(avail)
        queue, gpu_milli, job_of_rank = engine.queue, engine.gpu_milli, engine.job_of_rank_list
        while queue:
            job = job_of_rank[queue[0]]
            width = minute_span(now_s, engine.next_segment_s(job))[1] - minute
            need = gpu_milli[job]
            if need > fit[width - 1]:
                break
            engine.pop_head()
            engine.start_segment(job, now_s)
            avail[:width] -= need
            fit = np.minimum.accumulate(avail)
        return minute, avail, fit


    #: the pass on a constant batch capacity (no inference): start heads while they fit
    schedule_constant = start_heads_constant
    #: the pass on the batch capacity left by inference, minute by minute
    schedule_booked = start_heads_booked


class EasyBackfilling(HeadFirst):
    """EASY backfilling behind a head-job reservation (hybrid power paper, Methods, "Batch
    scheduling").

    A blocked head gets a reservation: the first instant (constant pool) or minute boundary
    (per-minute plan) from which its next segment fits throughout, counting running segments
    (a running job ahead of the head in queue order is counted until its whole job ends, since
    its next segment requeues ahead of the head). A later job may backfill only if it fits now
    and its segment ends by the reservation, so it cannot delay the head. With ``record=True``
    the reservation is only worked out (and recorded) when some job behind the head fits now.

    Speed without changing a decision: the queue behind the head is read as arrays by rank
    (:meth:`candidates`), and not at all when no job could fit (free capacity below the smallest
    request of the run) or, on a constant pool, when even the shortest queued segment would end
    after the reservation; a constant-pool reservation walks the running ends in order
    (:meth:`reservation_constant`), one on the per-minute plan is worked out in numpy over the
    engine's slot arrays only as far ahead as the longest segment can reach, since a later
    reservation gives the same decisions (with ``record=True`` the whole plan is searched, so
    the recorded reservations are exact).
    """

    name = "easy"

    def candidates(self, engine) -> tuple:
        """The queue behind the head, up to ``backfill_depth`` entries in queue order, as
        ``(ranks, segment_s, gpu_milli)`` (ndarrays of shape (k,)): read from the ``queued``
        flags by rank when they are found among the next ``8 k`` ranks (FCFS), else from the
        queue list."""
        queue, depth = engine.queue, self.backfill_depth
        lo, hi = queue[0] + 1, queue[-1] + 1
        want = min(len(queue) - 1, depth)
        window = min(hi, lo + 8 * want)  # the first ``want`` queued ranks, if they lie close
        ranks = np.flatnonzero(engine.queued[lo:window])
        if ranks.size >= want:
            ranks = ranks[:want] + lo
        else:
            ranks = np.array(queue[1:depth + 1], np.int64)
        return ranks, engine.segment_by_rank[ranks], engine.need_by_rank[ranks]

    def schedule_constant(self, engine, now_s: float) -> None:
        free = self.start_heads_constant(engine, now_s)
        queue = engine.queue
        if len(queue) < 2 or free <= 0 or free < engine.min_need_milli:
            return
        if not engine.record:
            # the reservation first (kept while the head stays, else a short walk): when even
            # the shortest queued segment would end after it, nothing can backfill, and the
            # queue is not read (the usual pass on a large pool; the recorded run keeps the
            # order below, so reservations are recorded only where some job fits now)
            reservation = (engine.reserved_s if engine.reserved_rank == queue[0]
                           else self.head_reservation(engine, now_s, free))
            if now_s + engine.shortest_queued_s() > reservation + 1e-9:
                return
        if len(queue) <= SHORT_QUEUE:
            self.backfill_short(engine, now_s, free)
            return
        ranks, segment_s, need = self.candidates(engine)
        ok = need <= free
        if not ok.any():
            return
        reservation = self.head_reservation(engine, now_s, free)
        ends = now_s + segment_s
        ok &= ends <= reservation + 1e-9
        job_of_rank = engine.job_of_rank_list
        while ok.any():
            i = int(np.argmax(ok))
            rank = int(ranks[i])
            engine.remove_entry(rank)
            job = job_of_rank[rank]
            engine.start_segment(job, now_s)
            if ends[i] > reservation:  # ends within the tolerance after it: may move it
                engine.reserved_rank = -1
            free -= engine.gpu_milli[job]
            ok[i] = False
            ok &= need <= free

    def backfill_short(self, engine, now_s: float, free: int) -> None:
        """:meth:`schedule_constant`'s backfill on a short queue, in one forward scan in Python
        (the same decisions: free capacity only falls as jobs start, and the reservation is
        worked out, as there, only once some job behind the head fits now)."""
        need_of, segment_of = engine.need_rank_list, engine.segment_rank_list
        least, job_of_rank = engine.min_need_milli, engine.job_of_rank_list
        limit = reservation = None
        for rank in engine.queue[1:self.backfill_depth + 1]:
            need = need_of[rank]
            if need > free:
                continue
            if limit is None:
                reservation = self.head_reservation(engine, now_s, free)
                limit = reservation + 1e-9
            ends_s = now_s + segment_of[rank]
            if ends_s <= limit:
                engine.remove_entry(rank)
                engine.start_segment(job_of_rank[rank], now_s)
                if ends_s > reservation:  # ends within the tolerance after it: may move it
                    engine.reserved_rank = -1
                free -= need
                if free < least:
                    return

    def head_reservation(self, engine, now_s: float, free: int) -> float:
        """The blocked head's reservation on a constant pool (recorded with ``record=True``).

        Kept while the head stays (``engine.reserved_rank``): a segment ending at ``now_s`` that
        is not ahead of the head adds its GPUs to ``free`` and removes the same GPUs from the
        ends at or after ``now_s``, and a backfilled segment ending by the reservation takes
        GPUs from ``free`` and returns them before it, so neither moves the first instant at
        which enough GPUs are free. The engine drops it when the head starts or a job queues
        ahead of it; :meth:`schedule_constant` when a backfilled segment ends after it (within
        the 1e-9 s tolerance)."""
        head_rank = engine.queue[0]
        head = engine.job_of_rank_list[head_rank]
        if engine.reserved_rank == head_rank:
            reservation = engine.reserved_s
        else:
            reservation = self.reservation_constant(engine, head, free)
            engine.reserved_rank, engine.reserved_s = head_rank, reservation
        engine.record_reservation(head, now_s, reservation)
        return reservation

    def schedule_booked(self, engine, now_s: float) -> None:
        window = self.start_heads_booked(engine, now_s)
        if window is None or len(engine.queue) < 2:
            return
        minute, avail, fit = window
        if fit[0] <= 0 or fit[0] < engine.min_need_milli:
            return
        ranks, segment_s, need = self.candidates(engine)
        width = np.maximum(np.ceil((now_s + segment_s) / 60.0 - 1e-9).astype(np.int64) - minute, 1)
        ok = need <= fit[width - 1]
        if not ok.any():
            return
        head = engine.head()
        until_s = math.inf if engine.record else now_s + engine.longest_segment_s
        reservation = self.reservation_booked(engine, head, minute, until_s)
        engine.record_reservation(head, now_s, reservation)
        ok &= now_s + segment_s <= reservation + 1e-9
        job_of_rank = engine.job_of_rank_list
        while ok.any():
            i = int(np.argmax(ok))
            rank = int(ranks[i])
            engine.remove_entry(rank)
            job = job_of_rank[rank]
            engine.start_segment(job, now_s)
            avail[:width[i]] -= engine.gpu_milli[job]
            fit = np.minimum.accumulate(avail)
            ok[i] = False
            ok &= need <= fit[width - 1]

    @staticmethod
    def running_ahead(engine, head: int):
        """The running segments as ndarrays over the used slots of the per-minute plan:
        ``(end_s, hold_s, milli, until_min, ahead)``, ``hold_s`` = end of the whole job,
        ``ahead`` = the job has work left and comes before ``head`` in queue order (its next
        segment requeues ahead of the head); free slots have milli 0 and end at inf."""
        high = engine.slot_high
        ahead = engine.slot_ahead_rank[:high] < engine.rank_list[head]
        return (engine.slot_end_s[:high], engine.slot_hold_s[:high], engine.slot_milli[:high],
                engine.slot_until_min[:high], ahead)

    @staticmethod
    def reservation_constant(engine, head: int, free: int) -> float:
        """Earliest instant (s) at which enough running segments have ended for the head on a
        constant pool (inf: never).

        A running job with work left that comes before the head in queue order holds its GPUs
        until ``end_s`` + that work (its next segment requeues ahead of the head), others until
        ``end_s``. The held times are walked in ascending order, with no sort: the running
        segments in end order (``engine.ends_sorted``, kept sorted as segments start), merged
        with a heap of the hold times of the jobs ahead met so far (a hold is never before its
        end); the walk stops where the freed GPUs first suffice, usually after a few segments,
        so its cost does not grow with the pool (issue 35 item 2). Ties may come in another
        order than a stable sort's, which cannot change the instant returned."""
        ends, running = engine.ends_sorted, engine.running
        remaining, rank_of, gpu_milli = engine.remaining_s, engine.rank_list, engine.gpu_milli
        head_rank, need, now_s = rank_of[head], gpu_milli[head], engine.now_s
        holds: list[tuple[float, int]] = []
        for k in range(engine.live_ends(now_s), len(ends)):
            end_s, job = ends[k]
            while holds and holds[0][0] <= end_s:
                hold_s, milli = heapq.heappop(holds)
                free += milli
                if free >= need:
                    return hold_s
            if end_s == now_s and (job not in running or running[job][0] != end_s):
                continue  # ended at this instant
            left = remaining[job]
            if left > 0 and rank_of[job] < head_rank:
                heapq.heappush(holds, (end_s + left, gpu_milli[job]))
                continue
            free += gpu_milli[job]
            if free >= need:
                return end_s
        while holds:
            hold_s, milli = heapq.heappop(holds)
            free += milli
            if free >= need:
                return hold_s
        return math.inf

    @classmethod
    def reservation_booked(cls, engine, head: int, minute: int, until_s: float = math.inf
                           ) -> float:
        """First minute boundary (s) after ``minute`` from which the head's next segment fits
        throughout the per-minute plan (inf: none within the plan, or none by ``until_s``: the
        search stops at the first boundary at or after ``until_s``, since a later reservation
        gives the same backfilling decisions for segments that end by ``until_s``)."""
        need = engine.gpu_milli[head]
        width = int(math.ceil(engine.next_segment_s(head) / 60.0 - 1e-9))
        length = engine.booked_milli.size - minute  # plan minutes from ``minute`` on
        if until_s < math.inf:  # windows starting at minute + 1 .. last_start; +1 for rounding
            last_start = max(int(math.ceil(until_s / 60.0)) - minute, 0) + 1
            length = min(length, last_start + width + 1)
        if length <= width:
            return math.inf
        avail = (engine.batch_capacity_milli[minute:minute + length]
                 - engine.booked_milli[minute:minute + length])
        end_s, hold_s, milli, until_min, ahead = cls.running_ahead(engine, head)
        ahead &= milli > 0
        if ahead.any():  # hold-on of running jobs ahead of the head: their remaining work
            end_s, hold_s, milli = end_s[ahead], hold_s[ahead], milli[ahead]
            first = (end_s // 60.0).astype(np.int64)
            last = np.maximum(first + 1, np.ceil(hold_s / 60.0 - 1e-9).astype(np.int64))
            first = np.maximum(first, until_min[ahead])  # its current end minute is booked
            lo = np.clip(first - minute, 0, length)
            hi = np.maximum(np.clip(last - minute, 0, length), lo)  # an empty span holds nothing
            held = np.bincount(lo, milli, length + 1) - np.bincount(hi, milli, length + 1)
            avail -= np.cumsum(held[:length]).astype(np.int64)
        bad = np.concatenate([[0], np.cumsum(avail < need)])
        clear = np.flatnonzero(bad[1 + width:] - bad[1:-width] == 0)  # windows from minute + 1 on
        return (minute + 1 + int(clear[0])) * 60.0 if clear.size else math.inf


#: start policies by name; :class:`~analytics.power.runspec.SimParams` ``backfill`` picks ``easy``
#: (True) or ``none`` (False)
BACKFILL_POLICIES: dict[str, type[HeadFirst]] = {cls.name: cls for cls in (HeadFirst,
                                                                          EasyBackfilling)}
