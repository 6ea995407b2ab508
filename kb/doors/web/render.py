"""What the web door shows: the chat's answer markdown, the entry panel's HTML and the page's
own HTML/CSS/JS. Pure functions and strings (no gradio, no FastAPI), so they are tested without
a server and kb/doors/web/chat.py keeps only the serving.

FAQ text and model answers are untrusted: entry HTML is rendered with raw HTML off, chat markdown
is rewritten by `escape_md_html` so that no HTML of theirs reaches the page (the chat's sanitizer
runs on top, but is not relied on), and no remote image is ever rendered: an image in an answer
(`![x](http://host/?d=<the user's paste>)`) would make the browser send data to that host, and
one in a FAQ is a tracking beacon. Images are shown as their text and URL instead.
"""

from __future__ import annotations

import bisect
import html
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from ...answer import LABELS, Answer
from ...present import Lookup, Ref, block_caution, entry_url, present
from .assets import PANEL_CSS

if TYPE_CHECKING:
    from ...service import KnowledgeBase

LOG_PREVIEW_LINES = 8  # a pasted log is shown in the chat by its last lines (all of it is searched)


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


# A body longer than this is shown as plain text: a 2 MB table took 18 s to lay out, on every
# request for its page. What is laid out is kept (the same body is asked for again and again).
MAX_LAID_OUT_CHARS = 200_000


def _plain(note: str, text: str) -> str:
    return f'<p class="kb-note">{note}</p><pre class="kb-plain">{html.escape(text)}</pre>'


def _markdown(text: str) -> str:
    if len(text) > MAX_LAID_OUT_CHARS:  # not kept: a 3 MB body is 13 MB of HTML
        return _plain("Too long to lay out; shown as plain text. · 内容过长，按纯文本显示。", text)
    return _laid_out(text)


@lru_cache(maxsize=64)  # at most 64 bodies of 200,000 characters: about 45 MB of HTML
def _laid_out(text: str) -> str:
    from markdown_it import MarkdownIt

    # html=False: a <script> (or any tag) in a FAQ is escaped and shown as text, never run.
    # markdown-it also refuses javascript:/vbscript:/data: link targets.
    md = MarkdownIt("commonmark", {"html": False, "maxNesting": MAX_NESTING}).enable("table")
    md.add_render_rule("image", _image_as_text)
    tokens = md.parse(text)
    if any(t.level >= MAX_NESTING - 1 for t in tokens):  # content past this level was dropped
        return _plain("Nested too deeply to lay out; shown as plain text. · 嵌套过深，按纯文本显示。", text)
    return md.renderer.render(tokens, md.options, {})


def entry_html(kb: KnowledgeBase, e) -> str:
    """One entry: title, source path and lines, full body, and its other-language version."""
    esc = html.escape
    url = entry_url(kb.settings.docs_base_url, e)
    src = f"<code>{esc(e.location)}</code>"
    if url:
        src = f'<a href="{esc(url)}" target="_blank" rel="noopener">{src}</a>'
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
            f'<details class="kb-translation" open><summary>{esc(label)} · <code>{esc(other.location)}</code></summary>',
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
        "log_shown": "{n}-line log (the last {k} lines shown)",
        "copy_log": "copy all {n} lines",
        "share": "Link to this answer",
        "stopped": "Stopped.",
        "busy": "An answer is still coming: press Stop, or send again when it ends. Your text stays here.",
        "error": "Something went wrong on the server ({kind}). Try again; if it persists, check the server log.",
    },
    "zh": {
        "thinking": "正在检索知识库…",
        "log_shown": "{n} 行日志（显示最后 {k} 行）",
        "copy_log": "复制全部 {n} 行",
        "share": "本回答的链接",
        "stopped": "已停止。",
        "busy": "回答还在生成：可以按“停止”，或等它结束后再发送。你输入的内容会保留。",
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
    for run in re.finditer(r"`+", s):
        runs.setdefault(len(run.group(0)), []).append(run.start())
    out: list[str] = []
    pos = 0
    line_head = True  # only spaces and quote marks so far on this line (kept linear: no look-back)
    while (m := _PROSE_SPECIAL.search(s, pos)) is not None:
        before = s[pos : m.start()]
        out.append(before)
        newline = before.rfind("\n")
        line_head = (line_head or newline >= 0) and not before[newline + 1 :].strip(" \t")
        token, pos = m.group(0), m.end()
        if token == ">" and line_head:
            out.append(">")  # a blockquote's marker (a note, a warning): marked makes a quote of it
            continue
        line_head = token == "\\\n"
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


def _label_fences(md: str, lang: str) -> str:
    """A code block inside the answer text that holds a destructive command or a placeholder gets
    its label too (kb/present.py block_caution). The fences here are the ones escape_md_html
    wrote (its own, at column 0); the label's `<` and `>` are written as entities."""

    def sub(m: re.Match) -> str:
        label = block_caution(m.group(0).split("\n")[1:-1], lang)
        return f"> ⚠ **{_prose(label)}**\n\n{m.group(0)}" if label else m.group(0)

    return _FENCE.sub(sub, md)


def _ref_line(r: Ref, label: str) -> str:
    # The location is a file name: a backtick in it would end a code span written here and let
    # the rest of the name (`<img src=...>`) in as HTML.
    return f"- {entry_link(r.entry, label)} · {_inline_code(r.location)}"


BADGE = {"match": "✓", "weak": "≈", "none": "✗"}
SHARE_QUERY_BYTES = 4000  # a link to an answer carries the question, or the key part of a log


def _head(p) -> list[str]:
    """How strong the match is, the entry's title as the answer's heading, and the quoted line
    of the paste that matched (kb/present.py decides them). A word back to thanks has none: it
    was no search, so "No match" would be a verdict on nothing."""
    if p.reply:
        return []
    out = [f"**{BADGE[p.strength]} {escape_md_html(p.strength_label)}**"]
    if p.headline is not None:
        out.append(f"## {entry_link(p.headline.entry)}")
    if p.warning:
        out.append(f"> ⚠ {escape_md_html(p.warning)}")
    if p.matched_line:
        out.append(f"{escape_md_html(p.labels['matched_line'])}: {_inline_code(p.matched_line)}")
    return out


def share_link(query: str, lang: str | None, label: str) -> str:
    """A link that asks the question again (`#ask=`): the page's script copies it. The question
    stays in the fragment, never sent to a server or written to its log."""
    from urllib.parse import quote

    from ...query import excerpt

    q = excerpt(query, SHARE_QUERY_BYTES).text
    lang_part = f"&lang={lang}" if lang in ("zh", "en") else ""
    return f"[{escape_md_html(label)}](#ask={quote(q, safe='')}{lang_part})"


def render_answer(
    answer: Answer, docs_base_url: str = "", lookup: Lookup | None = None, share: str = ""
) -> str:
    """The chat's markdown for an answer, as kb/present.py decides what it shows; `share` is a
    link to the answer (share_link), shown last."""
    p = present(answer, docs_base_url, lookup)
    labels = p.labels
    out: list[str] = []
    if p.notice:
        out.append(f"> ℹ {escape_md_html(p.notice)}")
    out += _head(p)
    if p.no_match:
        out.append(escape_md_html(p.text))
        if p.suggestions:
            out.append(labels["suggest"])
            out.append("\n".join(_ref_line(r, r.title) for r in p.suggestions))
        return "\n\n".join([*out, share] if share else out)
    out.append(_label_fences(link_citations(escape_md_html(p.text), answer), p.lang))
    if p.commands:
        out.append(f"**{labels['commands']}**")
        for c in p.commands:
            if c.caution:
                out.append(f"> ⚠ **{_prose(c.caution)}**")
            out.append(code_block(c.text))
    if p.sources:
        out.append(f"**{labels['sources']}**")
        lines = [_ref_line(r, f"[{r.n}] {r.title}") for r in p.sources]
        if p.other_language is not None:
            lines.append(_ref_line(p.other_language, f"{labels['other_lang']}: {p.other_language.title}"))
        out.append("\n".join(lines))
    return "\n\n".join([*out, share] if share else out)


def utf16_length(text: str) -> int:
    """The length the page's script sees (JavaScript strings count UTF-16 units)."""
    return len(text.encode("utf-16-le")) // 2


def render_user(message: str, lang: str, kept: str = "") -> str:
    """A pasted log is shown by its last lines (where the error usually is), with a link that
    copies all of it (the page's script keeps the paste, keyed by its length); a question as
    text. `kept`: what was searched of a paste over the query limit."""
    lines = message.rstrip("\n").split("\n")
    if len(lines) <= LOG_PREVIEW_LINES:
        shown = code_block(message.rstrip("\n"), "text") if len(lines) > 1 else escape_md_html(message)
        return f"*{escape_md_html(kept)}*\n\n{shown}" if kept else shown
    ui = UI[lang]
    note = ui["log_shown"].format(n=len(lines), k=LOG_PREVIEW_LINES)
    copy = f"[{ui['copy_log'].format(n=len(lines))}](#kb-log-{utf16_length(message)})"
    head = f"*{note}* · {copy}" + (f"\n\n*{escape_md_html(kept)}*" if kept else "")
    return head + "\n\n" + code_block("\n".join(lines[-LOG_PREVIEW_LINES:]), "text")
