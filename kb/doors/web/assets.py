"""The chat page's own strings: examples, labels in both languages, CSS and the page script.

Plain data, no logic beyond filling two values into the script.
"""

from __future__ import annotations

import json

BIG_PASTE_CHARS = 20_000  # pastes above this skip the browser's slow editing path (see PAGE_HEAD)

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
