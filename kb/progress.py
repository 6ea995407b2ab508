"""Progress on stderr: a live bar on a terminal, a few plain lines when piped (CI logs)."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    def __init__(self, stream=None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_stage = ""
        self._last_print = 0.0
        self._last_pct = -1

    def __call__(self, stage: str, done: int, total: int, detail: str = "") -> None:
        if self.quiet or total <= 0:
            return
        pct = int(100 * done / total)
        now = time.monotonic()
        if self.tty:
            if now - self._last_print < 0.1 and done < total:
                return
            width = 30
            fill = int(width * done / total)
            self.stream.write(
                f"\r{stage:>6} [{'#' * fill}{'.' * (width - fill)}] {done}/{total} {detail[:40]:<40}"
            )
            if done >= total:
                self.stream.write("\n")
        else:
            # Piped: one line per stage start, every 25%, and the end.
            if stage != self._last_stage or pct // 25 > self._last_pct // 25 or done >= total:
                self.stream.write(f"{stage}: {done}/{total}\n")
        self._last_stage, self._last_pct, self._last_print = stage, pct, now
        self.stream.flush()
