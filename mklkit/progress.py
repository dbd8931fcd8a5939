"""Progress on stderr for the command line (:mod:`mklkit.cli`), the one path it draws through: lines
(at most one a second) and tqdm bars (tqdm imported on the first bar drawn)."""

from __future__ import annotations

import sys
import time
from typing import Any

#: Throttled lines and bars start once the work has run this long (seconds) ...
AFTER_S = 1.0
#: ... and throttled lines are written at most this often.
EVERY_S = 1.0


def _tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A command's progress on stderr; nothing at all when not ``enabled`` (``--quiet``)."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self.last = -1.0
        self.bars: dict[str, Any] = {}

    def due(self) -> float | None:
        """The seconds elapsed when a throttled line is due now (and counts as written), else None."""
        if not self.enabled:
            return None
        now = time.perf_counter() - self.t0
        if now < AFTER_S or (self.last >= 0 and now - self.last < EVERY_S):
            return None
        self.last = now
        return now

    def line(self, text: str) -> None:
        """Write a line now, above any bar being drawn."""
        if not self.enabled:
            return
        if self.bars:  # above the bars, which are drawn again below it
            from tqdm import tqdm

            tqdm.write(text, file=sys.stderr)
            return
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def bar(self, what: str, done: int, total: int, elapsed_s: float, unit: str = "it") -> None:
        """Bar ``what`` at ``done`` of ``total``, on a terminal once the work runs longer than :data:`AFTER_S`;
        closed when ``done`` reaches ``total``."""
        if not self.enabled or not _tty():
            return
        bar = self.bars.get(what)
        if bar is None:
            if elapsed_s < AFTER_S and done < total:
                return
            from tqdm import tqdm

            bar = self.bars[what] = tqdm(total=total, desc=f"mklkit: {what}", unit=unit, leave=False, file=sys.stderr)
        bar.update(done - bar.n)
        if done >= total:
            bar.refresh()
            self.bars.pop(what).close()
