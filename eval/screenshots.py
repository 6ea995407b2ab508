"""The chat's screenshots in eval/results/ (the README shows web_answer.png): `kb serve` on the
bundled knowledge base, Debian's chromium driven by Playwright, at desktop (1440x900) and phone
(390x844) size, light and dark. The browser tests take their pictures into a temporary folder;
only this script writes the committed ones.

    python eval/screenshots.py [--out eval/results] [--chromium /usr/bin/chromium]

Writes web_<state>_<size>[_dark].png for the states: empty (the first screen), answer (a pasted
log answered), panel (its source opened), and web_answer.png (the desktop answer with the panel).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
KEY_LINE = "ExternalError: Nccl error(2), unhandled system error"


def sample_log(lines: int = 400, seed: int = 7) -> str:
    """Training chatter with a traceback and the NCCL error at the end, as people paste it."""
    r = random.Random(seed)
    out = [
        f"I1123 10:{r.randint(10, 59)}:{r.randint(10, 59)} trainer.py:{r.randint(10, 300)}] step {i} loss {r.random():.4f}"
        for i in range(lines - 4)
    ]
    out += [
        "Traceback (most recent call last):",
        '  File "train.py", line 42, in <module>',
        "    dist.init_parallel_env()",
        KEY_LINE,
    ]
    return "\n".join(out)


@contextmanager
def served(home: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "KB_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kb", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(base + "/api/health", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("kb serve did not start") from None
                time.sleep(0.5)
        yield base + "/"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def answered(page, n: int) -> None:
    """Wait for answer number `n` to be complete (no "searching" placeholder, no cursor)."""
    from kb.doors.web.render import UI

    thinking = [UI["en"]["thinking"], UI["zh"]["thinking"]]
    page.wait_for_function(
        "([n, thinking]) => { const m = document.querySelectorAll('#kb-chat .bot-row'); if (m.length < n) return false;"
        " const t = m[m.length - 1].innerText; return !thinking.some(p => t.includes(p)) && !t.includes('▌'); }",
        arg=[n, thinking],
        timeout=60_000,
    )


def shoot(p, chromium: str, url: str, out: Path, size: str, dark: bool) -> None:
    w, h = SIZES[size]
    profile = tempfile.mkdtemp(prefix="kb-chromium-")  # a fresh profile each time
    ctx = p.chromium.launch_persistent_context(
        profile,
        executable_path=chromium,
        headless=True,
        args=ARGS,
        viewport={"width": w, "height": h},
        color_scheme="dark" if dark else "light",
        locale="en-US",
    )
    page = ctx.new_page()
    page.goto(url + ("?__theme=dark" if dark else "?__theme=light"))
    page.wait_for_selector("#kb-query textarea")
    page.wait_for_timeout(800)
    suffix = f"_{size}" + ("_dark" if dark else "")
    page.screenshot(path=str(out / f"web_empty{suffix}.png"))
    page.fill("#kb-query textarea", sample_log())
    page.press("#kb-query textarea", "Enter")
    answered(page, 1)
    page.wait_for_timeout(500)
    page.screenshot(path=str(out / f"web_answer{suffix}.png"))
    page.locator("#kb-chat .bot-row a", has_text="[1]").first.click()
    page.locator("#kb-entry .kb-entry").wait_for()
    page.wait_for_timeout(1200)  # the panel's highlight fades
    page.screenshot(path=str(out / f"web_panel{suffix}.png"))
    if size == "desktop" and not dark:
        shutil.copy(out / f"web_panel{suffix}.png", out / "web_answer.png")
    ctx.close()
    shutil.rmtree(profile, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "eval" / "results"))
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kb-shots-") as tmp, served(Path(tmp) / "home") as url:
        with sync_playwright() as p:
            for size in SIZES:
                for dark in (False, True):
                    shoot(p, args.chromium, url, out, size, dark)
                    print(f"wrote web_*_{size}{'_dark' if dark else ''}.png")


if __name__ == "__main__":
    main()
