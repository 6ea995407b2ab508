"""What an entry is about, pulled from its markdown: error signatures and runnable commands.

Signatures are the lines a user would paste (exception lines, ERROR/WARN/failed lines,
error codes); healthy log output (INFO lines, expected output) is not a signature, because
indexing it makes every log-shaped query match the entry that merely shows a healthy log.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from .code import ASSIGNMENTS, INLINE_CODE, PROMPT, code_blocks, is_command_line, prose, strip_prompt

# Words that make a line an error report.
_ERROR_WORDS = re.compile(
    r"(error|exception|fail(ed|ure)?|fatal|critical|warn(ing)?\b|timed? ?out|refused|unreachable|"
    r"invalid|not found|cannot|can not|could not|unable|denied|abort|terminate|traceback|"
    r"panic|segmentation fault|core dumped|killed|no such|not (installed|set|supported)|"
    r"报错|错误|失败|异常|超时)",
    re.I,
)
# Healthy log levels: such a line is illustrative output, not a signature.
_INFO_LINE = re.compile(
    r"(\berrors? 0\b|^Traceback \(most recent call last\)|\bINFO\b|\[INFO\]|^\s*I\d{4} |\bDEBUG\b|^\s*LAUNCH INFO|Successfully|works well|installed successfully)"
)
_EXCEPTION_LINE = re.compile(r"^\s*(?:[\w.]+\.)?[A-Za-z_]*(Error|Exception|Warning|Interrupt|Exit)\b\s*:")
_ERROR_CODE = re.compile(
    r"(\bret\s*=\s*-?\d{3,}|\berror\s*\(\d+\)|\bret\[\d+\]|\bError Number:?\s*\d+|\bexit ?code:?\s*-?\d+|\bnccl\w+Error\b)",
    re.I,
)


def is_error_line(line: str) -> bool:
    s = line.strip()
    if len(s) < 6 or _INFO_LINE.search(s):
        return False
    return bool(_EXCEPTION_LINE.match(s) or _ERROR_CODE.search(s) or _ERROR_WORDS.search(s))


# A first, cheap look for the words of _ERROR_WORDS that matter in a long log, for finding its
# error regions among hundreds of thousands of lines: is_error_line costs 16 us a line here,
# this 2 us. It once was `"rror" in line`, which passed over NCCL's `Watchdog caught collective
# operation timeout` and `训练失败` in the middle of a long log, so the answer came from its tail.
# The cost, with MAX_CLOSE_LOOKS: kb/query.py's excerpt of a 21.5 MB training log (230,000 lines)
# takes 0.40-0.58 s instead of 0.28 s.
_ERRORISH = re.compile(
    r"rror|ail|xception|im(?:e|ed) ?out|TIME ?OUT|bort|ABORT|atal|FATAL|illed|efused|ault|错|败|超时|异常|"
    r"raceback|acktrace|ACKTRACE|File \""
)


# Lines read closely (is_error_line) in one log, at most (0.3 s of them). Lines that pass the first
# look and fail the close one (`mirror 17`) cost before: 2 MB of them took the post reader 1.8 s,
# and 21 MB the excerpt 12 s; now 0.34 s and 0.45 s.
MAX_CLOSE_LOOKS = 20_000


CHECKED_CHARS = 600  # a line is judged by its start: the patterns cost as much as the line is long


def error_lines_in(
    lines: Sequence[str], order: Iterable[int], also: Callable[[str], bool] | None = None
) -> Iterator[int]:
    """The lines, taken in `order`, that are error lines, a traceback's start or `also` (whose
    lines the first look must let through): what to keep of a log too long to read whole; a
    caller stops when it has enough. Each distinct line is read closely once, and at most
    MAX_CLOSE_LOOKS of them: the rest of the log is left to its head and its tail."""
    judged: dict[str, bool] = {}
    for i in order:
        line = lines[i][:CHECKED_CHARS]
        if not _ERRORISH.search(line):  # what `also` looks for passes this too
            continue
        if line.lstrip().startswith(("Traceback", 'File "')) or (also is not None and also(line)):
            yield i
        else:
            seen = judged.get(line)
            if seen is None:
                if len(judged) >= MAX_CLOSE_LOOKS:
                    return
                seen = judged[line] = is_error_line(line)
            if seen:
                yield i


def signatures(title: str, markdown: str, limit: int = 24) -> tuple[str, ...]:
    """Error lines and error strings the entry covers, in order, without duplicates."""
    found: list[str] = []
    for block in code_blocks(markdown):
        if block.info in ("python", "py", "yaml", "yml", "json", "toml", "ini", "cpp", "c") and not any(
            _EXCEPTION_LINE.match(x) for x in block.lines
        ):
            continue  # source code or configuration, not output
        for line in block.lines:
            if is_error_line(line) and not is_command_line(line):
                found.append(line.strip())
    for snippet in INLINE_CODE.findall(title + "\n" + prose(markdown)):
        if is_error_line(snippet) and len(snippet) >= 12 and not is_command_line(snippet):
            found.append(snippet.strip())
    return _dedupe(found, limit)


def commands(markdown: str, limit: int = 40, shell_fences: bool = True) -> tuple[str, ...]:
    """Commands the entry tells the reader to run, verbatim (shell prompt removed).
    `shell_fences=False`: only lines that start with a known command, in shell fences too (what
    the index reads, index/views.py)."""
    found: list[str] = []
    for block in code_blocks(markdown):
        # In a block that is mostly output (a log, a listing) only prompted lines are commands:
        # a log line that starts with `env {...}` or an installer's hint is not advice to run.
        nonblank = [x for x in block.lines if x.strip() and not x.strip().startswith("#")]
        runs = _shell_fence_command if shell_fences and block.info in SHELL_FENCES else is_command_line
        runnable = [x for x in nonblank if runs(x) or _LOOP_PART.match(strip_prompt(x))]
        is_output = len(nonblank) > 2 and len(runnable) * 2 < len(nonblank)
        pending = ""
        loop: list[str] = []  # a shell loop written over several lines, read whole
        for raw in block.lines:
            line = raw.rstrip()
            if loop:
                loop.append(line)
                if _LOOP_END.search(line) and _loop_depth(loop) == 0:
                    found.append("\n".join(loop))
                    loop = []
                continue
            head = strip_prompt(line)
            if not is_output and _opens_loop(head):
                loop = [head]
                continue
            if pending:
                pending += "\n" + line
                if not line.endswith("\\"):
                    found.append(pending)
                    pending = ""
                continue
            had_prompt = bool(PROMPT.match(line))
            if is_output and not had_prompt:
                continue
            if not (runs(line) or (had_prompt and strip_prompt(line))):
                continue
            if block.info in ("python", "py") and not strip_prompt(line).startswith(
                ("python", "pip", "export")
            ):
                continue  # python source that happens to start with a command word (`import` is not one)
            cmd = strip_prompt(line)
            if cmd.endswith("\\"):
                pending = cmd
            else:
                found.append(cmd)
        if pending:
            found.append(pending)
        if loop:
            found.extend(x.strip() for x in loop[1:] if is_command_line(x))  # never closed: its commands
    text = prose(markdown)
    for m in INLINE_CODE.finditer(text):
        if is_command_line(m.group(1)) and _told_to_run(m.group(1), text[max(0, m.start() - 80) : m.start()]):
            found.append(strip_prompt(m.group(1)))
    return _dedupe(found, limit)


# Fences that hold shell: there every line is meant to be typed, so a command a team's FAQ uses
# (`srun`, `kubectl`, `./scripts/resubmit.sh`, `module load`) counts though no list knows it.
SHELL_FENCES = frozenset("bash sh shell zsh ksh console shell-session".split())
# A command's first word: a lower-case program name or a path to a script. Output does not look
# like this: log lines start with a time, a level, a capitalised word or `host:pid:`.
_PROGRAM = re.compile(r"^(?:\.{1,2}/|~/|/)?[a-z][\w.+-]*(?:/[\w.+-]+)*$")
# Words that start shell syntax or python source, not a program.
_NOT_PROGRAM = frozenset(
    "if then else elif fi do done case esac for while until function return import from def class print".split()
)


def _shell_fence_command(line: str) -> bool:
    """A line of a shell fence that runs something: a known command, or an unknown program with
    arguments (a script path may stand alone). Error lines, `name = value` / `name: value` lines
    and columns of output (`open files   (-n) 1024`, aligned with runs of spaces) stay out; so does
    a block that is mostly output (see `commands`)."""
    if is_command_line(line):
        return True
    s = _COMMENT.sub("", ASSIGNMENTS.sub("", strip_prompt(line), count=1)).rstrip()
    if _COLUMNS.search(s):
        return False
    words = s.split()
    if not words or not _PROGRAM.match(words[0]) or words[0] in _NOT_PROGRAM or is_error_line(s):
        return False
    if len(words) == 1:
        return words[0].startswith(("./", "../", "~/", "/")) and words[0].endswith((".sh", ".py"))
    return words[1][0] not in "=:" and not s.endswith(":")


_COMMENT = re.compile(r"\s#\s.*$")  # one space before it: a run of spaces is read once
_COLUMNS = re.compile(r"\S\s{3,}\S")


# A shell loop over several lines: `for i in ...` / `while ...` up to its `done`.
_LOOP_HEAD = re.compile(r"^(?:for\s*\(\(|for\s+\w+\s+in\b|while\s|until\s)")
_LOOP_END = re.compile(r"(?:^|[;&]\s*)done\b")
_LOOP_PART = re.compile(r"^(?:for\s*\(\(|for\s+\w+\s+in\b(?!.*:$)|while\s(?!.*:$)|until\s|do\b|done\b)")


def _opens_loop(line: str) -> bool:
    """A shell loop's first line, its `done` further down (a python `for x in y:` is not one)."""
    return bool(_LOOP_HEAD.match(line)) and not _LOOP_END.search(line) and not line.endswith(":")


def _loop_depth(lines: list[str]) -> int:
    """Loops opened minus loops closed; a one-line loop inside (`for p in 1 2; do x; done`) is both."""
    opened = sum(1 for x in lines if _LOOP_HEAD.match(x.strip()))
    return opened - sum(1 for x in lines if _LOOP_END.search(x.strip()))


# Words that tell the reader to run what follows, in the same sentence.
_RUN_WORDS = re.compile(
    r"\b(run|execute|type|enter|try|set|add|use|using|with|export|clean|remove|check|restart|install)\b"
    r"|运行|执行|输入|设置|使用|命令|清理|删除|检查|安装|重启|启动|查看",
    re.I,
)


def _told_to_run(snippet: str, before: str) -> bool:
    """Inline code is a command when it has arguments (`ipcrm -m <shmid>`), or when its sentence
    tells the reader to run it ("Run `nvidia-smi`"): a bare word the text only names (`ipcs`
    shows leftover segments) is not advice to run."""
    if len(strip_prompt(snippet).split()) > 1:
        return True
    sentence = re.split(r"[.。!?！？\n]", before)[-1]
    return bool(_RUN_WORDS.search(sentence))


def _dedupe(items: list[str], limit: int) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = " ".join(item.split())
        if key and key not in seen:
            seen.add(key)
            out.append(item[:500])
    return tuple(out[:limit])
