"""A team's FAQ runs its own tools (Slurm, Kubernetes, site scripts): every line of a shell fence
is a command an answer shows, while the index reads only the commands a known word starts."""

import time

import pytest

from ingest.code import is_destructive
from ingest.collect import entries_from_text
from ingest.signals import commands

SITE_TOOLS = """## How do I resubmit a job that srun could not place?

```bash
sinfo -s
srun -p gpu -N 2 --gres=gpu:8 python train.py
module load cuda/12.1
kubectl delete pod train-worker-1
./scripts/resubmit.sh
```

The limits the node has:

```bash
$ ulimit -a
open files                      (-n) 1024
max user processes              (-u) 4096
```
"""


def test_every_line_of_a_shell_fence_is_a_command_though_no_list_knows_its_program():
    # A team's FAQ runs its own tools (Slurm, Kubernetes, site scripts); a shell fence says
    # "type this". Aligned output under a command in the same kind of fence stays out.
    (entry,) = entries_from_text("en/slurm.md", SITE_TOOLS)
    assert entry.commands == (
        "sinfo -s",
        "srun -p gpu -N 2 --gres=gpu:8 python train.py",
        "module load cuda/12.1",
        "kubectl delete pod train-worker-1",
        "./scripts/resubmit.sh",
        "ulimit -a",
    )
    assert [c for c in entry.commands if is_destructive(c)] == ["kubectl delete pod train-worker-1"]
    # Outside a shell fence the strict rule holds: an unknown word starts no command.
    assert commands("```text\nsrunner -p gpu\nmytool --fix\n```\n") == ()


def test_the_index_reads_only_commands_a_known_word_starts():
    # The lexical bag keeps its measured shape (index/views.py): a site's own tools are shown as
    # commands but not indexed as such.
    (entry,) = entries_from_text("en/slurm.md", SITE_TOOLS)
    assert {"module load cuda/12.1", "./scripts/resubmit.sh"} <= set(entry.commands)
    assert commands(entry.body, shell_fences=False) == (
        "sinfo -s",
        "srun -p gpu -N 2 --gres=gpu:8 python train.py",
        "kubectl delete pod train-worker-1",
        "ulimit -a",
    )


@pytest.mark.parametrize("line", ["mytool" + " " * 300_000 + "x", "](" * 150_000, "A=x " * 75_000 + "run"])
def test_a_long_hostile_line_in_a_shell_fence_is_read_in_linear_time(line):
    # A bound that only a quadratic scan breaks (a run of spaces before a `#`, a link per `](`).
    from ingest.lang import guess_lang

    started = time.monotonic()
    commands(f"```bash\n{line}\n```\n")
    guess_lang(line)
    assert time.monotonic() - started < 5
