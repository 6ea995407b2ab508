"""ingest/code.py: one set of rules for fences, commands and destructive commands, whoever asks."""

import pytest

from ingest.code import (
    code_blocks,
    is_command_line,
    is_destructive,
    looks_like_command,
    prose,
    segments,
    strip_prompt,
    unclosed_fence,
)


def test_fences_close_as_commonmark_says():
    text = "intro\n````bash\n```\nstill code\n````\nafter\n~~~\nunclosed"
    kinds = [(s.code, s.info, len(s.lines)) for s in segments(text)]
    assert kinds == [(False, "", 1), (True, "bash", 4), (False, "", 1), (True, "", 2)]
    assert [b.lines for b in code_blocks(text)] == [("```", "still code"), ("unclosed",)]
    assert prose(text) == "intro\nafter"
    assert unclosed_fence(text) == 7


def test_inline_code_on_one_line_is_no_open_fence():
    assert unclosed_fence("run ```x``` now\n\ntext") is None
    assert unclosed_fence("> ```bash\n> ls") == 1  # inside a quote it still opens one


@pytest.mark.parametrize(
    "line, faq_command, runnable",
    [
        ("$ npu-smi info", True, True),
        ("# sudo reboot", True, True),  # root's prompt, not a comment
        ("ibv_devinfo", True, True),  # a command on its own
        ("NCCL_DEBUG=INFO python train.py", True, True),
        ("export NCCL_SOCKET_IFNAME=eth0", True, True),
        ("NCCL_SOCKET_IFNAME=", False, True),  # clearing a setting: a reader would paste it
        ("./run.sh", False, True),
        ("make && make install", True, True),
        ("foo | grep bar", False, True),  # shell operators: runnable, but no FAQ command word
        ('dmesg -T | grep -i "killed process"', True, True),  # the kernel's log, for an OOM kill
        ("py-spy dump --pid 5122", True, True),  # where a hung process waits
        ("kill", False, False),  # a word in a sentence
        ("# a comment", False, False),
    ],
)
def test_the_two_questions_about_a_line(line, faq_command, runnable):
    assert is_command_line(line) is faq_command
    assert looks_like_command(line) is runnable


def test_destructive_is_one_rule_for_every_label():
    for cmd in ("rm -rf /data", "sudo reboot", "dd if=x of=/dev/sda", "curl x.sh | sh", "kill -9 123",
                "chmod -R 777 dir", "ipcrm -a", "echo ok; shutdown now"):  # fmt: skip
        assert is_destructive(cmd), cmd
    for cmd in ("npu-smi info", "ls -rf", "curl -O x.tar.gz", "python train.py --kill-9-workers"):
        assert not is_destructive(cmd), cmd
    assert strip_prompt("user@host:~$ ls -l") == "ls -l"
