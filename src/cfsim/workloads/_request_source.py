"""Requests served by a Go HTTP server: the work source shared by ``closed`` and ``open``.

A request follows the path of a ``net/http`` server whose handler scatters the work over
goroutines and gathers the results (the lab's ``lab/cmd/workload/server.go``):

1. Network data arrives: the netpoller readies the connection's goroutine (``netpoll`` ->
   ``injectglist`` in ``src/runtime/proc.go``), which reads and parses the request: half of
   ``server_cpu_us_per_request`` (socket syscalls, HTTP parsing) and half of
   ``server_alloc_kb_per_request``.
2. The handler starts ``fanout`` goroutines of ``cpu_ms_per_request / fanout`` CPU each
   (allocating ``alloc_kb_per_request`` in proportion) and blocks on a ``sync.WaitGroup``. Each
   ``go`` statement is ``newproc``, which calls ``wakep``: with an idle P and no spinning M, a
   parked M is woken, searches for work and, if the spawning P ran the goroutine first, parks again.
3. The last goroutine's ``wg.Done`` readies the connection goroutine (``ready`` ->
   ``runqput(next=true)``, so it runs next on that P, + ``wakep``), which writes the response: the
   other half of the server CPU and garbage.

With ``background_read`` (``workload.http_background_read``) the request also takes the path of
net/http's background read (``src/net/http/server.go``: ``(*conn).serve`` calls
``connReader.startBackgroundRead`` before the handler and ``(*response).finishRequest`` calls
``abortPendingRead`` after the response is written): before the handler's goroutines the
connection goroutine starts a reader goroutine (``go cr.backgroundRead()``: ``newproc`` ->
``wakep``; the handler's own ``go`` statements then take the P's ``runnext``, so the reader waits
in the queue where a spinning M can take it, and that M's ``resetspinning`` wakes the next one
while Ps are idle), which reads, finds nothing and parks in the netpoller. After the response, the
connection goroutine moves the read deadline into the past, which readies the reader
(``netpollunblock`` -> ``ready``: ``runnext`` + ``wakep``), and waits on a ``sync.Cond`` until the
reader has returned; the reader's ``Broadcast`` readies the connection goroutine once more
(``runnext`` + ``wakep``), which resets the deadline and parks reading the next request. Per
request that is two goroutines created and three readied besides the netpoller's, as an execution
trace of the lab's server shows (unblocks by ``SetReadDeadline``, by the handler's goroutine and by
``backgroundRead``'s ``Broadcast``, about one each a request). Their CPU
(``BG_START_NS``, ``BG_END_NS``, ``TAIL_NS``) comes out of ``server_cpu_us_per_request``, so the
server's CPU stays what the key says; what changes is how many Ms wake to run or to look for them.
The response is written before the reader's path, so the latency does not wait for it.

``cpu_cv`` draws each request's handler CPU from a gamma distribution (mean ``cpu_ms_per_request``,
that coefficient of variation). Goroutines wait in the Go scheduler's queues
(:class:`cfsim.goruntime.runq.RunQueues`): what the network readies waits until a P polls it
(one that ran out of its own work, or sysmon after 10 ms), which takes one for each idle P onto the
global queue and the rest into its own local queue; what a goroutine readies or starts takes its
P's ``runnext``; a P runs its own queue first, the global queue every 61st schedule, steals half
of another P's queue when it has nothing else. A P whose M the kernel has descheduled or whose
CPU is throttled keeps its queue meanwhile. A goroutine runs at most 10 ms (``forcePreemptNS``),
after which it goes to the global queue.

While every P is busy and other goroutines wait, a P runs the goroutines of a request that ready
each other into its ``runnext`` one after another as one chunk (the read, the handler, the
response; a request with one handler goroutine and no background reader), within
``CHUNK_MAX_NS`` and until the global queue's turn: its M takes runnext at the instant the
goroutine before ends, before a thief could (``findRunnable``, ``runqsteal`` in
``src/runtime/proc.go``). Not while idle mark workers run (what is readied makes one give its P
back, ``pollWork``) nor during a GC cycle at all (``GoRuntime.gc_cycle_running``: every
``schedule`` may hand the P to a mark worker, every allocation may owe an assist). Each goroutine
still pays its pass through ``schedule``; its end is placed within the chunk by its share of the
chunk's CPU, after any throttled spell of the chunk's CPU that it ran across
(``CfsEngine.throttled_gap``); the ``wakep`` of a goroutine the chunk readied and ran is made at
its end, with the P still busy. ``batch=False`` runs one
goroutine per chunk: the reference path, an engine event per goroutine. The workloads batch only
where the two agree (``run.request_batching``, :func:`cfsim.workloads._request_workload.request_batching`:
the fluid engine, no client on the host), and the lab's twins take the reference path.

Latency: ``latency_*`` is what the client sees, arrival at the process to the response written
plus the time outside the process: ``client_rtt_ms``, or with ``client_rtt_p99_ms`` a log-normal
draw per request with that median and 99th percentile (``last_rtt_ns``, which a closed loop's
client also waits); ``server_latency_*`` is the handler's own span (from the handler's start to
the last goroutine's end, like the lab's ``cfsim_request_duration_seconds``). Their quantiles are
exact, or read through a histogram's buckets as a dashboard reads them (``run.latency_buckets_s``).
"""
from __future__ import annotations

import math
from array import array
from typing import Any, Callable, Final, Sequence

import numpy as np

from cfsim.goruntime.runq import RunQueues
from cfsim.goruntime.runtime import Claim, GoRuntime, WorkSource
from cfsim.workloads._go import latency_keys
from cfsim.workloads.arrivals import lognormal_sigma

PRE: Final = 0
CHILD: Final = 1
POST: Final = 2
BG_START: Final = 3
BG_END: Final = 4
TAIL: Final = 5
#: the background reader of a request: queued to start, parked in its read, told to end before it ran
BG_QUEUED: Final = 0
BG_READING: Final = 1
BG_ABORTED: Final = 2
#: CPU of net/http's background reader goroutine when it starts (a read that finds nothing, the
#: netpoller park) and when it ends (the deadline error, ``cond.Broadcast``, exit), and of the
#: connection goroutine's tail after it (deadline reset, the read that parks): an execution trace of
#: the lab's server at 750 requests/s and GOMAXPROCS 2 ran the reader 1.1 us a run, 2.7 runs a request
BG_START_NS: Final = 1_500
BG_END_NS: Final = 1_500
TAIL_NS: Final = 3_000
#: time-outside-the-process draws per block
RTT_BLOCK: Final = 1024
#: the most CPU a chunk of several goroutines takes: a GC cycle that starts meanwhile gets its
#: workers at the P's next schedule, up to this late
CHUNK_MAX_NS: Final = 500_000


class _Req:
    __slots__ = ("t_arr", "left", "client", "t_handler", "per_g", "bg")

    def __init__(self, t_arr: int, left: int, client: int, per_g: int):
        self.t_arr = t_arr
        self.left = left
        self.client = client
        self.t_handler = t_arr
        self.per_g = per_g
        self.bg = BG_QUEUED


class _G:
    """A goroutine of a request in the scheduler's queues: its request, the CPU it has left, and
    which of the request's goroutines it is (``PRE`` ... ``TAIL``). A class, not a list: the
    compiled build (mypyc) keeps its fields as machine integers."""

    __slots__ = ("req", "left", "stage")

    def __init__(self, req: _Req, left: int, stage: int):
        self.req = req
        self.left = left
        self.stage = stage


class CpuDrift:
    """A factor common to every request's CPU that drifts with time: ``1 + cv x X(t)`` with ``X``
    a unit Ornstein-Uhlenbeck process of correlation time ``tau_s``, advanced exactly between the
    times it is read (``X(t+dt) = X(t) e^(-dt/tau) + sqrt(1 - e^(-2 dt/tau)) N(0, 1)``), floored at
    0.05. The lab's requests run slower or faster together for a tenth of a second or more: their
    count per 0.1 s is steady while the CPU they take varies by several per cent (docs/model-notes.md,
    "CPU a period"). Draws come from a stream of its own, so the other draws stay the same.

    >>> d = CpuDrift(0.05, 0.1, np.random.default_rng(1))
    >>> f = np.array([d.at(t) for t in range(0, 200_000_000_000, 1_000_000)])
    >>> round(float(f.mean()), 2), round(float(f.std()), 3)
    (1.0, 0.05)
    """

    def __init__(self, cv: float, tau_s: float, rng: np.random.Generator):
        self.cv, self.tau_ns, self.rng = float(cv), float(tau_s) * 1e9, rng
        self.x = float(rng.standard_normal())
        self.t_ns: int | None = None

    def at(self, t_ns: int) -> float:
        if self.t_ns is not None and t_ns > self.t_ns:
            a = math.exp(-(t_ns - self.t_ns) / self.tau_ns)
            self.x = self.x * a + math.sqrt(1.0 - a * a) * float(self.rng.standard_normal())
        if self.t_ns is None or t_ns > self.t_ns:
            self.t_ns = t_ns
        return max(0.05, 1.0 + self.cv * self.x)


class RequestSource(WorkSource):
    def __init__(self, rt: GoRuntime, cpu_ns: float, alloc_bytes: float, fanout: int,
                 on_response: Callable[[_Req, int], None] | None = None, server_cpu_ns: float = 0.0,
                 server_alloc_bytes: float = 0.0, cpu_cv: float = 0.0, client_rtt_ns: int = 0,
                 rng: np.random.Generator | None = None, client_rtt_p99_ns: int = 0,
                 rtt_rng: np.random.Generator | None = None, conn_heap_bytes: int = 0,
                 conn_stack_bytes: int = 0, max_conns: int = 0, batch: bool = True,
                 drift: CpuDrift | None = None, background_read: bool = False):
        self.rt = rt
        self.drift = drift
        self.batch = bool(batch)
        self.per_g = max(1, int(round(cpu_ns / fanout)))
        self.alloc_per_ns = alloc_bytes / (self.per_g * fanout)
        self.fanout = fanout
        # net/http's background reader and the connection goroutine's tail take their CPU out of
        # the server's, at most half of it
        self.background_read = bool(background_read) and server_cpu_ns >= 6
        self.bg_ns = (0, 0, 0)
        if self.background_read:
            f = min(1.0, server_cpu_ns / 2 / (BG_START_NS + BG_END_NS + TAIL_NS))
            self.bg_ns = tuple(max(1, int(round(x * f))) for x in (BG_START_NS, BG_END_NS, TAIL_NS))
            server_cpu_ns -= sum(self.bg_ns)
        # the connection goroutine's two halves: read + parse, then write
        self.half_ns = int(round(server_cpu_ns / 2))
        self.half_alloc = int(server_alloc_bytes / 2)
        self.cv = float(cpu_cv)
        # every goroutine the same CPU (no spread, no drift): _per_g is per_g itself
        self._fixed_per_g = drift is None and self.cv <= 0
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.rtt_ns = int(client_rtt_ns)
        self.last_rtt_ns = self.rtt_ns
        # log-normal spread of the time outside the process: sigma from the median and the 99th
        # percentile (ln p99 - ln median = z_0.99 sigma); drawn in blocks from a stream of its own
        # so that the server's own draws (request CPU) stay the same with or without it
        self.rtt_sigma = lognormal_sigma(client_rtt_ns, client_rtt_p99_ns)
        self.rtt_rng = rtt_rng if rtt_rng is not None else np.random.default_rng(0)
        self.rtt_draws: list[int] = []
        # the goroutines (_G: request, CPU left, stage) in the Go scheduler's queues: each P's
        # runnext and local queue, the global queue, the network's (cfsim.goruntime.runq)
        self.q = RunQueues()
        self.cur_p = 0                      # the P of the goroutine whose end is being booked
        self._chained = False               # booking a chunk's goroutine whose successor it ran
        self._chain_woke = False            # ... and that goroutine's end readied one (a wakep)
        self.on_response = on_response
        self.arrived = 0
        self.completed = 0
        self.in_flight: dict[int, _Req] = {}
        # client connections the server holds open (keep-alive): a client opens one when a request
        # finds all of its connections busy, so they follow the peak of requests in flight (a
        # closed loop's clients one each), up to max_conns (0 = no cap); each keeps its buffers
        # and its goroutine's stack (arrive, _open_conns)
        self.conns = 0
        self.max_conns = int(max_conns) if max_conns > 0 else None
        self.conn_heap_bytes = int(conn_heap_bytes)
        self.conn_stack_bytes = int(conn_stack_bytes)
        # one entry per request: packed int64 arrays (8 bytes an entry, not a list slot and an int
        # object, ~40): a 60 s run at 100k requests/s keeps 4 x 6 M of them
        self.t_done = array("q")
        self.lat_ns = array("q")
        self.handler_end = array("q")
        self.handler_ns = array("q")

    def _per_g(self, t_ns: int) -> int:
        per_g = self.per_g if self.drift is None else self.per_g * self.drift.at(t_ns)
        if self.cv <= 0:
            return max(1, int(round(per_g)))
        k = 1.0 / (self.cv * self.cv)
        return max(1, int(round(per_g * self.rng.gamma(k, 1.0 / k))))

    def arrive(self, t_ns: int, client: int = -1) -> None:
        req = _Req(t_ns, self.fanout, client, self.per_g if self._fixed_per_g else self._per_g(t_ns))
        self.arrived += 1
        self.in_flight[id(req)] = req
        need = client + 1 if client >= 0 else len(self.in_flight)
        if need > self.conns:
            self._open_conns(need)
        if self.half_ns > 0:
            self.q.net_ready(_G(req, self.half_ns, PRE))
            self._ready(1)               # the netpoller readies the connection goroutine
        else:
            self._spawn(req, netpoll=True)

    def _open_conns(self, need: int) -> None:
        """Connections up to ``need`` (capped): the server accepts each and its goroutine keeps a
        read and a write buffer and its stack until the connection closes (net/http server.go
        ``(*conn).serve``)."""
        if self.max_conns is not None:
            need = min(need, self.max_conns)
        new = need - self.conns
        if new <= 0:
            return
        self.conns = need
        if self.conn_heap_bytes or self.conn_stack_bytes:
            self.rt.retain(new * self.conn_heap_bytes, new * self.conn_stack_bytes)

    def _spawn(self, req: _Req, netpoll: bool = False) -> None:
        if netpoll:
            # no server CPU: the network readies the handler's goroutines themselves
            for _ in range(self.fanout):
                self.q.net_ready(_G(req, req.per_g, CHILD))
        else:
            p = self.cur_p
            if self.background_read:
                # started first (go cr.backgroundRead()), then the handler's go statements take
                # runnext from it: it waits behind them in the P's local queue
                self.q.put_next(p, _G(req, self.bg_ns[0], BG_START))
                self._ready(1, netpoll=False)
            # newproc: each new goroutine takes runnext, the one before goes to the local tail
            for _ in range(self.fanout):
                self.q.put_next(p, _G(req, req.per_g, CHILD))
        # the handler's go statements: newproc -> wakep (the spinning chain spreads the rest)
        self._ready(1, netpoll=netpoll, spawns=netpoll)

    # work-source protocol -------------------------------------------------------------
    def has_work(self) -> bool:
        return self.q.has_work()

    def hold_polled(self) -> int:
        return self.q.hold_polled()

    def release_polled(self, p: int) -> int:
        return self.q.release_polled(p)

    def has_local(self, p: int) -> bool:
        return self.q.peek_own(p) is not None

    def _alloc(self, g: _G, work: int) -> int:
        if g.stage == CHILD:
            return int(work * self.alloc_per_ns * self.per_g / g.req.per_g)
        if g.stage > POST:
            return 0
        return int(self.half_alloc * work / self.half_ns) if self.half_ns else 0

    def claim(self, max_ns: int, p: int = -1) -> Claim | None:
        """The goroutine P ``p`` runs next (``findRunnable``, :class:`RunQueues`); while every P is
        busy, the goroutines it runs after it as well, up to ``CHUNK_MAX_NS`` (module docstring)."""
        if p < 0:
            p = 0
        rt = self.rt
        q = self.q
        g: _G | None = q.take(p, rt.engine.now, rt.nprocs, rt.npidle)
        if g is None:
            return None
        work = g.left
        if max_ns < work:
            work = max_ns
        alloc = self._alloc(g, work)
        if not self.batch or work < g.left or not (q.n_local or q.glob or q.net) or rt.free_ps \
                or rt.idlew_running or rt.gc_cycle_running():
            return Claim(work, alloc, g, p=p)
        # every P busy: what this goroutine's end readies into the P's runnext runs next on this
        # P (its M takes runnext at once, before a thief could), and so on along the request:
        # the read, the handler, the response as one chunk. Not the P's local queue after it: a
        # P that runs dry meanwhile steals the head of that queue (runqsteal), which a chunk
        # cannot give back (a saturated closed loop at GOMAXPROCS 24 on a 2-core limit: p50
        # -21 %, p99 +26 % with it, over 4 seeds x 2 s)
        gs = [g]
        cap = min(max_ns, CHUNK_MAX_NS)
        nxt = self._readies_next(g)
        while nxt is not None and work + nxt.left <= cap and q.next[p] is None \
                and not q.global_check_due(p):
            gs.append(nxt)
            work += nxt.left
            alloc += self._alloc(nxt, nxt.left)
            nxt = self._readies_next(nxt)
        if len(gs) == 1:
            return Claim(work, alloc, g, p=p)
        return Claim(work, alloc, gs, len(gs), p=p)

    def _readies_next(self, g: _G) -> _G | None:
        """The goroutine ``g``'s end readies into its P's runnext when that alone follows from its
        request (one handler goroutine, no background reader): the handler after the read, the
        response after the handler; a stand-in the same as the one :meth:`_finish` will create."""
        if self.fanout != 1 or self.background_read:
            return None
        req, stage = g.req, g.stage
        if stage == PRE:
            return _G(req, req.per_g, CHILD)
        if stage == CHILD and self.half_ns > 0:
            return _G(req, self.half_ns, POST)
        return None

    def _ends(self, claim: Claim, t0: int, t1: int, work_ns: int) -> list[int]:
        """When each goroutine of a chunk that ran ``work_ns`` of its CPU from ``t0`` to ``t1``
        ended (those it finished): by its share of that CPU, after the throttled spell of the
        chunk's CPU in between if it ran across one."""
        gap = self.rt.engine.throttled_gap(claim.tid, t0, t1) if claim.tid >= 0 else None
        g0, gl = (gap[0], gap[1] - gap[0]) if gap is not None else (t1, 0)
        run = t1 - t0 - gl
        ends = []
        cum = 0
        gs: list[_G] = claim.token
        for g in gs:
            cum += g.left
            if cum > work_ns:
                break
            t = t0 + run * cum // work_ns
            ends.append(t + gl if t > g0 else t)
        return ends

    def done(self, claim: Claim, t0: int, t1: int) -> None:
        g = claim.token
        self.cur_p = claim.p
        if isinstance(g, list):
            self._finish_chunk(g, self._ends(claim, t0, t1, claim.work))
            return
        self._finish(g, claim.work, t1)

    def _ready(self, k: int = 1, netpoll: bool = True, spawns: bool = False) -> None:
        if self._chained:
            self._chain_woke = True
        else:
            self.rt.ready(k, netpoll=netpoll, spawns=spawns)

    def _finish_chunk(self, gs: list[_G], ends: list[int]) -> None:
        """The first ``len(ends)`` goroutines of a chunk end, in order; one that an earlier one
        readied is taken from the P's runnext, where that one's end has just put it. That
        readying's ``wakep`` ran once the M had taken it, with this P busy: it is made at the
        chunk's end, before the M schedules again (a spinning M only if another P is idle)."""
        q, p = self.q, self.cur_p
        self._chain_woke = False
        for i, t in enumerate(ends):
            h = gs[i]
            if i:
                h = q.pop_own(p)
                if h is None or h.req is not gs[i].req or h.stage != gs[i].stage:
                    raise RuntimeError("a chunk's readied goroutine is not in its P's runnext")
            self._chained = i + 1 < len(gs)
            try:
                self._finish(h, h.left, t)
            finally:
                self._chained = False
        if self._chain_woke:
            self.rt.wakep()

    def _finish(self, g: _G, work: int, t1: int) -> None:
        """Goroutine ``g`` ran ``work`` of its CPU, ending at ``t1``."""
        g.left -= work
        if g.left > 0:
            self.q.put_global(g)      # preempted after 10 ms (gopreempt_m): the global queue
            self._ready(1, netpoll=False)
            return
        req, stage = g.req, g.stage
        if stage > POST:
            self._background_read(req, stage)
            return
        if stage == PRE:
            req.t_handler = t1
            self._spawn(req)
            return
        if stage == CHILD:
            req.left -= 1
            if req.left:
                return
            self.handler_end.append(t1)
            self.handler_ns.append(t1 - req.t_handler)
            if self.half_ns > 0:
                # wg.Done readies the connection goroutine into the P's runnext: it runs next,
                # ahead of the queue (ready -> runqput(next=true))
                self.q.put_next(self.cur_p, _G(req, self.half_ns, POST))
                self._ready(1, netpoll=False)
                return
        self._complete(req, t1)
        if self.background_read:
            # abortPendingRead: the deadline readies the parked reader into runnext; one that has
            # not run yet returns at once when it does
            if req.bg == BG_READING:
                self.q.put_next(self.cur_p, _G(req, self.bg_ns[1], BG_END))
                self._ready(1, netpoll=False)
            else:
                req.bg = BG_ABORTED

    def _background_read(self, req: _Req, stage: int) -> None:
        """A run of net/http's background reader, or the connection goroutine's tail after it."""
        if stage == BG_START and req.bg == BG_QUEUED:
            req.bg = BG_READING      # parked in the netpoller until the deadline
            return
        if stage == TAIL:
            return
        # the reader ends: cond.Broadcast readies the waiting connection goroutine into runnext
        self.q.put_next(self.cur_p, _G(req, self.bg_ns[2], TAIL))
        self._ready(1, netpoll=False)

    def _complete(self, req: _Req, t1: int) -> None:
        self.completed += 1
        del self.in_flight[id(req)]
        self.t_done.append(t1)
        if self.rtt_sigma:
            if not self.rtt_draws:
                block = self.rtt_ns * np.exp(self.rtt_sigma * self.rtt_rng.standard_normal(RTT_BLOCK))
                self.rtt_draws = np.rint(block[::-1]).astype(np.int64).tolist()
            self.last_rtt_ns = self.rtt_draws.pop()
        self.lat_ns.append(t1 - req.t_arr + self.last_rtt_ns)
        if self.on_response is not None:
            self.on_response(req, t1)

    def requeue(self, claim: Claim, left_ns: int, t0: int, t1: int) -> None:
        """The M was stopped ``left_ns`` short of the claim's end: what it finished ends, and the
        goroutine it was running goes back in front of its P's queue (or stays in its runnext)."""
        g = claim.token
        p = self.cur_p = claim.p
        ran = claim.work - left_ns
        if not isinstance(g, list):
            one: _G = g
            one.left -= ran
            self.q.put_head(p, [one])
            return
        ends = self._ends(claim, t0, t1, ran) if ran > 0 else []
        for i in range(len(ends)):
            ended: _G = g[i]
            ran -= ended.left
        self._finish_chunk(g, ends)
        i = len(ends)
        if i >= len(g):
            return
        if i:
            # readied by the last one that ended: it waits in runnext, partly run (what the
            # goroutines after it would ready never was)
            waiting: _G = self.q.next[p]
            waiting.left -= ran
        else:
            first: _G = g[0]
            first.left -= ran
            self.q.put_head(p, [first])

    # reporting --------------------------------------------------------------------------
    def summary(self, t0_ns: int, t1_ns: int, buckets_s: Sequence[float] | None = None) -> dict[str, Any]:
        """Throughput, backlog and the client's and the handler's latency over (t0, t1];
        ``buckets_s``: quantiles read through a histogram's buckets (``run.latency_buckets_s``)."""
        t = np.asarray(self.t_done, dtype=np.int64)
        lat = np.asarray(self.lat_ns, dtype=np.int64)
        handler = np.asarray(self.handler_ns, dtype=np.int64)
        sel = (t > t0_ns) & (t <= t1_ns)
        span = (t1_ns - t0_ns) / 1e9
        oldest = min((r.t_arr for r in self.in_flight.values()), default=None)
        out = {
            "throughput_per_s": float(sel.sum() / span),
            "requests_completed": int(sel.sum()),
            "requests_arrived": int(self.arrived),
            "backlog_final": int(self.arrived - self.completed),
            "lag_final_s": 0.0 if oldest is None else (t1_ns - oldest) / 1e9,
            "connections_open": int(self.conns),
        }
        out.update(latency_keys(lat[sel] / 1e9, buckets_s))
        h_end = np.asarray(self.handler_end, dtype=np.int64)
        srv = latency_keys(handler[(h_end > t0_ns) & (h_end <= t1_ns)] / 1e9, buckets_s)
        out.update({"server_" + k: srv[k] for k in ("latency_p50_s", "latency_p99_s", "latency_p999_s")})
        return out

    def sample(self) -> tuple:
        return (self.arrived, self.completed, self.arrived - self.completed)
