"""Progress on stderr: a bar with a time estimate on a terminal, a few plain lines when piped (CI
logs), and one sentence before a long job says what it is ("building the bundled index in ...")."""

from __future__ import annotations

import sys
import time

# What each stage of a build is, in words (index/build.py and ingest name them).
STAGES = {
    "parse": ("reading documents", "files"),
    "embed": ("embedding", "texts"),
    "index": ("writing the index", "steps"),
    "link": ("linking translations", "entries"),
}
BAR_WIDTH = 28


class ProgressBar:
    def __init__(self, stream=None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_stage = ""
        self._last_print = 0.0
        self._last_pct = -1
        self._stage_start = 0.0

    def note(self, message: str) -> None:
        """One line that says what is about to happen and how long it takes."""
        if not self.quiet:
            self.stream.write(message + "\n")
            self.stream.flush()

    def __call__(self, stage: str, done: int, total: int, detail: str = "") -> None:
        if self.quiet or total <= 0:
            return
        now = time.monotonic()
        if stage != self._last_stage:
            self._stage_start = now
        name, unit = STAGES.get(stage, (stage, ""))
        pct = int(100 * done / total)
        if self.tty:
            if now - self._last_print < 0.1 and done < total and stage == self._last_stage:
                return
            self.stream.write("\r" + self._bar(name, unit, done, total, now, detail) + "\x1b[K")
            if done >= total:
                self.stream.write("\n")
        elif done >= total:
            # Piped (a CI log, a file): one line per stage, when it ends, with its time.
            self.stream.write(
                f"{name}: {total} {unit[:-1] if total == 1 else unit} ({now - self._stage_start:.1f}s)".replace(
                    "  ", " "
                )
                + "\n"
            )
        self._last_stage, self._last_pct, self._last_print = stage, pct, now
        self.stream.flush()

    def _bar(self, name: str, unit: str, done: int, total: int, now: float, detail: str) -> str:
        fill = BAR_WIDTH * done // total
        bar = "█" * fill + "░" * (BAR_WIDTH - fill)
        elapsed = now - self._stage_start
        left = ""
        if 0 < done < total and elapsed > 1.0:
            left = f"  ~{elapsed * (total - done) / done:.0f}s left"
        return f"{name:>20} {bar} {done}/{total} {unit}{left}  {detail[:30]}"
