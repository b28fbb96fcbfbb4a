"""Measure up to which utilization a waker thread and the thread it wakes settle on one CPU on
this host although another CPU is idle, with ``lab/cmd/packbench``: a measurement of the host's
scheduler, kept beside the parameters it explains, not a parameter itself.

    python -m cfsim lab wakepack --out docs/params/lab-host-wakepack.toml [--rounds 2]

Mainline Linux puts such a wakee on an idle CPU that shares the cache (``select_task_rq_fair`` ->
``select_idle_sibling`` in kernel/sched/fair.c), so the waker runs on. The lab's VM (kernel
6.18.44-fc, with a sysctl ``kernel.sched_vcpu_pack`` that mainline has not) keeps the pair on one
CPU while the waker's utilization plus the wakee's is low, and on two above: the bound depends on
the sum, not on either thread alone. The benchmark's waker thread is busy X us, writes a byte to a
pipe (a sync wake-up: ``pipe_write`` in fs/pipe.c calls ``wake_up_interruptible_sync_poll``), is
busy Z us more and sleeps S us; its wakee reads the byte and is busy Y us. Neither is pinned. Per
setting and round it reports each thread's CPU over the wall time (``waker_util``,
``wakee_util``; the kernel's PELT average of kernel/sched/pelt.c settles on the same share of a
steady pattern) and the share of wake-ups on which the wakee ran on the CPU its waker wrote from
(``same_cpu_share``).

``pair_pack_util`` is the midpoint between the largest ``util_sum`` among the settings that
packed (``same_cpu_share`` >= 0.5) and the smallest among those that spread: the two ends of the
band the bound lies in. The lab's own service shows how the pair gets there: a woken thread mostly
goes back to the CPU it last ran on (``cfsim.lab.wakeplace``, split by the previous CPU), so the
bound decides which CPU the pair settles on, and the model follows the wake-ups' split shares
(``host.wake_affine_share``, ``host.wake_affine_share_away``) rather than the bound; the file's
``[params]`` is empty. Settings run beside other load on the host (``other_util``: /proc/stat's
busy time less the benchmark's own) or whose wakee was often not asleep at the write are left
out: a busy neighbour leaves no idle CPU to spread to.

``read_packbench`` parses the benchmark's JSON lines (``(rows, meta)``, pvlib style) and names
the line of anything malformed; ``pack_params`` fits and refuses a measurement without settings
on both sides of the bound, or one the bound does not separate.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from cfsim.lab.benchout import run_bench, json_lines, number_row, params_toml_text

_FIELDS = ("round", "waker_busy_us", "wakee_busy_us", "sleep_us", "wakes", "waker_util", "wakee_util", "util_sum",
           "same_cpu_share")
#: optional numbers the benchmark adds (kept when present; ``None`` where it wrote null)
_OPTIONAL = ("point", "waker_busy_before_write_us", "wall_s", "wakee_cpu_changes", "waker_cpu_changes",
             "wake_latency_us_same_median", "wake_latency_us_other_median", "waker_blocks_per_cycle",
             "wakee_blocks_per_wake", "other_util", "cpus")
#: a setting packs when at least this share of its wake-ups ran on the waker's CPU
PACKED_SHARE = 0.5
#: a fit that misplaces more than this share of the settings does not describe a bound
MAX_MISCLASSIFIED = 0.10
#: the rest of the host busier than this share of a CPU while a setting ran: left out (the idle CPU
#: the kernel would spread to was not idle the whole time); /proc/stat's ticks make the figure
#: about +-0.03 on a quiet host
MAX_OTHER_UTIL = 0.10
#: a wakee that blocked on fewer of its reads than this was often still busy when the byte came:
#: those reads were no wake-ups
MIN_BLOCKS_PER_WAKE = 0.9
#: left out for a busy host on more than this share of the settings: refused, not fitted
MAX_EXCLUDED = 0.25
SYSCTL = Path("/proc/sys/kernel/sched_vcpu_pack")


class PackbenchError(ValueError):
    pass


def read_packbench(text: str, source: str = "packbench output") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The benchmark's rows (one per setting and round) and ``{"source", "rounds", "settings",
    "cpus"}`` (``cpus`` the CPUs it was allowed, ``None`` if the lines do not say).

    >>> rows, meta = read_packbench('{"round": 0, "waker_busy_us": 300, "wakee_busy_us": 20, "sleep_us": 140, '
    ...     '"wakes": 2000, "waker_util": 0.6, "wakee_util": 0.05, "util_sum": 0.65, "same_cpu_share": 0.99, '
    ...     '"other_util": null, "cpus": 2}')
    >>> rows[0]["util_sum"], rows[0]["other_util"], meta["rounds"], meta["cpus"]
    (0.65, None, 1, 2)
    >>> read_packbench('{"round": 0, "waker_busy_us": 300}', "pb.jsonl")
    Traceback (most recent call last):
    ...
    cfsim.lab.wakepack.PackbenchError: pb.jsonl line 1: missing wakee_busy_us, sleep_us, wakes, waker_util, wakee_util, util_sum, same_cpu_share
    """
    rows: list[dict[str, Any]] = []
    cpus = set()
    for i, d in json_lines(text, source, PackbenchError):
        row = number_row(d, _FIELDS, source, i, PackbenchError)
        if row["wakes"] <= 0:
            raise PackbenchError(f"{source} line {i}: no wake-ups")
        if not 0.0 <= row["same_cpu_share"] <= 1.0:
            raise PackbenchError(f"{source} line {i}: same_cpu_share must be within 0 and 1 "
                                 f"(got {d['same_cpu_share']!r})")
        if row["waker_util"] < 0 or row["wakee_util"] < 0:
            raise PackbenchError(f"{source} line {i}: a negative utilization")
        for k in _OPTIONAL:
            if k not in d:
                continue
            if d[k] is not None and (isinstance(d[k], bool) or not isinstance(d[k], (int, float))):
                raise PackbenchError(f"{source} line {i}: {k} is not a number (got {d[k]!r})")
            row[k] = d[k]
        for k in ("round", "wakes", "waker_busy_us", "wakee_busy_us", "sleep_us"):
            row[k] = int(row[k])
        if row.get("cpus") is not None:
            cpus.add(int(row["cpus"]))
        rows.append(row)
    if not rows:
        raise PackbenchError(f"{source}: no measurements")
    settings = {(r["waker_busy_us"], r["wakee_busy_us"], r["sleep_us"], r.get("waker_busy_before_write_us"))
                for r in rows}
    return rows, {"source": source, "rounds": len({r["round"] for r in rows}), "settings": len(settings),
                  "cpus": cpus.pop() if len(cpus) == 1 else None}


def exclusion(row: dict[str, Any]) -> str | None:
    """Why a row says nothing about the bound (``None``: it does): the rest of the host was busy
    (``other_util`` above :data:`MAX_OTHER_UTIL`), or the wakee was often still busy when the byte
    came (blocks per wake-up below :data:`MIN_BLOCKS_PER_WAKE`).

    >>> exclusion({"other_util": 0.02, "wakee_blocks_per_wake": 1.0}) is None
    True
    >>> exclusion({"other_util": 0.95})
    'the rest of the host used 0.95 of a CPU'
    """
    other = row.get("other_util")
    if other is not None and other > MAX_OTHER_UTIL:
        return f"the rest of the host used {other:.2f} of a CPU"
    blocks = row.get("wakee_blocks_per_wake")
    if blocks is not None and blocks < MIN_BLOCKS_PER_WAKE:
        return f"the wakee blocked on {blocks:.2f} of its reads"
    return None


def pack_params(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The fit: ``pair_pack_util`` (the midpoint of the band), ``band`` ([the largest
    ``util_sum`` that packed, the smallest that spread]), ``misclassified`` (settings on the wrong
    side of the midpoint), ``points`` (settings fitted) and ``excluded`` (left out, see
    :func:`exclusion`). Refuses a measurement without settings on both sides, one in which more
    than :data:`MAX_MISCLASSIFIED` of the settings fall on the wrong side, or one with more than
    :data:`MAX_EXCLUDED` of them left out.

    >>> rows = [{"util_sum": s, "same_cpu_share": share} for s, share in
    ...         ((0.3, 1.0), (0.5, 0.95), (0.64, 0.99), (0.71, 0.0), (0.8, 0.01), (0.92, 0.0))]
    >>> pack_params(rows)
    {'pair_pack_util': 0.675, 'band': [0.64, 0.71], 'misclassified': 0, 'points': 6, 'excluded': 0}
    """
    rows = list(rows)
    kept = [r for r in rows if exclusion(r) is None]
    excluded = len(rows) - len(kept)
    if rows and excluded > MAX_EXCLUDED * len(rows):
        why = "; ".join(sorted({str(exclusion(r)) for r in rows if exclusion(r) is not None}))
        raise PackbenchError(f"{excluded} of {len(rows)} settings left out ({why}): run it again on a quiet host")
    if not kept:
        raise PackbenchError("no settings to fit")
    packed = [r["util_sum"] for r in kept if r["same_cpu_share"] >= PACKED_SHARE]
    spread = [r["util_sum"] for r in kept if r["same_cpu_share"] < PACKED_SHARE]
    if not packed:
        raise PackbenchError(f"no setting packed (same_cpu_share >= {PACKED_SHARE}; lowest util_sum "
                             f"{min(spread, default=float('nan')):.3f}): this kernel spreads a wake-up to the "
                             "idle CPU as mainline's select_idle_sibling does, so there is no bound to fit")
    if not spread:
        raise PackbenchError(f"every setting packed, up to util_sum {max(packed):.3f}: the bound lies above the "
                             "grid, or another CPU was never idle (a busy host)")
    lo, hi = max(packed), min(spread)
    theta = round((lo + hi) / 2, 3)
    wrong = sum(1 for r in kept if (r["util_sum"] < theta) != (r["same_cpu_share"] >= PACKED_SHARE))
    if wrong > MAX_MISCLASSIFIED * len(kept):
        raise PackbenchError(f"the settings that packed and those that spread overlap: util_sum up to {lo:.3f} "
                             f"packed and from {hi:.3f} spread, so the midpoint {theta} misplaces {wrong} of "
                             f"{len(kept)} (more than {MAX_MISCLASSIFIED:.0%}): the placement does not follow "
                             "the sum of the two utilizations here")
    return {"pair_pack_util": theta, "band": [round(lo, 4), round(hi, 4)], "misclassified": wrong,
            "points": len(kept), "excluded": excluded}


def vcpu_pack_sysctl(path: Path = SYSCTL) -> str | None:
    """The value of this kernel's ``kernel.sched_vcpu_pack`` (not in mainline), ``None`` without it."""
    try:
        return path.read_text().strip()
    except OSError:
        return None


def run_packbench(binary: Path, rounds: int = 2, timeout_s: float | None = None, grid: str = "default",
                  dur_s: float = 1.2) -> str:
    """Run the benchmark (21 settings of about ``dur_s`` per round with the default grid, 3 with
    ``grid="quick"``) and return its output."""
    if rounds < 1:
        raise PackbenchError(f"--rounds must be >= 1 (got {rounds})")
    if timeout_s is None:
        timeout_s = 60.0 + rounds * 21 * dur_s * 3
    return run_bench(binary, ["-rounds", str(rounds), "-grid", grid, "-dur", str(dur_s)], timeout_s, PackbenchError)


def _f(v: Any, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def _order(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows by utilization sum, so the comment table reads across the bound."""
    return sorted(rows, key=lambda r: (r["util_sum"], r["round"]))


def params_toml(fit: dict[str, Any], rows: list[dict[str, Any]], command: str, sysctl: str | None = None) -> str:
    """A ``--params`` file (``[params]`` for ``cfsim validate/run --params``) with the measurement
    it came from as comments and a ``[measurement]`` table (the band and every setting)."""
    about = [
        "# Up to which utilization this host's kernel puts a thread woken by a running thread on the",
        "# waker's own CPU although another CPU is idle, measured by lab/cmd/packbench: a waker thread",
        "# is busy X us, writes a byte to a pipe (a sync wake-up: pipe_write in fs/pipe.c), is busy Z us",
        "# and sleeps S us; its wakee reads the byte and is busy Y us; neither pinned. Mainline puts the",
        "# wakee on the idle CPU (select_task_rq_fair -> select_idle_sibling, kernel/sched/fair.c); this",
        "# kernel keeps it beside its waker while the waker's utilization plus the wakee's (each thread's",
        "# CPU over wall time, the share PELT in kernel/sched/pelt.c settles on) stays below a bound.",
        "# pair_pack_util = the midpoint between the largest sum that packed (same CPU on >= 50 % of the",
        "# wake-ups) and the smallest that spread. A measurement, no parameter: the model follows the",
        "# service's wake-ups split by the wakee's previous CPU (lab-host-wakeplace.toml), which this bound",
        "# explains (a pair settles on one CPU below it, on two above).",
        f"# Band: packed up to {fit['band'][0]}, spread from {fit['band'][1]}; {fit['misclassified']} of "
        f"{fit['points']} settings on the wrong side of the midpoint; {fit['excluded']} left out (busy host).",
    ]
    if sysctl is not None:
        about.append(f"# kernel.sched_vcpu_pack = {sysctl} (/proc/sys/kernel/sched_vcpu_pack).")
    legend = ["# by util_sum: round, X+Z (X) / Y / S [us]: waker util + wakee util = sum; same-CPU share;",
              "#   median wake-to-run latency [us] on the waker's CPU / on another; rest of the host [CPU]"]
    table = []
    for r in _order(rows):
        why = exclusion(r)
        table.append(
            f"#   {r['round']}, {r['waker_busy_us']} ({_f(r.get('waker_busy_before_write_us'), 'g')}) / "
            f"{r['wakee_busy_us']} / {r['sleep_us']}: {r['waker_util']:.3f} + {r['wakee_util']:.3f} = "
            f"{r['util_sum']:.3f}; {r['same_cpu_share']:.3f}; {_f(r.get('wake_latency_us_same_median'), '.1f')} / "
            f"{_f(r.get('wake_latency_us_other_median'), '.1f')}; {_f(r.get('other_util'), '.2f')}"
            + (f"  left out: {why}" if why else ""))
    text = params_toml_text(about, command, legend, table, {})
    lines = ["", "[measurement]", f"pair_pack_util = {fit['pair_pack_util']}", f"rounds = {len({r['round'] for r in rows})}",
             f"band = [{fit['band'][0]}, {fit['band'][1]}]", f"misclassified = {fit['misclassified']}",
             f"points = {fit['points']}", f"excluded = {fit['excluded']}"]
    if sysctl is not None and sysctl.isdigit():
        lines.append(f"sched_vcpu_pack = {int(sysctl)}")
    lines.append("setting = [")
    keys = ("round", "waker_busy_us", "wakee_busy_us", "sleep_us", "wakes", "waker_util", "wakee_util", "util_sum",
            "same_cpu_share")
    for r in _order(rows):
        cells = ", ".join(f"{k} = {r[k]}" for k in keys)
        if r.get("other_util") is not None:
            cells += f", other_util = {r['other_util']}"
        cells += f", fitted = {'false' if exclusion(r) else 'true'}"
        lines.append(f"    {{{cells}}},")
    lines.append("]")
    return text + "\n".join(lines) + "\n"
