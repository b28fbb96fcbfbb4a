"""The memory cgroup's rules for one container, as pure functions.

Sources: ``Documentation/admin-guide/cgroup-v1/memory.rst`` (``memory.usage_in_bytes`` counts
the group's anonymous pages and page cache, "rss + cache"; reaching ``memory.limit_in_bytes``
triggers reclaim and, when reclaim cannot free enough, the OOM killer, counted in
``memory.oom_control`` ``oom_kill``), ``Documentation/admin-guide/cgroup-v2.rst``
(``memory.current``, ``memory.max``, ``memory.events`` ``oom_kill``) and ``mm/memcontrol.c``
(``try_charge``: a charge over the limit reclaims, then ``mem_cgroup_oom``). Anonymous memory
is reclaimable only to swap; Kubernetes nodes run without swap by default, so a container's
anonymous memory over its limit is an OOM kill. cAdvisor's ``container_memory_working_set_bytes``
is usage minus inactive file pages (``pkg/container/libcontainer/handler.go``); the kubelet
evicts and the VPA recommends from it.
"""
from __future__ import annotations

MiB = 1 << 20


def usage_bytes(anon_bytes: int, cache_bytes: int = 0, kernel_bytes: int = 0) -> int:
    """``memory.usage_in_bytes`` / ``memory.current``: anonymous + page cache (+ kernel memory
    charged to the group).

    >>> usage_bytes(100, 20, 3)
    123
    """
    return int(anon_bytes + cache_bytes + kernel_bytes)


def working_set_bytes(usage: int, inactive_file_bytes: int = 0) -> int:
    """cAdvisor's working set: usage minus inactive file pages, never negative.

    >>> working_set_bytes(120, 30), working_set_bytes(10, 30)
    (90, 0)
    """
    return max(0, int(usage - inactive_file_bytes))


def oom_kill(anon_bytes: int, cache_bytes: int, kernel_bytes: int, limit_bytes: int | None,
             swap_bytes: int = 0) -> bool:
    """Whether a charge that brings the group to this state ends in an OOM kill: reclaim can drop
    the page cache (and swap anonymous pages out, if swap is allowed), but not below what
    remains; anything that still exceeds the limit invokes the OOM killer.

    >>> oom_kill(90 * MiB, 20 * MiB, 0, 100 * MiB)       # the cache is reclaimed
    False
    >>> oom_kill(101 * MiB, 0, 0, 100 * MiB), oom_kill(101 * MiB, 0, 0, None)
    (True, False)
    """
    if limit_bytes is None:
        return False
    unreclaimable = max(0, anon_bytes - swap_bytes) + kernel_bytes
    return unreclaimable > limit_bytes
