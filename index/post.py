"""Reading a pasted post: what the person wrote, apart from what their programs printed.

A real post is rarely a clean log. Of the 139 issue-tracker posts in
../shared/eval/real_dev.jsonl, 87 are ten lines or more: a title, an issue template
(`### System Info`, `**To Reproduce**`), `pip list` and `nvidia-smi` tables, `accelerate env`
dumps, YAML configs, the user's code and command line, tracebacks, and somewhere the error or
the question. Read as one bag of words, the incidental parts (`ifconfig`, `eth0`, versions,
config keys) outweighed the question: the whole-post reader put the right entry first for 25%
of the posts answered by the seed documents. So each line is classified, the noise is dropped,
and the parts that carry the problem are kept apart, each to be matched on its own:

- the title (the first line of an issue-style post: often the best one-line summary);
- the prose the person typed (zh or en), which also decides the answer language;
- the error lines, most telling first: the cause NCCL states after `Last error:`, then exception
  lines and lines with an error code before generic "failed" lines; launcher boilerplate
  (`ChildFailedError`, `Pod failed`, `ABORT!!!`: printed by every failed job, whatever the cause)
  is kept apart, and is the error line only under a title with nothing else (Paddle's FAQ
  answers `Out of all 4 Trainers`);
- the final exception of each traceback (the frames above it are dropped);
- the error codes (index/codes.py) and the commands the person ran;
- which products it names (index/topics.py), counted over every line read, environment
  dumps included: they are where a post says it runs Paddle or torch_npu.

Work is bounded whatever the size of the paste: at most MAX_LINES lines are read (the head and
the tail, plus the lines around error-looking lines in between) and each line is cut to
MAX_LINE_CHARS before any regular expression or tokenizer sees it.

Tried and not kept (stop 82; branch host-prefix): taking off the host name pdsh, DeepSpeed's
multi-node launcher, puts before each line it relays (`worker-1: RuntimeError: ...`), as
`[rank3]:` is. It changed the reading of two real posts and no outcome under the shipped model,
and the refitted folds moved by chance: Hit@1 0.660 -> 0.648 over 3 splits, 0.653 -> 0.656 over
10, with unanswerable posts shown a match 0.126 -> 0.136 (eval/results/fit_spread.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ingest.code import FENCE_OPEN, is_command_line
from ingest.lang import asker_lang, cjk_count
from ingest.signals import CHECKED_CHARS, error_lines_in, is_error_line

from .codes import error_codes
from .text import LOG_HINT, ascii_alnum, clean_line, spelled_out
from .topics import product_counts

MAX_LINES = 3000  # lines read from a paste: the head, the tail and error regions in between
# A line is cut here before it is classified (a 2 MB line costs the same as 600 chars).
MAX_LINE_CHARS = CHECKED_CHARS
MAX_ERRORS = 8
MAX_PROSE_CHARS = 1500

_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|<img\b[^>]*>|<video\b[^>]*>.*?</video>", re.I)
_LINK = re.compile(r"\[([^\]]*)\]\(https?://[^)]*\)|https?://\S+")
_HEADING = re.compile(r"^\s*(#{1,6}\s+|\*\*[^*]+\*\*\s*[:：]?\s*$|__[^_]+__\s*$)")
_TITLE_TAG = re.compile(
    r"^\s*(\[[^\]]{1,20}\]\s*:?\s*)+|^\s*(bug|question|feature|help|issue|问题|求助)\s*[:：]\s*", re.I
)
# `- key: value` lines of environment dumps and configs: a short key, a short value.
_KEY_VALUE = re.compile(r"^\s*[-*>]?\s*`?([\w .()/+-]{1,40}?)`?\s*[:：=]\s*(\S.{0,80})?$")
_VERSIONISH = re.compile(r"^[vV]?\d+(\.\d+)+|^\d+$|^(true|false|none|null|yes|no|on|off|auto)$|^['\"]", re.I)
_TABLE = re.compile(r"^\s*[|+]|\|.*\|.*\||^\s*[=\-+]{10,}\s*$")
_PIP_ROW = re.compile(r"^\s*[\w.\-\[\]]+\s{2,}v?\d+[\w.+\-]*(\s+\S+)?\s*$")
_PROGRESS = re.compile(r"\d+%\|| it/s\]|s/it\]|━━|█|▏|\[=+>?\s*\]")
_FRAME = re.compile(
    r'^\s*File "[^"]*", line \d+|^\s*#?\d+\s+0x[0-9a-fA-F]+|^\s*at [\w.$<>]+\(|^\s*\d+\s+\S*::\S+|'
    r"^\s*\^+\s*$|^\s*(frame|#)\s*#?\d+\s*:"
)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s*=+ ?backtrace", re.I)
_EXCEPTION = re.compile(r"^\s*(?:\[\w+\]:\s*)?(?:[\w.]+\.)?[A-Za-z_]*(Error|Exception)\s*:\s*\S")
_CPP_WHAT = re.compile(r"^\s*what\(\)\s*:")
# Under its generic result line NCCL names what failed after `Last error:` (`Duplicate GPU detected`,
# `Error while creating shared memory segment /dev/shm/...`): the most telling line, error word or not.
_CAUSE_HEAD = re.compile(r"^Last error\s*:\s*(.*)$", re.I)
CAUSE_WEIGHT = 4.5  # above an exception with a code (_error_weight's most, 4.0)
_LOG_LEVEL_QUIET = re.compile(r"\b(INFO|DEBUG|TRACE)\b|^\s*[ID]\d{4} ")
_PERSON = re.compile(
    r"\b(I|I'm|I've|I'd|my|we|our|us|me|you|why|how|what|anyone|does|doesn't|should|is it|it's|"
    r"can't|cannot|tried|trying|when|but|help|please)\b",
    re.I,
)
_CJK_QUESTION = re.compile(r"[？?]|怎么|如何|为什么|请问|是否|能否|吗|呢|求助|报错|失败|无法|不能|出现")
# What every failed launch prints, whatever went wrong: the error is elsewhere.
_BOILERPLATE = re.compile(
    r"ChildFailedError|elastic\.multiprocessing\.api|\bRoot Cause\b|^\s*Failures:|\bPod failed\b|ABORT!!!|"
    r"Container failed|LAUNCH ERROR|^\s*error_file:|NO_OTHER_FAILURES|sigkill_handler|Killing subprocess|exits with return code|"
    r"CalledProcessError: Command|returned non-zero exit status|exited on signal|"
    r"process returned a non-zero exit code|Primary job\s+terminated|error: subprocess-exited-with-error|"
    r"Set the environment variable HYDRA_FULL_ERROR|CUDA kernel errors might be asynchronously reported|"
    r"For debugging consider passing CUDA_LAUNCH_BLOCKING|Compile with `TORCH_USE_CUDA_DSA`|"
    r"Some NCCL operations have failed or timed out|Due to the asynchronous nature of CUDA kernels|"
    r"To avoid data inconsistency, we are taking the entire process down|"
    r"^\s*warnings\.warn\(|FutureWarning|DeprecationWarning|UserWarning",
    re.I,
)
# Issue templates' own sentences (GitHub's bug and feature forms, in both languages), and their
# checklists (`- [x] I have searched the existing issues`): the form's words, ticked, not the person's.
_TEMPLATE_TEXT = re.compile(
    r"^\s*[-*]?\s*(\[[ xX]\]\s|A clear and concise description|Steps to reproduce|To Reproduce|Expected behavio|"
    r"If applicable|Is your feature request related|Describe the (bug|solution|alternatives)|"
    r"Additional context|Please (provide|describe|fill|paste|check)|请(提供|描述|填写)|复现(步骤|方法)|"
    r"期望(结果|行为)|Your hardware and system info|System Info|Environment|Reproduction)",
    re.I,
)
# `[rank3]: ...`, `3: ...`, `(VllmWorker rank=1 pid=7226)` before every line of a multi-process run.
_PROCESS_PREFIX = re.compile(
    r"^\s*(\[rank\d*\]:?|\d{1,3}:(?=\s)|\([\w ]*rank\s*=?\s*\d*[^)]*\)|\[\s*:[\d:]*\s*\])\s*"
)
_CODEY = re.compile(
    r"^\s*(import |from \S+ import|def |class |return |self\.|[\w.]+\s*=\s*[\w.]+\(|[})\]];?\s*$)"
)


@dataclass(frozen=True)
class Post:
    lang: str  # the language of the person's own words ("zh" or "en")
    title: str
    prose: tuple[str, ...]  # sentences the person typed, in order
    errors: tuple[str, ...]  # error lines, cleaned, most telling first
    exceptions: tuple[str, ...]  # the final exception line of each traceback, and other exception lines
    codes: frozenset[str]
    commands: tuple[str, ...]
    boilerplate: tuple[str, ...]  # launcher lines, kept apart: used only when nothing else is there
    is_log: bool  # more than a sentence or two: read line by line
    lines_read: int
    lines_total: int
    products: tuple[int, ...]  # mentions of each product family (index/topics.py), dumps included

    @property
    def question(self) -> str:
        """The person's words as one text (title first)."""
        parts = [self.title, *self.prose] if self.title else list(self.prose)
        return " ".join(dict.fromkeys(p for p in parts if p))[:MAX_PROSE_CHARS]

    @property
    def main_errors(self) -> tuple[str, ...]:
        """What the post says went wrong, in a few lines: its most telling error lines and the
        first of its exceptions (the topic features and the vague-question check read these)."""
        return (*self.errors[:4], *self.exceptions[:2])

    @property
    def trimmed(self) -> bool:
        return self.lines_read < self.lines_total


def _select_lines(lines: list[str]) -> list[str]:
    """At most MAX_LINES lines: the head, the tail, and the lines around error-looking lines in
    between (a crash's key line is often the last one, and never in the middle of a progress log)."""
    if len(lines) <= MAX_LINES:
        return lines
    head, tail = MAX_LINES // 4, MAX_LINES // 4
    keep = set(range(head)) | set(range(len(lines) - tail, len(lines)))
    budget = MAX_LINES - len(keep)
    for i in error_lines_in(lines, range(head, len(lines) - tail), _exception_or_traceback):
        if budget <= 0:
            break
        for j in range(max(head, i - 2), min(len(lines) - tail, i + 3)):
            if j not in keep and budget > 0:
                keep.add(j)
                budget -= 1
    return [lines[i] for i in sorted(keep)]


def _exception_or_traceback(line: str) -> bool:
    return bool(_EXCEPTION.match(line) or _TRACEBACK.search(line))


def _is_env_line(line: str) -> bool:
    m = _KEY_VALUE.match(line)
    if not m or _EXCEPTION.match(line) or is_error_line(line):
        return False
    value = (m.group(2) or "").strip()
    if cjk_count(value) >= 4:
        return False  # `指定NCCL_DEBUG=INFO后的日志如下：` is a sentence around a setting
    return not value or len(value.split()) <= 4 or bool(_VERSIONISH.match(value))


def _is_prose(raw: str, line: str) -> bool:
    if _FRAME.match(raw) or _TABLE.search(raw) or _CODEY.match(raw) or LOG_HINT.search(raw):
        return False
    if _CPP_WHAT.match(raw):
        return False  # a C++ exception's message (`what():  [Rank 3] Watchdog caught ...`), not a question
    cjk = cjk_count(line)
    if cjk >= 4:
        return True
    words = re.findall(r"[A-Za-z][a-z']+", line)
    letters = sum(c.isalpha() or c.isspace() for c in line)
    return (
        len(words) >= 4 and letters >= 0.7 * len(line) and (bool(_PERSON.search(line)) or line.endswith("?"))
    )


def _title_of(first: str, rest_starts_blank: bool, n_lines: int) -> str:
    """An issue-style post opens with a title line followed by a blank line."""
    if n_lines < 2 or not rest_starts_blank or len(first) > 300:
        return ""
    if _FRAME.match(first) or _TABLE.search(first) or FENCE_OPEN.match(first):
        return ""
    return _TITLE_TAG.sub("", _LINK.sub(r"\1", _IMAGE.sub(" ", first))).strip(" #*`")


class _Lines:
    """What the lines of one post are, sorted into parts as they are read in order."""

    def __init__(self, first_i: int, title: str, is_log: bool) -> None:
        self.first_i, self.title, self.is_log = first_i, title, is_log
        self.prose: list[str] = []
        self.errors: list[tuple[float, int, str]] = []
        self.exceptions: list[str] = []
        self.commands: list[str] = []
        self.boilerplate: list[str] = []
        self.seen: set[str] = set()
        self.fence, self.fence_info = "", ""
        self.in_traceback = False
        self.cause_next = False  # the line before was NCCL's `Last error:`

    def read(self, i: int, full: str) -> None:
        raw = _IMAGE.sub(" ", full[:MAX_LINE_CHARS])
        m = FENCE_OPEN.match(raw)
        if m:
            # Posts keep the looser closing rule the post reader was fitted with (issue 11): any
            # fence line that starts with the opening run closes it. CommonMark's rule
            # (ingest/code.py `closes`) would read some real posts differently.
            if self.fence and raw.strip().startswith(self.fence):
                self.fence, self.fence_info = "", ""
            elif not self.fence:
                self.fence, self.fence_info = m.group(2), m.group(3).lower()
            return
        line = _PROCESS_PREFIX.sub("", clean_line(_LINK.sub(r"\1", raw))).strip(" `>")
        line = self._cause(i, raw, line)
        if not line or line in self.seen:  # every rank prints the same error: count it once
            return
        self.seen.add(line)
        if (i == self.first_i and self.title) or self._noise(raw, line):
            return  # the title is kept on its own
        self._kept(i, raw, line)

    def _cause(self, i: int, raw: str, line: str) -> str:
        """Notes the cause on NCCL's `Last error:` line or the next; returns the line without the label."""
        head = _CAUSE_HEAD.match(line)
        if head:
            line = head.group(1).strip()
            self.cause_next = not line  # the label alone: the cause is the next line
            is_cause = bool(line)
        else:
            is_cause = bool(self.cause_next and line) and not (_TRACEBACK.search(raw) or _FRAME.match(raw))
            self.cause_next = self.cause_next and not line
        if is_cause and line not in self.seen:
            self.errors.append((CAUSE_WEIGHT, i, line))
        return line

    def _noise(self, raw: str, line: str) -> bool:
        """Tracebacks' frames, tables, progress bars, configs, templates: not what went wrong.
        Exceptions and launcher boilerplate are noted on the way."""
        if _TRACEBACK.search(raw):
            self.in_traceback = True
            return True
        if _FRAME.match(raw):
            return True
        if self.in_traceback and raw.startswith((" ", "\t")) and not _EXCEPTION.match(raw):
            return True  # the source line under a frame
        # A line at the margin ends it: `ChildFailedError:` has nothing after its colon, and the
        # torchrun summary under it (`traceback : Signal 9 (SIGKILL) received`) was read as frames.
        self.in_traceback = False
        if _EXCEPTION.match(line):
            self.exceptions.append(line)
            self.in_traceback = False
        if _BOILERPLATE.search(line):
            self.boilerplate.append(line)
            return True
        if _TABLE.search(raw) or _PIP_ROW.match(raw) or _PROGRESS.search(raw):
            return True
        if self.fence_info in ("yaml", "yml", "json", "toml", "ini", "python", "py") and not _EXCEPTION.match(
            line
        ):
            return True  # configuration or source code, not what went wrong
        # an issue template's headings, labels and instructions
        return bool((_HEADING.match(raw) and not re.search(r"[?？]", raw)) or _TEMPLATE_TEXT.match(line))

    def _kept(self, i: int, raw: str, line: str) -> None:
        typed = not self.fence and (not self.is_log or _is_prose(raw, line))
        # A code alone makes an error line too: `EI0005: ... inconsistent between ranks` has no
        # error word, and was dropped with its code.
        if (is_error_line(line) or error_codes(line)) and not _LOG_LEVEL_QUIET.search(raw):
            error = _error_in_sentence(line) if typed and self.is_log else line
            if error:
                self.errors.append((_error_weight(error), i, error))
        elif is_command_line(line):
            self.commands.append(line)
            return
        elif _is_env_line(raw):
            return
        if typed:
            self.prose.append(line)  # a sentence or two is the question, whatever it looks like


def read_post(text: str) -> Post:
    text = ascii_alnum(text.replace("\x00", " ").replace("\r\n", "\n").replace("\r", "\n"))
    all_lines = text.split("\n")
    lines = _select_lines(all_lines)
    first_i = next((i for i, x in enumerate(lines) if x.strip()), None)
    if first_i is None:
        nothing = tuple(product_counts(""))
        return Post("en", "", (), (), (), frozenset(), (), (), False, 0, len(all_lines), nothing)
    nonblank = [x for x in lines if x.strip()]
    is_log = len(nonblank) >= 3 or bool(LOG_HINT.search(text[:20000]))
    blank_after = first_i + 1 < len(lines) and not lines[first_i + 1].strip()
    title = _title_of(lines[first_i][:MAX_LINE_CHARS].strip(), blank_after, len(nonblank))
    parts = _Lines(first_i, title, is_log)
    for i, full in enumerate(lines):
        parts.read(i, full)
    return _post(parts, text, lines, len(all_lines))


def _post(parts: _Lines, text: str, lines: list[str], lines_total: int) -> Post:
    title, prose, errors = parts.title, parts.prose, parts.errors
    if title and is_error_line(title):
        errors.append((_error_weight(title) + 0.5, -1, title))
    # Most telling first; ties keep the later line (a crash's key line is usually near its end).
    errors.sort(key=lambda t: (-t[0], -t[1]))
    error_lines = tuple(dict.fromkeys(e for _, _, e in errors))[:MAX_ERRORS]
    if title and not error_lines and not parts.exceptions and not prose and parts.boilerplate:
        # A title over the launcher's own line (`ABORT!!! Out of all 2 trainers`) and nothing
        # else: that line is all the post says of what went wrong, and FAQs do answer it.
        error_lines = (parts.boilerplate[0],)
    if not error_lines and not prose and not title:
        # Nothing reads as an error or as a question: the last lines are the best guess.
        tail = [clean_line(x[:MAX_LINE_CHARS]) for x in lines if x.strip()][-6:]
        prose = [" ".join(t for t in tail if t)]
    own_words = " ".join([title, *prose])
    lang = asker_lang(own_words, text)
    codes = error_codes("\n".join([title, *error_lines, *parts.exceptions, *prose, *parts.boilerplate]))
    return Post(
        lang=lang,
        title=spelled_out(title),
        prose=tuple(spelled_out(p) for p in _cap(prose)),
        errors=error_lines,
        exceptions=tuple(dict.fromkeys(reversed(parts.exceptions)))[:4],  # the last exception first
        codes=codes,
        commands=tuple(parts.commands[:10]),
        boilerplate=tuple(dict.fromkeys(parts.boilerplate))[:4],
        is_log=parts.is_log,
        lines_read=len(lines),
        lines_total=lines_total,
        products=tuple(product_counts("\n".join(x[:MAX_LINE_CHARS] for x in lines))),
    )


_QUOTED = re.compile(r"(?<!\w)[\"`“「]([^\"`”」]{8,})[\"`”」]|(?<!\w)'([^']{8,})'(?!\w)")
_EXCEPTION_IN = re.compile(r"\b(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\s*:\s*\S.*")


def _error_in_sentence(line: str) -> str | None:
    """The error a typed sentence carries, if any: a quoted message, an exception, a code
    (`I get "RuntimeError: CUDA error: invalid device ordinal" when...`). A sentence that only
    says "I still get this error" carries none."""
    for m in _QUOTED.finditer(line):
        quoted = (m.group(1) or m.group(2)).strip()
        if is_error_line(quoted):
            return quoted
    found = _EXCEPTION_IN.search(line)
    if found:
        return found.group(0).strip()
    if _STRONG.search(line) or error_codes(line):
        return line
    return None


def _cap(prose: list[str]) -> list[str]:
    out, total = [], 0
    for p in prose:
        if total >= MAX_PROSE_CHARS:
            break
        out.append(p[: MAX_PROSE_CHARS - total])
        total += len(out[-1])
    return out


_STRONG = re.compile(
    r"\berror\s*\(\d+\)|\bret\s*[=\[]\s*-?\d{3,}|\bnccl\w+Error\b|\b(NCCL|HCCL|UCX|MPI|MPI_\w+)\b.*\b(WARN|ERROR|error|failed)|"
    r"Error Number|\bE[A-Z]\d{4}\b|\bERR\d{5}\b|\berrno\b",
    re.I,
)


def _error_weight(line: str) -> float:
    """How strongly a line reads as *the* error: exceptions and coded errors first."""
    w = 1.0
    if _EXCEPTION.match(line):
        w += 1.5
    if _STRONG.search(line):
        w += 1.5
    if re.search(r"\b(WARN|WARNING)\b", line) and not re.search(r"error|fail", line, re.I):
        w -= 0.75
    if len(line) < 20:
        w -= 0.5
    return w
