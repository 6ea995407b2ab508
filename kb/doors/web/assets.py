"""The chat page's own strings and styles: examples, labels in both languages, the welcome, the
panel's frame, and the CSS (light and dark, desktop and phone). The page's script is in
page_script.py. Plain data, no logic.
"""

from __future__ import annotations

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
        "paste": "Paste the error or the whole log (Enter sends, Shift+Enter adds a line)",
        "placeholder": "Paste an error, a traceback or a whole log, or ask a question",
        "send": "Send",
        "stop": "Stop",
        "new_chat": "New chat",
        "undo": "Undo: bring the chat back",
        "lang": "Answer language · 回答语言",
        "chat": "Conversation",
    },
    "zh": {
        "paste": "粘贴报错或整段日志（Enter 发送，Shift+Enter 换行）",
        "placeholder": "粘贴报错、Traceback 或整段日志，或直接提问",
        "send": "发送",
        "stop": "停止",
        "new_chat": "新对话",
        "undo": "撤销：恢复刚才的对话",
        "lang": "回答语言 · Answer language",
        "chat": "对话",
    },
}

TITLE = "kb · distributed-training errors / 分布式训练报错"

# The first screen, inside the chat: what the tool covers and how to use it (the examples are
# the chat's own chips under it).
# One line per paragraph: the chat renders a newline as a line break, and the wrapped source
# broke the text mid-sentence on every screen ("MindSpore,|PaddlePaddle").
WELCOME = (
    "## Paste an error or a whole log · 粘贴报错或整段日志\n\n"
    "Answers come from the FAQ in **Chinese and English**: NCCL, HCCL and Ascend (torch_npu), MindSpore, "
    "PaddlePaddle, accelerate and PyTorch DDP, ms-swift and DeepSpeed, multi-node setup (SSH, hostnames, "
    "networks). Each answer says how well it matches, quotes the line of your log it matched, gives the "
    "commands to run and cites its source.\n\n"
    "答案来自中英文 FAQ：NCCL、HCCL/昇腾（torch_npu）、MindSpore、飞桨、accelerate 与 DDP、ms-swift 与 "
    "DeepSpeed、多机环境（SSH、主机名、网络）。每个回答都会说明匹配程度、引用日志中匹配的那一行，并给出命令和出处。\n\n"
    "Try an example · 试试示例："
)

HEADER_HTML = f"""
<header class="kb-header">
  <h1 id="kb-title">{TITLE}</h1>
  <details class="kb-about" id="kb-about">
    <summary>About · 关于</summary>
    <div id="kb-about-body" role="region" aria-label="About this knowledge base">Loading…</div>
  </details>
</header>
"""

PANEL_PLACEHOLDER = (
    '<div id="kb-entry" class="kb-panel-empty">'
    "<p>Click a citation such as [1] in an answer to read the cited FAQ entry here.</p>"
    "<p>点击回答中的引用（如 [1]），在这里查看原文条目。</p></div>"
)
PANEL_HTML = (
    '<section id="kb-panel-box" role="region" aria-labelledby="kb-panel-head">'
    '<div class="kb-panel-top"><h2 id="kb-panel-head" class="kb-panel-head" tabindex="-1">Source entry · 原文条目</h2>'
    '<button type="button" id="kb-panel-close" class="kb-close" aria-label="Close the source panel · 关闭">×</button>'
    "</div>" + PANEL_PLACEHOLDER + "</section>"
)

# The entry's own styles (also on the standalone /entry/ID page): colours from the theme's
# variables, so code stays readable in dark mode.
PANEL_CSS = """
.kb-entry-meta{font-size:.85em;margin-bottom:.25rem;color:var(--body-text-color-subdued,#4b5563)}
.kb-lang{display:inline-block;padding:0 .4em;border-radius:.3em;background:#e0e7ff;color:#312e81;font-weight:600}
.kb-entry-title{margin:.2rem 0 .6rem 0;font-size:1.1em}
.kb-entry-body pre{position:relative;white-space:pre-wrap;word-break:break-word;overflow-wrap:anywhere;
  background:var(--code-background-fill,#f3f4f6);color:var(--body-text-color,#111827);padding:.6em 4.5em .6em .6em;
  border:1px solid var(--border-color-primary,#d1d5db);border-radius:.4em;font-size:.85em}
.kb-entry-body code{word-break:break-word;overflow-wrap:anywhere;color:inherit}
.kb-entry-body img{max-width:100%}
.kb-entry-body table{display:block;overflow-x:auto;max-width:100%}
.kb-translation{margin-top:1rem;border-top:1px solid var(--border-color-primary,#d1d5db);padding-top:.6rem}
.kb-translation summary{cursor:pointer;font-weight:600}
.kb-copy{position:absolute;top:.35em;right:.35em;font-size:.8em;padding:.15em .5em;border-radius:.3em;cursor:pointer;
  border:1px solid var(--border-color-primary,#9ca3af);background:var(--background-fill-primary,#fff);
  color:var(--body-text-color,#111827)}
"""

_LAYOUT_CSS = """
.gradio-container{max-width:1440px !important}
footer{display:none !important}
.kb-header{display:flex;align-items:center;justify-content:space-between;gap:1rem;flex-wrap:wrap}
.kb-header h1{font-size:1.35rem;margin:0;font-weight:700}
.kb-about summary{cursor:pointer;text-decoration:underline;color:var(--body-text-color)}
.kb-about[open]{flex-basis:100%}
#kb-about-body{font-size:.85em;padding:.5rem 0;color:var(--body-text-color)}
#kb-main{align-items:stretch;flex-wrap:nowrap}
#kb-chat{height:calc(100dvh - 300px) !important;min-height:280px}
#kb-chat button.example{border:1px solid var(--border-color-primary);border-radius:var(--radius-lg);
  background:var(--background-fill-secondary);color:var(--body-text-color)}
/* Contrast (WCAG AA, checked with axe-core): the theme's indigo-500 under white text is 4.46:1,
   and the code highlighter's colours 2.8:1 on its light background: indigo-600, and code in one colour. */
#kb-lang label.selected, #kb-send{background:#4338ca !important;border-color:#4338ca !important;color:#fff !important}
#kb-chat pre code .token{color:inherit !important}
#kb-chat h2{font-size:1.15em !important;margin:.3em 0 !important}  /* the welcome and an answer's title */
#kb-chat .message-wrap pre, #kb-chat .message-wrap pre code{white-space:pre-wrap;word-break:break-word;overflow-wrap:anywhere}
#kb-query textarea{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.9em}
/* The theme's subdued grey was 2.5:1 as placeholder text: zinc-600 / zinc-300 (over 4.5:1 on the box). */
#kb-query textarea::placeholder{color:#52525b;opacity:1}
.dark #kb-query textarea::placeholder{color:#d4d4d8}
/* Gradio pads the HTML block: the panel would run 10px past the bottom of a phone's sheet. */
#kb-panel .html-container{padding:0 !important}
#kb-side{position:sticky;top:.5rem;align-self:flex-start;max-height:calc(100dvh - 1rem);display:flex}
#kb-panel{flex:1;min-height:0;display:flex}
#kb-panel-box{display:flex;flex-direction:column;width:100%;max-height:calc(100dvh - 2rem);
  border:1px solid var(--border-color-primary);border-radius:var(--radius-lg);background:var(--background-fill-primary)}
#kb-entry{overflow:auto;padding:.2rem 1rem 1rem 1rem;min-height:0;flex:1;overscroll-behavior:contain}
.kb-panel-top{display:flex;align-items:center;justify-content:space-between;padding:.5rem .6rem .3rem 1rem;
  border-bottom:1px solid var(--border-color-primary)}
.kb-panel-head{font-size:.8rem;font-weight:700;text-transform:uppercase;letter-spacing:.04em;margin:0;
  color:var(--body-text-color)}
.kb-close{font-size:1.4rem;line-height:1;padding:.1rem .55rem;border-radius:.3rem;cursor:pointer;background:transparent;
  color:var(--body-text-color);border:1px solid var(--border-color-primary)}
.kb-panel-empty{color:var(--body-text-color-subdued)}
#kb-hint{min-height:0;font-size:.85em;color:var(--body-text-color)}
#kb-hint:empty{display:none}
#kb-controls{align-items:center;flex-wrap:nowrap;gap:.5rem}
#kb-lang{min-width:0}
#kb-lang .wrap{flex-wrap:nowrap}
#kb-send,#kb-stop{min-width:6.5rem;max-width:9rem}
#kb-undo{max-width:22rem}
.kb-flash{animation:kbflash 1s ease-out}
@keyframes kbflash{from{box-shadow:0 0 0 3px #facc15}to{box-shadow:none}}
/* The chat's scroll-down button hugged its arrow (1px of padding): on an answer's text it read as
   one more glyph. */
#kb-chat .scroll-down-button-container button{background:var(--background-fill-primary);
  border:1px solid var(--border-color-primary);padding:.3rem}
/* The chat's own trash icon sat over a message's copy icon; "New chat" above does the same. */
#kb-chat button[aria-label="Clear"], #kb-chat button[title="Clear"]{display:none !important}
"""

_PHONE_CSS = """
@media (max-width: 768px){
  .gradio-container{padding:0 .4rem !important}
  #kb-top{flex-wrap:nowrap;gap:.4rem;align-items:center}
  .kb-header{gap:.2rem .8rem}
  .kb-header h1{font-size:.95rem;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:100%}
  .kb-about summary{font-size:.85em}
  #kb-main{flex-direction:column}
  #kb-chat{height:calc(100dvh - 290px) !important;min-height:200px}
  #kb-query textarea{max-height:5.5em}
  #kb-controls{flex-wrap:wrap}
  #kb-lang{flex:1 1 100%}
  #kb-lang .wrap{flex-wrap:wrap}
  #kb-lang label{padding:.2rem .4rem}
  /* Gradio's bubbles keep 24px aside on each side and 72px off their width: at 390px an answer
     had 245px of text, and every command wrapped. */
  #kb-chat .message-row.bubble{margin-left:.25rem;margin-right:.25rem}
  #kb-chat .message-row.bubble.bot-row, #kb-chat .message-row.bubble.user-row{max-width:calc(100% - .5rem)}
  /* The source panel is a sheet from the bottom, shown when a citation is opened. */
  #kb-side{position:fixed !important;left:0;right:0;bottom:0;top:auto;z-index:10000;max-height:78dvh;margin:0;
    transform:translateY(105%);transition:transform .2s ease-out;width:100% !important;min-width:0 !important}
  #kb-side.kb-open{transform:none;box-shadow:0 -6px 24px rgba(0,0,0,.35)}
  /* The chat's own scroll-down button was drawn over the sheet's code (gradio's top layer). */
  #kb-main:has(#kb-side.kb-open) .scroll-down-button-container{display:none}
  #kb-panel-box{max-height:78dvh;border-radius:1rem 1rem 0 0}
}
"""

PAGE_CSS = PANEL_CSS + _LAYOUT_CSS + _PHONE_CSS
