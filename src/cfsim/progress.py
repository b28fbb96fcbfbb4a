"""Progress of long commands: a tqdm bar on a terminal, a few quiet lines (or nothing) elsewhere.

Libraries take a plain callback (``progress(done, total)`` or a :class:`Progress`); the commands
decide how it shows. ``--no-progress`` turns every form off.

>>> with Progress(3, "demo", enabled=False) as bar:
...     for _ in range(3):
...         bar.advance()
>>> bar.done
3
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

__all__ = ["Progress", "TimedProgress", "is_terminal"]


def is_terminal(stream: TextIO | None = None) -> bool:
    """True when ``stream`` (default stderr) is an interactive terminal."""
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """``with Progress(total, desc) as bar: bar.advance()``.

    On a terminal: a tqdm bar on stderr (ETA when ``total`` is known, a counter otherwise). Not
    on a terminal: nothing, or with ``lines=True`` one line per 10 % (logs of unattended runs stay
    short). ``enabled=False`` (``--no-progress``): nothing at all.
    """

    def __init__(self, total: int | None = None, desc: str = "", unit: str = "it", enabled: bool = True,
                 initial: int = 0, lines: bool = False, stream: TextIO | None = None):
        self.total, self.desc, self.unit = total, desc, unit
        self.enabled, self.lines = enabled, lines
        self.done = initial
        self.initial = initial
        self.stream = stream if stream is not None else sys.stderr
        self._bar: Any = None
        self._next_line = 0.0

    def __enter__(self) -> "Progress":
        if self.enabled and is_terminal(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, initial=self.initial, desc=self.desc, unit=self.unit,
                             file=self.stream, dynamic_ncols=True, smoothing=0.1, mininterval=0.5, leave=False)
        return self

    def set_total(self, total: int | None) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def advance(self, n: int = 1, note: str | None = None) -> None:
        self.done += n
        if self._bar is not None:
            if note:
                self._bar.set_postfix_str(note, refresh=False)
            self._bar.update(n)
        elif self.enabled and self.lines and self.total:
            frac = self.done / self.total
            if frac + 1e-9 >= self._next_line or self.done >= self.total:
                self._next_line = (int(frac * 10 + 1e-9) + 1) / 10
                extra = f" ({note})" if note else ""
                print(f"{self.desc}: {self.done}/{self.total} {self.unit}{extra}", file=self.stream, flush=True)

    def advance_to(self, done: int) -> None:
        """Advance to ``done`` items in all (the ``progress(n)`` callback form)."""
        if done > self.done:
            self.advance(done - self.done)

    def __call__(self, done: int, total: int) -> None:
        """The ``progress(done, total)`` callback form the libraries take."""
        if total != self.total:
            self.set_total(total)
        if done > self.done:
            self.advance(done - self.done)

    def write(self, text: str) -> None:
        """A message that does not break the bar (stderr)."""
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class TimedProgress(Progress):
    """A bar over wall time for one long step whose length is known in advance (a lab run):
    a background thread advances it once per second until the step returns."""

    def __init__(self, expected_s: float, desc: str = "", enabled: bool = True, stream: TextIO | None = None):
        super().__init__(int(max(1, round(expected_s))), desc, "s", enabled, stream=stream)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "TimedProgress":
        super().__enter__()
        if self._bar is not None:
            t0 = time.monotonic()

            def tick() -> None:
                while not self._stop.wait(1.0):
                    elapsed = int(time.monotonic() - t0)
                    if elapsed > self.done:
                        if self.total is not None and elapsed > self.total:
                            self.set_total(elapsed)
                        self.advance(elapsed - self.done)

            self._thread = threading.Thread(target=tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        super().__exit__(*exc)
