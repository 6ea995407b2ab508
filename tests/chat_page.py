"""The chat page as a person uses it, for the browser tests: a fresh chromium profile at a
given size and colour scheme, asking, waiting for an answer, opening a source, reading the
clipboard, and axe-core's verdict on the page (its script from the axe-playwright-python wheel,
injected into the page: nothing is fetched from elsewhere)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from kb.doors.web.render import UI

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Browser tests skip on a developer's machine without Debian's chromium; in CI (where .ci/run
# installs it) a missing browser fails them instead of passing unseen.
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists() and not IN_CI, reason="needs Debian's chromium: apt-get install -y chromium"
)


def require_chromium() -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"no browser at {CHROMIUM}: apt-get install -y chromium (.ci/run does)")


DESKTOP = (1440, 900)
PHONE = (390, 844)

# The last answer is complete: no "searching" placeholder, no streaming cursor.
ANSWERED = (
    "n => { const m = document.querySelectorAll('#kb-chat .bot-row'); if (m.length < n) return false;"
    " const t = m[m.length - 1].innerText;"
    f" return !{json.dumps([UI['en']['thinking'], UI['zh']['thinking']])}.some(p => t.includes(p))"
    " && !t.includes('▌') && !!document.querySelector('#kb-send') && document.querySelector('#kb-send').offsetParent !== null; }"
)


@contextmanager
def chat_page(url: str, size=DESKTOP, dark: bool = False, profile: str | None = None):
    """A page of the chat in a fresh profile (or `profile`, to reload with what it kept); fails
    if the page fetched anything from another server."""
    from playwright import sync_api

    require_chromium()
    own = profile is None
    folder = profile or tempfile.mkdtemp(prefix="kb-chromium-")
    outside: list[str] = []
    try:
        with sync_api.sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                folder,
                executable_path=str(CHROMIUM),
                headless=True,
                args=ARGS,
                viewport={"width": size[0], "height": size[1]},
                color_scheme="dark" if dark else "light",
                locale="en-US",
            )
            ctx.set_default_timeout(60_000)
            ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=url.rstrip("/"))
            tab = ctx.new_page()
            tab.on("request", lambda r: None if r.url.startswith((url, "data:")) else outside.append(r.url))
            tab.goto(url + ("?__theme=dark" if dark else "?__theme=light"))
            tab.wait_for_selector("#kb-query textarea")
            tab.wait_for_timeout(300)  # the page's script names things and restores the chat
            yield tab
            ctx.close()
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    assert outside == [], f"the page fetched from outside the server: {outside[:5]}"


def browser_page(url: str):
    """A tall desktop page of the chat in a fresh profile (the older browser tests)."""
    return chat_page(url, size=(1440, 1200))


def ask(page, text: str, n: int) -> str:
    """Fill the box, press Enter, wait for answer number `n`; its text."""
    page.fill("#kb-query textarea", text)
    page.press("#kb-query textarea", "Enter")
    page.wait_for_function(ANSWERED, arg=n)
    return bots(page).nth(n - 1).inner_text()


def bots(page):
    return page.locator("#kb-chat .bot-row")


def open_source(page, answer: int = 1):
    """Click citation [1] of an answer; the panel's entry once loaded."""
    bots(page).nth(answer - 1).locator("a", has_text="[1]").first.click()
    entry = page.locator("#kb-entry .kb-entry")
    entry.wait_for()
    page.wait_for_timeout(400)  # a phone's sheet slides in
    return entry


def clipboard(page) -> str:
    return page.evaluate("() => navigator.clipboard.readText()")


def set_box(page, text: str) -> None:
    """Put `text` in the box the way the page's paste handler does (a 20 MB paste would take
    minutes through the clipboard in a test)."""
    page.evaluate(
        "t => { const b = document.querySelector('#kb-query textarea'); b.value = t;"
        " b.dispatchEvent(new Event('input', {bubbles: true})); }",
        text,
    )


def serious_violations(page) -> list[tuple[str, str, list]]:
    """axe-core's serious and critical violations on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page).response["violations"]
    return [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for v in found
        if v["impact"] in ("serious", "critical")
    ]


def box_of(page, selector: str) -> dict:
    return page.evaluate(
        "s => { const r = document.querySelector(s).getBoundingClientRect();"
        " return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height}; }",
        selector,
    )


# WCAG contrast of an element's text against the first opaque background behind it, and that
# background's relative luminance (0 black .. 1 white).
_CONTRAST = """([s, pseudo]) => {
  const el = document.querySelector(s);
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
  let bg = null;
  for (let e = el; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) { bg = c; break; }
  }
  bg = bg || [255, 255, 255];
  const fg = rgb(getComputedStyle(el, pseudo || null).color);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return [(a + 0.05) / (b + 0.05), lum(bg)];
}"""


def contrast(page, selector: str, pseudo: str = "") -> tuple[float, float]:
    ratio, background = page.evaluate(_CONTRAST, [selector, pseudo])
    return ratio, background


def redone(page, action, n: int = 1) -> str:
    """Do `action` (a click that re-answers the last question) and wait until answer `n` has
    changed and is complete again: waiting for "complete" alone would pass before it starts."""
    page.evaluate(
        "() => { window.kbChanged = false; const c = document.querySelector('#kb-chat');"
        " new MutationObserver(() => { window.kbChanged = true; })"
        ".observe(c, {childList: true, subtree: true, characterData: true}); }"
    )
    action()
    page.wait_for_function("() => window.kbChanged")
    page.wait_for_function(ANSWERED, arg=n)
    page.wait_for_timeout(200)  # the page's script names the new message
    return bots(page).nth(n - 1).inner_text()
