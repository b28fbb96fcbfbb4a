"""``sync.Pool`` as the Go runtime keeps it: one cache per P, emptied into a victim cache at each
GC (Go 1.26, ``src/sync/pool.go``).

Why it matters under a CPU limit: a pooled object is live heap for as long as a P's cache or the
victim cache holds it, and every P that served a ``Get`` keeps the object it was given back. A
process that pools a large buffer therefore marks up to GOMAXPROCS of them each cycle: its heap
goal (and its memory) grows with GOMAXPROCS, not with its load. The case that made the lab's
heap goal grow about 0.5 MiB a P: Prometheus asks for gzip, and client_golang's ``promhttp``
compresses each ``/metrics`` response with a ``gzip.Writer`` from a ``sync.Pool``
(``prometheus/promhttp/http.go``, ``gzipPool``), whose ``compress/flate`` compressor holds about
796 KiB once it has written (measured with Go 1.26 on the lab host: 814,699 bytes a writer).

The rules, each from ``src/sync/pool.go``:

- ``Put`` on P ``p``: the object becomes ``p``'s private one, or goes on ``p``'s shared chain
  if the private slot is taken.
- ``Get`` on P ``p``: ``p``'s private object, else the head of ``p``'s shared chain, else
  (``getSlow``) the tail of another P's shared chain (a private object is never stolen), else
  the victim cache the same way (``p``'s victim private, then any P's victim shared; a miss
  there closes the victim cache to every later ``Get`` until the next GC), else ``New``: a fresh
  allocation.
- ``poolCleanup``, called by ``gcStart`` (``clearpools``, ``src/runtime/mgc.go``) with the world
  stopped: the victim caches are dropped and every primary cache becomes the victim cache. The
  victims stay reachable through ``oldPools`` for the cycle that starts, so that cycle marks
  them; what no ``Get`` takes back before the next cycle is garbage then.
"""
from __future__ import annotations


class PerPPool:
    """A ``sync.Pool`` of equally sized objects, counted per P (no object identities needed:
    every rule above depends only on how many objects each P's private slot, shared chain and
    victim hold). ``obj_bytes``: the size of one object."""

    __slots__ = ("obj_bytes", "private", "shared", "victim_private", "victim_shared", "victim_size", "in_use",
                 "news")

    def __init__(self, nprocs: int, obj_bytes: int):
        if obj_bytes <= 0:
            raise ValueError(f"obj_bytes must be > 0, got {obj_bytes}")
        self.obj_bytes = int(obj_bytes)
        n = max(1, int(nprocs))
        self.private = [0] * n
        self.shared = [0] * n
        self.victim_private = [0] * n
        self.victim_shared = [0] * n
        self.victim_size = 0  # victimSize: 0 once a Get found the victim cache empty for it
        self.in_use = 0      # taken by a Get and not yet put back
        self.news = 0        # objects New allocated

    def _fit(self, p: int) -> None:
        """A P beyond the primary caches' size (GOMAXPROCS raised since the last GC): ``pinSlow``
        allocates a new array of the new size and loses the old one with the objects in it; the
        victim cache keeps its size (``getSlow`` looks there only for Ps below it)."""
        if p >= len(self.private):
            self.private = [0] * (p + 1)
            self.shared = [0] * (p + 1)

    def get(self, p: int) -> bool:
        """``Get`` on P ``p``; True when it had to allocate (``New``)."""
        self._fit(p)
        self.in_use += 1
        if self.private[p]:
            self.private[p] = 0
            return False
        if self.shared[p]:
            self.shared[p] -= 1
            return False
        n = len(self.private)
        for i in range(1, n):
            q = (p + i) % n
            if self.shared[q]:
                self.shared[q] -= 1
                return False
        nv = self.victim_size
        if p < nv:
            if self.victim_private[p]:
                self.victim_private[p] = 0
                return False
            for i in range(nv):
                q = (p + i) % nv
                if self.victim_shared[q]:
                    self.victim_shared[q] -= 1
                    return False
            # "Mark the victim cache as empty for future gets don't bother with it": what it still
            # holds stays reachable until the next GC, but no Get takes it
            self.victim_size = 0
        self.news += 1
        return True

    def put(self, p: int) -> None:
        """``Put`` on P ``p`` of an object a ``Get`` handed out."""
        if self.in_use <= 0:
            raise ValueError("put without a get")
        self._fit(p)
        self.in_use -= 1
        if self.private[p]:
            self.shared[p] += 1
        else:
            self.private[p] = 1

    def held(self) -> int:
        """Objects reachable now: in the primary and victim caches, or in use."""
        return (sum(self.private) + sum(self.shared) + sum(self.victim_private) + sum(self.victim_shared)
                + self.in_use)

    def clear(self) -> int:
        """``poolCleanup`` at a GC's start: drop the victims, make the primaries the victims.
        Returns the bytes the cycle that starts marks (the new victims and the objects in use),
        all of them allocated before its mark."""
        n = len(self.private)
        self.victim_private, self.victim_shared = self.private, self.shared
        self.victim_size = n
        self.private, self.shared = [0] * n, [0] * n
        return (sum(self.victim_private) + sum(self.victim_shared) + self.in_use) * self.obj_bytes
