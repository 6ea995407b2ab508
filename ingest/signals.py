"""What an entry is about, pulled from its markdown: error signatures and runnable commands.

Signatures are the lines a user would paste (exception lines, ERROR/WARN/failed lines,
error codes); healthy log output (INFO lines, expected output) is not a signature, because
indexing it makes every log-shaped query match the entry that merely shows a healthy log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")

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

# First words of lines that are commands a user runs (after any shell prompt is removed).
COMMAND_WORDS = frozenset(
    """export unset mpirun mpiexec python python3 pip pip3 conda ipcrm ipcs nvidia-smi ssh ssh-keygen
    ssh-copy-id scp ping curl wget hostname hostnamectl ifconfig ip nvcc cat sudo docker accelerate
    torchrun msrun ls which systemctl service nslookup dig kill pkill killall ulimit sysctl ldconfig
    reboot shutdown ibstat ibv_devinfo ibv_devices echo source sh bash apt apt-get yum git rm dd mkfs
    chmod chown mkdir cp mv ln vim vi nano tail head grep env npu-smi hccn_tool df free mount
    set setx ldd nproc lspci ethtool numactl taskset bash.exe make cmake deepspeed horovodrun
    paddle swift npm ps top netstat ss lsof nc telnet iptables firewall-cmd modprobe lsmod""".split()
)
# Single words that are complete commands on their own in inline code.
_STANDALONE = frozenset(
    {"nvidia-smi", "npu-smi", "ifconfig", "ipcs", "hostname", "reboot", "nvcc", "ibstat", "nproc"}
)
_PROMPT = re.compile(
    r"^\s*(?:\(\w[\w.-]*\)\s*)?(?:[\w.-]+@[\w.-]+(?::[^\s$#]*)?\s*[$#]|\$|#(?=\s*(?:sudo|export)\b))\s+"
)
_ASSIGN = re.compile(r"^[A-Z_][A-Z0-9_]*=\S")


@dataclass(frozen=True)
class CodeBlock:
    info: str
    lines: tuple[str, ...]


def code_blocks(markdown: str) -> list[CodeBlock]:
    """Fenced blocks with their info string; indentation (list items) removed."""
    blocks: list[CodeBlock] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).lower()
        body: list[str] = []
        i += 1
        # CommonMark: a closing fence is fence characters only, at least as many as opened it.
        while i < len(lines) and not _closes(lines[i], fence):
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        blocks.append(CodeBlock(info=info, lines=tuple(body)))
        i += 1
    return blocks


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return s.startswith(fence) and s.strip(fence[0]) == ""


def prose(markdown: str) -> str:
    """The markdown with fenced code removed: what the entry says rather than shows."""
    out: list[str] = []
    in_fence = ""
    for line in markdown.split("\n"):
        m = _FENCE_OPEN.match(line)
        if in_fence:
            if _closes(line, in_fence):
                in_fence = ""
            continue
        if m:
            in_fence = m.group(2)
            continue
        out.append(line)
    return "\n".join(out)


def is_error_line(line: str) -> bool:
    s = line.strip()
    if len(s) < 6 or _INFO_LINE.search(s):
        return False
    return bool(_EXCEPTION_LINE.match(s) or _ERROR_CODE.search(s) or _ERROR_WORDS.search(s))


def signatures(title: str, markdown: str, limit: int = 24) -> tuple[str, ...]:
    """Error lines and error strings the entry covers, in order, without duplicates."""
    found: list[str] = []
    for block in code_blocks(markdown):
        if block.info in ("python", "py", "yaml", "yml", "json", "toml", "ini", "cpp", "c") and not any(
            _EXCEPTION_LINE.match(x) for x in block.lines
        ):
            continue  # source code or configuration, not output
        for line in block.lines:
            if is_error_line(line) and not _looks_like_command(line):
                found.append(line.strip())
    for snippet in _INLINE_CODE.findall(title + "\n" + prose(markdown)):
        if is_error_line(snippet) and len(snippet) >= 12 and not _looks_like_command(snippet):
            found.append(snippet.strip())
    return _dedupe(found, limit)


def _strip_prompt(line: str) -> str:
    return _PROMPT.sub("", line, count=1).strip()


def _looks_like_command(line: str) -> bool:
    s = _strip_prompt(line)
    if not s or s.startswith(("#", "//")):
        return False
    first = s.split()[0]
    if _ASSIGN.match(first):  # `NCCL_DEBUG=INFO python train.py`, but not a bare `KEY=value` file line
        return len(s.split()) > 1 and s.split()[1] in COMMAND_WORDS
    return first in COMMAND_WORDS and (len(s.split()) > 1 or first in _STANDALONE)


def commands(markdown: str, limit: int = 40) -> tuple[str, ...]:
    """Commands the entry tells the reader to run, verbatim (shell prompt removed)."""
    found: list[str] = []
    for block in code_blocks(markdown):
        # In a block that is mostly output (a log, a listing) only prompted lines are commands:
        # a log line that starts with `env {...}` or an installer's hint is not advice to run.
        nonblank = [x for x in block.lines if x.strip() and not x.strip().startswith("#")]
        runnable = [x for x in nonblank if _looks_like_command(x)]
        is_output = len(nonblank) > 2 and len(runnable) * 2 < len(nonblank)
        pending = ""
        for raw in block.lines:
            line = raw.rstrip()
            if pending:
                pending += "\n" + line
                if not line.endswith("\\"):
                    found.append(pending)
                    pending = ""
                continue
            had_prompt = bool(_PROMPT.match(line))
            if is_output and not had_prompt:
                continue
            if not (_looks_like_command(line) or (had_prompt and _strip_prompt(line))):
                continue
            if block.info in ("python", "py") and not _strip_prompt(line).startswith(
                ("python", "pip", "export")
            ):
                continue  # python source that happens to start with a command word (`import` is not one)
            cmd = _strip_prompt(line)
            if cmd.endswith("\\"):
                pending = cmd
            else:
                found.append(cmd)
        if pending:
            found.append(pending)
    for snippet in _INLINE_CODE.findall(prose(markdown)):
        if _looks_like_command(snippet):
            found.append(_strip_prompt(snippet))
    return _dedupe(found, limit)


def _dedupe(items: list[str], limit: int) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = " ".join(item.split())
        if key and key not in seen:
            seen.add(key)
            out.append(item[:500])
    return tuple(out[:limit])
