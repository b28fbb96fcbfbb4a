"""Facts about the running kernel that the model needs and the lab records."""
from __future__ import annotations

import gzip
import platform
import re
from pathlib import Path

_HZ = re.compile(rb"^CONFIG_HZ=(\d+)$", re.M)


def kernel_hz(release: str | None = None) -> int | None:
    """The scheduler tick rate ``CONFIG_HZ`` of the running kernel (None if not readable).

    Read from ``/proc/config.gz`` or ``/boot/config-<release>``; it sets how far a CPU can
    overrun its runtime before ``update_curr`` notices (one tick).
    """
    release = release or platform.release()
    sources = [Path("/proc/config.gz"), Path(f"/boot/config-{release}")]
    for path in sources:
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        if path.suffix == ".gz":
            try:
                raw = gzip.decompress(raw)
            except OSError:
                continue
        m = _HZ.search(raw)
        if m:
            return int(m.group(1))
    return None
