"""The Go scheduler's run queues: each P's ``runnext`` and local queue, the global queue, and the
goroutines the network readied that no P has polled yet (Go 1.26 ``src/runtime/proc.go``).

Where a runnable goroutine waits decides who runs it and when:

* ``runqput(pp, gp, next=true)`` (``ready``, ``newproc``): the goroutine takes its P's ``runnext``
  and the one that held it goes to the tail of the P's local queue (:meth:`RunQueues.put_next`);
  the P runs it at its next schedule, inheriting the time slice (``execute(gp, inheritTime)``:
  ``schedtick`` does not advance).
* ``findRunnable`` on P ``pp`` (:meth:`RunQueues.take`): the global queue first when
  ``pp.schedtick % 61 == 0`` (fairness), then ``runqget`` (``runnext``, then the local queue), then
  ``globrunqget`` (``sched.runqsize / gomaxprocs + 1`` goroutines: one to run, the rest into the local
  queue), then ``netpoll(0)`` ("only an optimization before we resort to stealing"): the first
  goroutine runs, ``injectglist`` puts one for each idle P on the global queue and the rest into
  this P's local queue; last ``stealWork``: half of another P's local queue (``runqsteal``), its
  ``runnext`` only when its queue is empty.
* ``sysmon`` polls the network when nobody has for 10 ms and injects what it finds onto the global
  queue (``injectglist`` without a P).
* ``procresize``: the queues of Ps beyond a lower GOMAXPROCS go to the global queue.

A P whose M the kernel has taken off its CPU keeps its queue until the M runs again or another P
steals from it: a request queued there waits while one that arrives at a P that has run dry is served
at once. So does what the network readied while an M was blocked in ``netpoll`` (``findRunnable``'s
last step, after ``sched.lastpoll.Swap(0)``): the kernel wakes that M, and until it runs no other
M polls (``findRunnable`` and ``sysmon`` poll only while ``sched.lastpoll != 0``), so the batch its
``netpoll`` returns waits for it (:meth:`RunQueues.hold_polled`, :meth:`RunQueues.release_polled`).
The goroutines are opaque here; the work sources give them meaning.

>>> q = RunQueues()
>>> q.net_ready("a"); q.net_ready("b")
>>> q.take(0, now_ns=0, nprocs=2, npidle=0)        # nothing local or global: poll the network
'a'
>>> q.peek_own(0)                                   # "b" went to P 0's local queue
'b'
>>> q.put_next(0, "c")                              # ready -> runnext
>>> [q.take(0, 0, 2, 0), q.take(0, 0, 2, 0)]
['c', 'b']
>>> q.net_ready("d"); q.hold_polled()               # the M blocked in netpoll is woken for it
1
>>> q.take(1, 0, 2, 0) is None, q.has_work()        # nobody else polls meanwhile
(True, False)
>>> q.net_ready("e"); q.hold_polled()               # its netpoll returns this one too
2
>>> q.release_polled(1), [q.take(1, 0, 2, 0), q.take(1, 0, 2, 0)]   # it runs, on P 1
(2, ['d', 'e'])
"""
from __future__ import annotations

from collections import deque
from typing import Any, Final

#: ``findRunnable`` looks at the global queue first every 61st schedule of a P
GLOBAL_CHECK_EVERY: Final = 61
#: sysmon polls the network when nobody has for this long (``sysmon``: ``lastpoll + 10ms``)
SYSMON_POLL_NS: Final = 10_000_000


class RunQueues:
    """Per-P ``runnext`` and local queues, the global queue and the not-yet-polled network."""

    __slots__ = ("next", "local", "ticks", "glob", "net", "held", "n_local", "last_poll_ns", "steal_from")

    def __init__(self) -> None:
        self.next: list[Any] = []
        self.local: list[deque] = []
        self.ticks: list[int] = []          # each P's schedtick
        self.glob: deque = deque()
        self.net: deque = deque()
        self.held: deque = deque()          # readied for the M blocked in netpoll, which the kernel woke
        self.n_local = 0                    # goroutines in every P's runnext and local queue
        self.last_poll_ns = 0
        self.steal_from = 0

    def __len__(self) -> int:
        return self.n_local + len(self.glob) + len(self.net) + len(self.held)

    def has_work(self) -> bool:
        return bool(self.n_local or self.glob or self.net)

    def _grow(self, p: int) -> None:
        while len(self.local) <= p:
            self.local.append(deque())
            self.next.append(None)
            self.ticks.append(0)

    def resize(self, nprocs: int) -> None:
        """``procresize`` to ``nprocs`` Ps: the queues of the Ps beyond go to the global queue."""
        n = max(nprocs, 0)
        for p in range(n, len(self.local)):
            if self.next[p] is not None:
                self.glob.append(self.next[p])
                self.n_local -= 1
            self.n_local -= len(self.local[p])
            self.glob.extend(self.local[p])
        del self.next[n:], self.local[n:], self.ticks[n:]

    # putting -------------------------------------------------------------------------
    def put_next(self, p: int, g: Any) -> None:
        """``runqput(next=true)``: ``g`` takes P ``p``'s runnext; the one there goes to the tail."""
        if p >= len(self.local):
            self._grow(p)
        old = self.next[p]
        self.next[p] = g
        self.n_local += 1
        if old is not None:
            self.local[p].append(old)

    def put_head(self, p: int, gs: list) -> None:
        """Goroutines a stopped M had taken go back in front of P ``p``'s local queue, in order."""
        self._grow(p)
        self.local[p].extendleft(reversed(gs))
        self.n_local += len(gs)

    def put_global(self, g: Any) -> None:
        """``globrunqput``: a preempted goroutine (``gopreempt_m``) or one readied without a P."""
        self.glob.append(g)

    def net_ready(self, g: Any) -> None:
        """Network data arrived for ``g``: it waits for a ``netpoll`` (a P that ran dry, or sysmon)."""
        self.net.append(g)

    def hold_polled(self) -> int:
        """The network readied goroutines while an M was blocked in ``netpoll``: the kernel wakes
        that M and they wait for it, out of every other M's reach (none polls while
        ``sched.lastpoll == 0``). Returns how many are held in all."""
        self.held.extend(self.net)
        self.net.clear()
        return len(self.held)

    def release_polled(self, p: int) -> int:
        """The woken M runs: its ``netpoll`` returns the held batch. With P ``p`` (``pidleget``)
        it runs the first next and the rest wait at the head of the network's queue for its and
        the other Ps' next look (``injectglist``, as :meth:`take` polls them); without a P
        (``p < 0``) they all do. Returns how many were held."""
        held = self.held
        n = len(held)
        if not n:
            return 0
        if p >= 0:
            self.put_next(p, held.popleft())
        self.net.extendleft(reversed(held))
        held.clear()
        return n

    # taking --------------------------------------------------------------------------
    def peek_own(self, p: int) -> Any:
        """What ``runqget`` on P ``p`` returns next (runnext, then the local queue's head), or None."""
        if p >= len(self.local):
            return None
        g = self.next[p]
        if g is not None:
            return g
        q = self.local[p]
        return q[0] if q else None

    def pop_own(self, p: int) -> Any:
        """``runqget`` on P ``p``: runnext (inheriting the time slice), else the local queue's head."""
        g = self.next[p]
        if g is not None:
            self.next[p] = None
            self.n_local -= 1
            return g
        q = self.local[p]
        if not q:
            return None
        self.n_local -= 1
        self.ticks[p] += 1
        return q.popleft()

    def global_check_due(self, p: int) -> bool:
        """Whether P ``p``'s next schedule looks at the global queue first."""
        return bool(self.glob) and self.ticks[p] % GLOBAL_CHECK_EVERY == 0

    def take(self, p: int, now_ns: int, nprocs: int, npidle: int) -> Any:
        """``findRunnable`` on P ``p`` (``nprocs`` Ps, ``npidle`` of them idle), or None."""
        # (the hot path of every schedule: global_check_due and pop_own inlined)
        local = self.local
        n = len(local)
        if p >= n:
            self._grow(p)
            n = len(local)
        if n > nprocs:
            self.resize(nprocs)
        net, glob = self.net, self.glob
        if net and now_ns - self.last_poll_ns >= SYSMON_POLL_NS:
            # sysmon: injectglist without a P puts the whole batch on the global queue
            glob.extend(net)
            net.clear()
            self.last_poll_ns = now_ns
        if glob and self.ticks[p] % GLOBAL_CHECK_EVERY == 0:
            self.ticks[p] += 1
            return glob.popleft()
        g = self.next[p]
        if g is not None:
            self.next[p] = None
            self.n_local -= 1
            return g
        q = local[p]
        if q:
            self.n_local -= 1
            self.ticks[p] += 1
            return q.popleft()
        if glob:
            return self._globrunqget(p, nprocs)
        if net:
            return self._netpoll(p, now_ns, npidle)
        return self._steal(p)

    def _globrunqget(self, p: int, nprocs: int) -> Any:
        glob, q = self.glob, self.local[p]
        n = min(len(glob), len(glob) // max(1, nprocs) + 1)
        g = glob.popleft()
        for _ in range(n - 1):
            q.append(glob.popleft())
        self.n_local += n - 1
        self.ticks[p] += 1
        return g

    def _netpoll(self, p: int, now_ns: int, npidle: int) -> Any:
        net = self.net
        self.last_poll_ns = now_ns
        g = net.popleft()
        for _ in range(min(len(net), npidle)):
            self.glob.append(net.popleft())     # one for each idle P, which startIdle wakes
        self.n_local += len(net)
        self.local[p].extend(net)
        net.clear()
        self.ticks[p] += 1
        return g

    def _steal(self, p: int) -> Any:
        if self.n_local <= 0:
            return None
        n_ps = len(self.local)
        for i in range(n_ps):
            v = (self.steal_from + i) % n_ps
            vq = self.local[v]
            if v == p or not vq:
                continue
            k = (len(vq) + 1) // 2          # runqsteal: half of the victim's queue
            g = vq.popleft()
            q = self.local[p]
            for _ in range(k - 1):
                q.append(vq.popleft())
            self.n_local -= 1
            self.steal_from = v + 1
            self.ticks[p] += 1
            return g
        for i in range(n_ps):
            v = (self.steal_from + i) % n_ps
            if v != p and self.next[v] is not None:
                g, self.next[v] = self.next[v], None
                self.n_local -= 1
                self.steal_from = v + 1
                self.ticks[p] += 1
                return g
        return None
