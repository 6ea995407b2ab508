"""The chat page's script (Gradio's `head` hook): what the page does in the browser.

- citations open the source panel (a side column on a desktop, a sheet from the bottom on a
  phone), which gets focus, a close button (and Escape) and copy buttons on its code;
- Enter sends, Shift+Enter adds a line; Enter while an answer streams says so instead of
  dropping the message; a big paste goes straight into the box, and one over the chat's limit is
  cut to its first and last lines here (the server keeps the part that matters of the rest);
- a pasted log is kept in the browser, so "copy all N lines" copies all of it;
- "Link to this answer" copies a link that asks the question again (`#ask=` in the fragment,
  never sent to the server), and such a link asks it when opened;
- a new answer is scrolled to its start; copy buttons and messages get names a screen reader can
  say (Gradio names every message by its whole markdown).
"""

from __future__ import annotations

import json

from ...query import MAX_PASTE_BYTES
from .api import API_LIST
from .assets import PANEL_PLACEHOLDER

BIG_PASTE_CHARS = 20_000  # pastes above this skip the browser's slow editing path

_SCRIPT = r"""
<script>
(() => {
  const PLACEHOLDER = %PLACEHOLDER%, BIG_PASTE = %BIG_PASTE%, MAX_PASTE = %MAX_PASTE%, API_LIST = %API_LIST%;
  const ENTRY = /\/entry\/([A-Za-z0-9_-]+)\/?$/;
  const $ = (s) => document.querySelector(s);
  const logs = new Map();  // utf-16 length -> a pasted log, for "copy all N lines"
  try { for (const [k, v] of JSON.parse(localStorage.getItem('kb-logs') || '[]')) logs.set(k, v); } catch (e) {}
  let opener = null;

  function say(text) {  // the hint line under the box, read by screen readers (aria-live)
    const h = $('#kb-hint-text');
    if (h) { h.textContent = text; clearTimeout(say.t); say.t = setTimeout(() => { h.textContent = ''; }, 6000); }
  }
  async function copy(text) {
    try { await navigator.clipboard.writeText(text); return true; } catch (e) {
      const t = document.createElement('textarea'); t.value = text; document.body.appendChild(t); t.select();
      const ok = document.execCommand('copy'); t.remove(); return ok;
    }
  }
  function entryUrl(a) {
    try {
      const u = new URL(a.getAttribute('href'), document.baseURI);
      return u.origin === location.origin && ENTRY.test(u.pathname) ? u : null;
    } catch (e) { return null; }
  }
  function addCopyButtons(root) {
    root.querySelectorAll('pre').forEach((pre) => {
      if (pre.querySelector('.kb-copy')) return;
      const code = pre.innerText.trim();
      const b = document.createElement('button');
      b.type = 'button'; b.className = 'kb-copy'; b.textContent = 'Copy';
      b.setAttribute('aria-label', 'Copy command: ' + code.split('\n')[0].slice(0, 60));
      b.addEventListener('click', async () => { if (await copy(code)) { b.textContent = 'Copied'; setTimeout(() => { b.textContent = 'Copy'; }, 1500); } });
      pre.appendChild(b);
    });
  }
  async function openEntry(u, link) {
    const panel = $('#kb-entry');
    if (!panel) { window.open(u.href, '_blank'); return; }
    opener = link;
    panel.classList.remove('kb-panel-empty');
    panel.setAttribute('aria-busy', 'true');
    try {
      const r = await fetch(u.pathname + '?fragment=1', {headers: {Accept: 'text/html'}});
      panel.innerHTML = await r.text();  // rendered on the server with FAQ HTML escaped
      addCopyButtons(panel);
    } catch (e) {
      panel.textContent = 'Could not load the entry / 无法加载条目: ' + e;
    }
    panel.removeAttribute('aria-busy');
    panel.scrollTop = 0;
    const side = $('#kb-side'); if (side) side.classList.add('kb-open');
    const box = $('#kb-panel-box');
    if (box) { box.classList.remove('kb-flash'); void box.offsetWidth; box.classList.add('kb-flash'); }
    const head = $('#kb-panel-head');
    if (head) head.focus({preventScroll: window.innerWidth > 768});
    if (window.innerWidth > 768 && box) box.scrollIntoView({block: 'nearest'});
  }
  function closePanel() {
    const side = $('#kb-side'); if (side) side.classList.remove('kb-open');
    const panel = $('#kb-entry');
    if (panel) panel.outerHTML = PLACEHOLDER;
    if (opener && document.contains(opener)) opener.focus();
    opener = null;
  }
  function rememberPaste(text) {
    if (text.split('\n').length <= 8) return;
    logs.set(text.length, text);
    const kept = [...logs.entries()].slice(-5);
    try { localStorage.setItem('kb-logs', JSON.stringify(kept)); } catch (e) { /* over the browser's quota: kept in memory */ }
  }
  function fitPaste(box) {
    // Over the chat's limit: keep the first and the last lines (the server keeps the part that
    // matters of what arrives, and says what it kept).
    const v = box.value, size = new Blob([v]).size;
    if (size <= MAX_PASTE) return;
    const lines = v.split('\n'), head = lines.slice(0, 500);
    let tail = [], used = new Blob([head.join('\n')]).size;
    for (let i = lines.length - 1; i >= 500 && used < MAX_PASTE * 0.9; i--) { tail.push(lines[i]); used += lines[i].length + 1; }
    tail.reverse();
    box.value = [...head, `[… ${lines.length - head.length - tail.length} lines left out by the browser …]`, ...tail].join('\n');
    box.dispatchEvent(new Event('input', {bubbles: true}));
  }
  function streaming() { const s = $('#kb-stop'); return !!(s && s.offsetParent !== null); }
  function send() {
    const box = $('#kb-query textarea');
    if (streaming()) { say(%BUSY%); return; }
    if (box) { fitPaste(box); rememberPaste(box.value); }
    const b = $('#kb-send'); if (b) b.click();
  }
  document.addEventListener('click', async (ev) => {
    const t = ev.target;
    if (!(t instanceof Element)) return;
    if (t.closest('#kb-panel-close')) { closePanel(); return; }
    const a = t.closest('a[href]');
    const href = a ? a.getAttribute('href') : '';
    if (a && href.startsWith('#kb-log-')) {
      ev.preventDefault();
      const text = logs.get(Number(href.slice(8)));
      say(text && await copy(text) ? 'Copied the whole log · 已复制全部日志' : 'This log is no longer kept in the browser · 浏览器中已不再保存这段日志');
      return;
    }
    if (a && href.startsWith('#ask=')) {
      ev.preventDefault();
      const ok = await copy(location.origin + location.pathname + href);
      say(ok ? 'Link copied · 链接已复制' : location.origin + location.pathname + href);
      return;
    }
    const u = a && entryUrl(a);
    if (u && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey && ev.button === 0) {
      ev.preventDefault(); ev.stopPropagation();
      openEntry(u, a);
      return;
    }
    if (t.closest('#kb-send') && ev.isTrusted) {
      const box = $('#kb-query textarea');
      if (box) { fitPaste(box); rememberPaste(box.value); }
    }
    if (t.closest('#kb-new')) closePanel();
  }, true);
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && $('#kb-side.kb-open')) closePanel();
  });
  // Gradio's box submits on Shift+Enter in its keypress handler: keep both key events from it.
  const onEnter = (ev) => {
    if (ev.key !== 'Enter' || ev.isComposing || ev.keyCode === 229) return;  // IME confirmation
    const t = ev.target;
    if (!(t instanceof Element) || !t.closest('#kb-query')) return;
    ev.stopPropagation();
    if (ev.shiftKey || ev.type !== 'keydown') return;  // Shift+Enter: the browser adds the newline
    ev.preventDefault();
    send();
  };
  document.addEventListener('keydown', onEnter, true);
  document.addEventListener('keypress', onEnter, true);
  document.addEventListener('paste', (ev) => {
    const t = ev.target;
    if (!(t instanceof HTMLTextAreaElement) || !t.closest('#kb-query')) return;
    const text = ev.clipboardData ? ev.clipboardData.getData('text/plain') : '';
    if (text.length < BIG_PASTE) return;
    ev.preventDefault();  // the browser's editing path takes seconds for a few thousand lines
    const start = t.selectionStart, end = t.selectionEnd;
    t.value = t.value.slice(0, start) + text + t.value.slice(end);
    t.selectionStart = t.selectionEnd = start + text.length;
    t.dispatchEvent(new Event('input', {bubbles: true}));  // Gradio reads the value on input
  }, true);
  // Names a screen reader can say, and a new answer scrolled to its start.
  let answers = 0, finished = 0;
  function tidy() {
    const chat = $('#kb-chat');
    if (!chat) return;
    // Marked once (Gradio labels a message by its whole markdown), renamed on every change.
    chat.querySelectorAll('[aria-label$="message: " i], [aria-label*="\'s message: "]').forEach((m) => {
      m.dataset.kbMsg = (m.getAttribute('aria-label') || '').startsWith('bot') ? 'bot' : 'user';
    });
    chat.querySelectorAll('[data-kb-msg]').forEach((m) => {
      const bot = m.dataset.kbMsg === 'bot';
      const lines = (m.innerText || '').split('\n').map((l) => l.trim()).filter(Boolean);
      const name = (bot ? 'Answer: ' : 'You: ') + lines.slice(0, bot ? 2 : 1).join(' — ').slice(0, 140);
      if (m.getAttribute('aria-label') !== name) m.setAttribute('aria-label', name);
    });
    chat.querySelectorAll('button.copy_code_button, button[aria-label="Copy"], button[title="Copy"]').forEach((b) => {
      if (b.dataset.kbNamed) return;
      const pre = b.closest('.code_wrap, pre') || b.parentElement;
      const code = pre ? (pre.querySelector('code') || pre).innerText.trim() : '';
      if (b.classList.contains('copy_code_button')) b.setAttribute('aria-label', 'Copy code: ' + code.split('\n')[0].slice(0, 60));
      else b.setAttribute('aria-label', 'Copy message');
      b.dataset.kbNamed = '1';
    });
    // Gradio's radios have a name each and their fieldset no legend: one named group instead.
    const langs = $('#kb-lang');
    if (langs && langs.getAttribute('role') !== 'radiogroup') {
      langs.setAttribute('role', 'radiogroup'); langs.setAttribute('aria-label', 'Answer language · 回答语言');
    }
    if (langs) langs.querySelectorAll('input[type=radio]').forEach((r) => { if (r.name !== 'kb-answer-lang') r.name = 'kb-answer-lang'; });
    // Gradio gives the example chips' box a list role whose children are buttons (axe: critical).
    chat.querySelectorAll('.examples[role]').forEach((e) => { e.setAttribute('role', 'group'); e.setAttribute('aria-label', 'Examples · 示例'); });
    const bots = chat.querySelectorAll('.bot-row');
    const last = bots[bots.length - 1];
    const done = last && !/▌|Searching the knowledge base|正在检索/.test(last.innerText);
    if (last && (bots.length > answers || (done && bots.length > finished))) {
      const wrap = last.closest('.bubble-wrap');  // the answer's start at the top, not its end
      if (wrap) wrap.scrollTop += last.getBoundingClientRect().top - wrap.getBoundingClientRect().top - 8;
      if (done) finished = bots.length;
    }
    answers = bots.length;
    if (bots.length < finished) finished = bots.length;
  }
  new MutationObserver(() => { clearTimeout(tidy.t); tidy.t = setTimeout(tidy, 60); })
    .observe(document.documentElement, {childList: true, subtree: true, characterData: true});
  // The About section: the index's details, fetched when opened.
  document.addEventListener('toggle', async (ev) => {
    const d = ev.target;
    if (!(d instanceof HTMLDetailsElement) || d.id !== 'kb-about' || !d.open) return;
    const body = $('#kb-about-body');
    try {
      const h = await (await fetch('api/health')).json();
      body.innerHTML = '';
      const lines = [
        `${h.entries} entries · 条目 (zh ${h.languages.zh}, en ${h.languages.en}), built ${h.built_at}`,
        `Embedder: ${typeof h.embedder === 'object' ? h.embedder.id : h.embedder} · answers: ${h.llm || 'extractive (no language model)'}`,
        'JSON API: ' + API_LIST,
      ];
      for (const l of lines) { const p = document.createElement('p'); p.textContent = l; body.appendChild(p); }
    } catch (e) { body.textContent = 'Could not read the index details: ' + e; }
  }, true);
  // A shared link (#ask=...&lang=..) asks its question once the chat is ready.
  function askFromLink() {
    const m = location.hash.match(/^#ask=([^&]*)(?:&lang=(zh|en))?/);
    if (!m) return;
    const box = $('#kb-query textarea');
    if (!box) { setTimeout(askFromLink, 200); return; }
    history.replaceState(null, '', location.pathname + location.search);
    if (m[2]) { const r = document.querySelector(`#kb-lang input[value="${m[2]}"]`); if (r) r.click(); }
    box.value = decodeURIComponent(m[1]);
    box.dispatchEvent(new Event('input', {bubbles: true}));
    setTimeout(() => { const b = $('#kb-send'); if (b) b.click(); }, 300);
  }
  // Gradio may add this script after the page's load event: then run now.
  if (document.readyState === 'complete') setTimeout(askFromLink, 500);
  else window.addEventListener('load', () => setTimeout(askFromLink, 500));
})();
</script>
"""


def page_head(busy: str) -> str:
    return (
        _SCRIPT.replace("%PLACEHOLDER%", json.dumps(PANEL_PLACEHOLDER))
        .replace("%BIG_PASTE%", str(BIG_PASTE_CHARS))
        .replace("%MAX_PASTE%", str(MAX_PASTE_BYTES))
        .replace(
            "%API_LIST%", json.dumps(API_LIST.replace("/api/", "api/"))
        )  # relative: under a root path too
        .replace("%BUSY%", json.dumps(busy))
    )
