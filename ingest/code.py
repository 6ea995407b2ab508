"""Code in markdown and in pasted text: fenced blocks, inline code, shell prompts, commands and
the commands that destroy things. One home for these small rules, used by ingest (an entry's
commands and signatures), the post reader, the answers, the LLM-answer check and the renderers.

Fences follow CommonMark: a fence opens with three or more backticks or tildes (an info string
may follow) and closes with a line of the same character only, at least as long as the opener;
an unclosed fence runs to the end of the text.

Two questions about a line are kept apart on purpose:
- `is_command_line`: does an FAQ tell the reader to run this? Strict: it decides what an entry
  lists as its commands (a log line that starts with `env {...}` is not advice to run);
- `looks_like_command`: would a reader paste this into a shell? Broad: it decides what a
  language model's answer must prove it copied from a source (anything with shell operators).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")

# First words of lines that are commands a user runs (after any shell prompt is removed).
COMMAND_WORDS = frozenset(
    """export unset mpirun mpiexec python python3 pip pip3 conda ipcrm ipcs nvidia-smi ssh ssh-keygen
    ssh-copy-id scp ping curl wget hostname hostnamectl ifconfig ip nvcc cat sudo docker accelerate
    torchrun msrun ls which systemctl service nslookup dig kill pkill killall ulimit sysctl ldconfig
    reboot shutdown ibstat ibv_devinfo ibv_devices echo source sh bash apt apt-get yum git rm dd mkfs
    chmod chown mkdir cp mv ln vim vi nano tail head grep env npu-smi hccn_tool df free mount
    set setx ldd nproc lspci ethtool numactl taskset bash.exe make cmake deepspeed horovodrun
    paddle swift npm ps top netstat ss lsof nc telnet iptables firewall-cmd modprobe lsmod
    dmesg journalctl py-spy iperf3 strace fuser uname cd tar unzip du awk sed xargs tee wc touch
    gdb pgrep pidof lscpu lsblk umount show_gids ibdev2netdev ibstatus crontab
    truncate shred unlink wipefs fdisk parted mkswap blkdiscard poweroff halt
    srun sbatch salloc scontrol sinfo squeue scancel sacct kubectl helm""".split()
)
# Single words that are complete commands on their own (`kill` alone is a word in a sentence).
STANDALONE = frozenset(
    """nvidia-smi npu-smi ifconfig ipcs hostname reboot poweroff halt nvcc ibstat nproc ibv_devinfo
    ibv_devices show_gids ibdev2netdev ibstatus lscpu lsblk sinfo squeue""".split()
)
# Lines that are commands without a known first word:
# - a one-line shell loop: `for i in $(seq 0 7); do hccn_tool -i $i -ip -g; done` (a loop written
#   over several lines is read line by line by ingest/signals.py: its body lines are commands,
#   its `for ...`/`do`/`done` lines are not, since on their own they run nothing);
# - `find` with a path or a test after it (`find / -name x`, not "find out why ...");
# - a lesser-known tool piped into a text filter (`show_gids | grep v2`): its name has an
#   underscore, dash, dot or digit, which an English word in a sentence does not.
_LOOP = re.compile(r"^(?:for\s*\(\(|for\s+\w+\s+in\s|while\s|until\s)")
_DO, _DONE = re.compile(r";\s*do\s"), re.compile(r"[;&]\s*done\b")
_FIND = re.compile(r"^find\s+(?:[/.~$\"']|-\w)")
_FILTERS = "grep|egrep|fgrep|awk|sed|head|tail|wc|sort|uniq|cut|tr|tee|xargs|less|more|column|jq"
_TOOL_PIPE = re.compile(rf"^(?=\S*[_.\d-])[a-z][\w.+-]*(?:\s[^|]*)?\|\s*(?:sudo\s+)?(?:{_FILTERS})\b")
# Commands that run nothing without an operand. In a sentence, `torchrun --standalone`,
# `pip install` or `docker run` names a command or one of its options; it is no command to run.
# Keys: a command, or a command and its subcommand; options alone do not complete them, except
# those that make the command say something about itself (`python -V`).
_NEEDS_OPERAND = frozenset(
    """torchrun mpirun mpiexec deepspeed horovodrun msrun python python3 pip+install pip3+install
    pip+uninstall pip3+uninstall pip+download conda+install git+clone docker+run docker+pull
    docker+build docker+exec docker+push apt+install apt-get+install yum+install accelerate+launch
    swift+sft swift+pt swift+rlhf swift+infer swift+export swift+eval swift+deploy""".split()
)
_SAYS_ITSELF = frozenset("-V -VV --version -h --help".split())
# A shell prompt before a command: `$ `, `user@host:~$ `, `(env) $ `, `# sudo ...` (root's prompt).
PROMPT = re.compile(
    r"^\s*(?:\(\w[\w.-]*\)\s*)?(?:[\w.-]+@[\w.-]+(?::[^\s$#]*)?\s*[$#]|\$|#(?=\s*(?:sudo|export)\b))\s+"
)
_ASSIGN = re.compile(r"^[A-Z_][A-Z0-9_]*=\S")  # NCCL_DEBUG=INFO: an environment setting
# Settings before a command; a quoted value may hold spaces (`NCCL_IB_HCA="mlx5_0 mlx5_1"`).
ASSIGNMENTS = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=(?:\"[^\"\n]*\"|'[^'\n]*'|\S*)\s+)+")
_SETTING = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*")  # the same, or one being cleared (`NAME=`)
_SHELL_OPS = re.compile(
    r"\s(&&|\|\||\|)\s|\$\(|[<>]\(|;\s*\w|"
    r"\|\s*(sudo(\s+-\S+)*\s+)?((ba|z|da|k)?sh|python[\d.]*|perl|ruby|node|base64|xargs|tee|source)\b"
)
# Words that run the command after them (`time pip install x`, `nohup python ...`, `uv pip ...`),
# and a subshell's parenthesis: the command is what follows.
_RUNS_NEXT = frozenset("time nohup env exec command nice stdbuf uv pipx ( ((".split())
_VERSIONED = re.compile(r"^(python|pip)\d+(\.\d+)*$")  # python3.10, pip3.11

# Commands that destroy data or state for good, kill processes or stop machines: shown with a
# caution label wherever they are shown, and dangerous enough that a model may never write one it
# invented. Where the line is drawn: what cannot simply be done again is flagged, namely
# - deleting or overwriting files and disks: rm, unlink, shred, truncate, find -delete or
#   -exec rm, xargs rm, emptying a file (`: > f`, `cat /dev/null > f`), dd/mkfs/wipefs/fdisk/
#   parted on a device, docker prune and volume removal;
# - throwing work away: git clean -f, git reset --hard, git checkout -f / -- / ., git restore
#   (not --staged), git push --force (not --force-with-lease);
# - killing without a chance to clean up (kill -9, pkill, killall, docker kill), stopping or
#   resetting machines and devices (reboot, shutdown, init 0/6, systemctl stop, nvidia-smi -r,
#   npu-smi ... reset, sysrq-trigger), ipcrm, iptables -F, crontab -r, chmod/chown -R on /;
# - removing a cluster's objects or jobs: kubectl delete, helm uninstall, scancel;
# - piping a download into a shell (it runs whatever the server sends).
# Not flagged, because it can be done again or undoes itself: installing or uninstalling packages
# (pip uninstall -y, apt remove), pulling or removing images (docker rmi), plain `kill PID`
# (SIGTERM lets the process clean up), restarting a service, `cmd > out.log` (a command writing
# its own output file), sysctl -w and export (gone at the next boot or shell).
# Case matters: `Reboot the node` or `Truncate long inputs` is a sentence, not a command.
# Where a command starts: a line, after a shell operator (and a loop's `do`, `then`, `nohup`
# ...), after sudo, or as find's -exec.
_CMD_START = (
    r"(?:(?:^|[;&|(]|\$\()\s*(?:(?:do|then|else|nohup|time|exec)\s+)*"
    r"|\bsudo(?:\s+-\S+)*\s+|\s-(?:exec|execdir|ok)\s+)"
)
# The words of one command before the option that makes it destructive: at most 16, each taken
# whole (possessive), so that a long hostile line is read in linear time.
_ARGS = r"(?:\s++[^\s;&|]++){0,16}?"
_DESTROYS = (
    rf"rm\s+\S|unlink\s+\S|shred\b|truncate\s+-|find\b{_ARGS}\s+-delete\b|"
    r"xargs(?:\s+-\S+)*\s+(?:sudo\s+)?(?:rm|shred|unlink)\b|(?::|true|cat\s+/dev/null)\s*>(?!>)\s*\S|"
    rf"dd\b{_ARGS}\s+of=/dev/|mkfs(?:\.\w+)?\b|mkswap\b|wipefs\b|fdisk\b|parted\b|blkdiscard\b|"
    r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk)|"
    r"docker\s+(?:\w+\s+)?prune\b|docker\s+(?:volume\s+rm|rm\s+(?:-\w*f|--force)|kill)\b|"
    rf"kubectl\b{_ARGS}\s+delete\b|helm\s+(?:uninstall|delete)\b|"
    rf"git\s+(?:-C\s+\S+\s+)?(?:clean\b{_ARGS}\s+(?:-\w*f|--force)|reset\b{_ARGS}\s+--hard\b|"
    rf"checkout\b{_ARGS}\s+(?:-f|--force|--|\.)(?!\S)|restore\b(?!{_ARGS}\s+--staged\b)|"
    rf"push\b{_ARGS}\s+(?:-f|--force)(?!\S))"
)
_STOPS = (
    r"kill\s+(?:-s\s*|-)(?:SIG)?(?:9|KILL)\b|pkill\b|killall\b|scancel\b|reboot\b|shutdown\b|poweroff\b|halt\b|"
    r"init\s+[06]\b|systemctl\s+(?:stop|disable|mask|kill|reboot|poweroff|halt)\b|ipcrm\b|iptables\s+-F|"
    r"crontab\s+-r\b|chmod\s+-R\s+777\s+/|ch(?:mod|own)\s+-R\s+\S+\s+/(?!\S)|"
    rf"nvidia-smi\b{_ARGS}\s+(?:-r|--gpu-reset)\b|npu-smi\s+set\b{_ARGS}\s+reset\b"
)
_DESTRUCTIVE = re.compile(
    rf"{_CMD_START}(?:{_DESTROYS}|{_STOPS})"
    # Piping a download into a shell runs whatever the server sends.
    r"|\b(curl|wget)\b(?:\s++[^\s|]++){0,16}?\s*\|\s*(sudo\s+)?(ba|z|da)?sh\b",
    re.M,
)
# The same kind of command found anywhere in a sentence, not only at a command's start.
DANGER_IN_TEXT = re.compile(
    rf"(\b(curl|wget)\b(?:[^\S\n]++[^\s|]++){{0,16}}?[^\S\n]*\|\s*(sudo\s+)?(ba|z|da|k)?sh\b|\brm\s+-[a-zA-Z]*[rf]|\bdd{_ARGS}\s+of=/dev/|"
    r"\bmkfs(\.\w+)?\s|\bkill\s+-(9|KILL)\b|\bchmod\s+-R\s+777\b|:\(\)\s*\{\s*:\|:&\s*\};:|"
    r"\bipcrm\s+-|>\s*/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d)|"
    rf"\bgit\s+clean{_ARGS}\s+-\w*f|\bgit\s+reset{_ARGS}\s+--hard\b|\bfind{_ARGS}\s+-delete\b|"
    r"\s-exec(?:dir)?\s+(?:sudo\s+)?rm\s|\bshred\s+-|\btruncate\s+-s\s*0\b|\bdocker\s+system\s+prune\b|"
    r"\bwipefs\s+-|>\s*/proc/sysrq-trigger)"
)


# `<image>`, `<shmid>`, `<your token>`: a value the reader must put in. Not `<<EOF`, `2>&1`, `< file`.
_PLACEHOLDER = re.compile(r"(?<![<\w])<[A-Za-z][\w .:/-]{0,40}?[\w.]>(?!>)")


# A value a Chinese FAQ describes where it goes (`pip install paddlepaddle==需要安装的版本号（如 2.0）`,
# `ulimit -u 最大进程数`): to be replaced as much as `<image>` is. Quoted text and `# 注释` comments are
# the command's own words, so they are blanked first. Of the corpus's commands, 7 hold Chinese: these
# 3 and 4 comments.
_CJK_FILL_IN = re.compile(r"[\u3400-\u9fff][^\s'\"（(]*(?:[（(][^）)]{0,40}[）)])?")
_QUOTED_OR_COMMENT = re.compile(r"'[^']*'|\"[^\"]*\"|(?:^|\s)#.*$", re.M)


def placeholders(command: str) -> list[str]:
    """The placeholders in a command, in order (`docker run ... <image> /bin/bash` -> [<image>]).
    Run as written, the shell reads `<image> /bin/bash` as "from the file image, into /bin/bash"."""
    command = command[:20_000]
    found = [m.group(0) for m in _PLACEHOLDER.finditer(command)]
    found += [m.group(0) for m in _CJK_FILL_IN.finditer(_QUOTED_OR_COMMENT.sub(" ", command))]
    return list(dict.fromkeys(found))


def is_destructive(command: str) -> bool:
    """Gets a caution label: deletes data, kills processes, stops a machine, pipes a download
    into a shell."""
    return bool(_DESTRUCTIVE.search(command.strip()) or DANGER_IN_TEXT.search(command))


# ---- fences -----------------------------------------------------------------------------------


def closes(line: str, fence: str) -> bool:
    """Does `line` close a fence opened with `fence` (CommonMark: the same character only, at
    least as many)?"""
    s = line.strip()
    return s.startswith(fence) and s.strip(fence[0]) == ""


@dataclass(frozen=True)
class Segment:
    """A run of lines that are all prose, or one fenced block (its opening and closing lines
    included, as written)."""

    code: bool
    info: str  # the fence's info string, lower case ("" for prose)
    lines: tuple[str, ...]


def segments(text: str) -> Iterator[Segment]:
    """The text as prose runs and fenced blocks, in order; nothing is dropped."""
    prose: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        if prose:
            yield Segment(False, "", tuple(prose))
            prose = []
        j = i + 1
        while j < len(lines) and not closes(lines[j], m.group(2)):
            j += 1
        yield Segment(True, m.group(3).lower(), tuple(lines[i : j + 1]))
        i = j + 1
    if prose:
        yield Segment(False, "", tuple(prose))


@dataclass(frozen=True)
class CodeBlock:
    info: str
    lines: tuple[str, ...]


def code_blocks(markdown: str) -> list[CodeBlock]:
    """Fenced blocks with their info string; indentation (list items) removed."""
    blocks: list[CodeBlock] = []
    for seg in segments(markdown):
        if not seg.code:
            continue
        opening = FENCE_OPEN.match(seg.lines[0])
        assert opening is not None
        indent, fence = len(opening.group(1)), opening.group(2)
        body = seg.lines[1:]
        if body and closes(body[-1], fence):
            body = body[:-1]
        lines = tuple(line[indent:] if line[:indent].strip() == "" else line.lstrip() for line in body)
        blocks.append(CodeBlock(info=seg.info, lines=lines))
    return blocks


def prose(markdown: str) -> str:
    """The markdown with fenced code removed: what the text says rather than shows."""
    return "\n".join(line for seg in segments(markdown) if not seg.code for line in seg.lines)


_FENCE_RUN = re.compile(r"^(`{3,}|~{3,})(.*)$")


def fence_run(line: str) -> tuple[str, str] | None:
    """(marker, rest) when `line` (already stripped of its indentation) starts a fence run."""
    m = _FENCE_RUN.match(line)
    return (m.group(1), m.group(2)) if m else None


def unclosed_fence(text: str) -> int | None:
    """The 1-based line of a code fence that is never closed, else None. Markdown reads the rest
    of the file as code, so the questions below such a fence silently vanish. Fences inside
    lists and block quotes count too; ```x``` on one line is inline code, not a fence."""
    open_at, marker = None, ""
    for n, line in enumerate(text.split("\n"), 1):
        run = fence_run(line.lstrip(" \t>"))
        if run is None:
            continue
        fence, rest = run
        if open_at is None:
            if fence[0] == "`" and "`" in rest:
                continue
            open_at, marker = n, fence
        elif closes(fence + rest, marker):
            open_at = None
    return open_at


def close_open_fence(lines: list[str]) -> list[str]:
    """The lines with a fence left open closed at the end (markdown-it ends an unclosed fence
    with its container; an entry's body is cut from its document)."""
    open_fence: str | None = None
    for line in lines:
        run = fence_run(line.lstrip())
        if run is None:
            continue
        marker, rest = run
        if open_fence is None:
            open_fence = marker
        elif closes(marker + rest, open_fence):
            open_fence = None
    return lines + [open_fence] if open_fence else lines


# ---- commands ---------------------------------------------------------------------------------


def strip_prompt(line: str) -> str:
    return PROMPT.sub("", line, count=1).strip()


def is_command_line(line: str) -> bool:
    """A line an FAQ tells the reader to run: it starts with a known command word (after a
    prompt and `NAME=value` settings), with arguments unless the word is a command on its own,
    and with the operand the command needs; or it is a shell loop, a `find`, or a tool piped
    into a filter (see _LOOP)."""
    s = strip_prompt(line)
    if not s or s.startswith(("#", "//")):
        return False
    words = s.split()
    first = words[0]
    if _ASSIGN.match(first):
        # `NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0 torchrun ...` (ms-swift's docs start most of their
        # commands with several settings), but not a bare `KEY=value` line of a file.
        # Settings continued on the next line (`NPROC_PER_NODE=4 \` then `swift sft \` ...) start one.
        rest = ASSIGNMENTS.sub("", s, count=1).split()
        return bool(rest) and (rest[0] in COMMAND_WORDS or rest == ["\\"])
    if (_LOOP.match(s) and _DO.search(s) and _DONE.search(s)) or _FIND.match(s) or _TOOL_PIPE.match(s):
        return True
    if first not in COMMAND_WORDS and not first.startswith("mkfs."):
        return False
    if len(words) == 1:
        return first in STANDALONE
    return not _lacks_operand(words)


def _lacks_operand(words: list[str]) -> bool:
    """`torchrun --standalone`, `pip install`: a command that needs an operand, with none."""
    for n in (2, 1):
        if "+".join(words[:n]) in _NEEDS_OPERAND:
            return all(w.startswith("-") and w not in _SAYS_ITSELF for w in words[n:])
    return False


def looks_like_command(text: str) -> bool:
    """Something a reader would paste into a shell (or a setting they would export)."""
    s = strip_prompt(text)
    if not s or s.startswith(("#", "//")):
        return False
    if is_destructive(s) or is_command_line(s):
        return True
    words = s.replace("(", "( ", 1).split() if s.startswith("(") else s.split()
    i = 0
    while i < len(words) and (words[i] in ("sudo", *_RUNS_NEXT) or _SETTING.match(words[i])):
        i += 1
    if i == len(words):
        return i > 0 and words[0] not in ("sudo", *_RUNS_NEXT)  # a bare NAME=value setting
    first, rest = words[i], len(words) - i - 1
    if first in COMMAND_WORDS or _VERSIONED.match(first):
        return rest > 0 or i > 0 or first in STANDALONE
    if first.startswith(("./", "/", "~/")):
        return rest > 0 or first.endswith((".sh", ".py"))
    return bool(_SHELL_OPS.search(s))
