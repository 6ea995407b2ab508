"""ingest/code.py: which lines of an FAQ are commands, and which commands get a caution label.

Both directions are pinned: what must be found or flagged, and what must not be (log lines,
program output, sentences, fragments of a command named in a sentence)."""

import time

import pytest

from ingest.code import is_command_line, is_destructive, looks_like_command, placeholders
from ingest.collect import entries_from_text
from ingest.signals import commands

# ---- destructive: what a careful operator would want a caution label on -----------------------

WIPES_DATA_OR_STATE = [
    "kubectl delete pod train-worker-1",  # the cluster's objects go, and the job with them
    "kubectl -n train delete job llama-sft",
    "helm uninstall trainer",
    "scancel 81234",  # a queued or running job is thrown away
    # git throwing work away
    "git clean -fdx",
    "git clean -fd",
    "git clean -xdf",
    "git clean -d -x -f",
    "git clean --force",
    "git reset --hard origin/main",
    "git -C ~/src/project reset --hard",
    "git checkout -- .",
    "git checkout -f release",
    "git restore model.py",
    "git push --force origin dev",
    # deleting or emptying files
    "find ~/.cache/torch -name '*.lock' -delete",
    "find /tmp/ckpt -type f -mtime +3 -exec rm {} \\;",
    "find . -name core.* -execdir rm -f {} +",
    "find /var/log/job -name '*.gz' | xargs rm",
    "find . -print0 | xargs -0 rm -f",
    "truncate -s 0 /var/log/trainer.log",
    "cd /data && truncate --size 0 metrics.csv",
    "shred -u secrets.env",
    ": > /var/log/npu/slog.txt",
    "cat /dev/null > nohup.out",
    "rm stale.pid",
    "sudo rm /dev/shm/nccl-abc",
    "sudo -E rm -rf /opt/venv",
    "x=$(rm -f /tmp/port.lock)",
    # disks and devices
    "wipefs -a /dev/sdc",
    "mkfs.xfs /dev/nvme1n1",
    "dd if=/dev/zero of=/dev/sdb bs=1M count=10",
    "echo garbage > /dev/nvme0n1",
    "nvidia-smi -i 3 -r",
    "nvidia-smi --gpu-reset -i 0",
    "npu-smi set -t reset -i 0 -c 0",
    # containers
    "docker system prune -af",
    "docker volume prune",
    "docker volume rm dataset-cache",
    "docker rm -f trainer",
    # killing, stopping, resetting the machine
    "kill -9 -1",
    "kill -s KILL 4242",
    "kill -SIGKILL 4242",
    "pkill -f torchrun",
    "killall python3",
    "for p in $(pgrep -f train.py); do kill -9 $p; done",
    "if pgrep sshd; then systemctl stop sshd; fi",
    "systemctl poweroff",
    "init 0",
    "echo b > /proc/sysrq-trigger",
    "crontab -r",
    "chmod -R 777 /",
    "chown -R nobody /",
    # the rules that were already there still hold
    "rm -rf ./output",
    "sudo reboot",
    "curl -fsSL https://example.invalid/setup.sh | sudo bash",
    "ipcrm -a",
    "echo done; shutdown -h now",
]

CHANGES_NOTHING_FOR_GOOD = [
    "git clean -n",
    "git clean -nd",
    "git reset HEAD train.py",
    "git reset --soft HEAD~1",
    "git checkout -b fix-port",
    "git restore --staged config.yaml",
    "git push --force-with-lease",
    "git push origin main",
    "git stash",
    "find / -name libhccl.so",
    "find . -name '*-delete-me*'",
    "kill 4242",  # SIGTERM: the process may clean up
    "pip uninstall -y mindspore",  # installed again in a minute
    "conda remove numpy",
    "docker rmi old/image:1.0",  # pulled again
    "docker rm trainer",
    "docker run --rm -it img bash",
    "python train.py > train.log 2>&1",  # a command writing its own log
    "echo 'export NCCL_DEBUG=INFO' >> ~/.bashrc",
    "env > env.txt",
    "sysctl -w net.core.somaxconn=4096",
    "systemctl restart docker",
    "nvidia-smi -L",
    "nvidia-smi --query-gpu=name,reset_status --format=csv",
    "npu-smi info",
    "rmdir empty_dir",
    "kubectl get pods -o wide",
    "kubectl logs train-worker-1",
    "squeue -u $USER",
    "truncate",
    # sentences are not commands: case and context matter
    "Reboot the node after the driver upgrade",
    "Truncate long prompts to 4096 tokens",
    "truncate long prompts to 4096 tokens",
    "Install the new driver, then reboot the host.",
    "worker 3 failed to do shutdown cleanly",
    "time.sleep(2); halted = True",
]


@pytest.mark.parametrize("command", WIPES_DATA_OR_STATE)
def test_commands_that_destroy_data_or_state_are_flagged(command):
    assert is_destructive(command), command


@pytest.mark.parametrize("command", CHANGES_NOTHING_FOR_GOOD)
def test_commands_that_can_be_undone_or_are_sentences_are_not_flagged(command):
    assert not is_destructive(command), command


def test_a_destructive_line_inside_a_multiline_command_is_flagged():
    assert is_destructive("for d in 0 1 2 3\ndo\n    rm -rf /cache/rank$d\ndone")
    assert is_destructive("make clean \\\n  && git reset --hard")
    assert not is_destructive("for d in 0 1 2 3\ndo\n    ls /cache/rank$d\ndone")


# ---- recognised as commands -------------------------------------------------------------------

RUNNABLE = [
    "find /usr -name 'libcudnn*'",
    "find . -maxdepth 2 -name '*.ckpt' -delete",
    "$ find ~/.cache -type d -empty",
    "truncate -s 0 worker.log",
    "shred -n 3 old.key",
    "show_gids | grep v2",
    "show_gids|grep -i roce",
    "ibdev2netdev | grep Up",
    "show_gids",
    "for i in $(seq 0 7); do hccn_tool -i $i -ip -g; done",
    "for i in {0..7}; do npu-smi info -t board -i $i; done",
    "for ((r=0; r<4; r++)); do echo rank $r; done",
    "while true; do nvidia-smi; sleep 2; done",
    "user@node:~$ until ping -c1 master; do sleep 1; done",
    "cd /opt/workspace",
    "tar xzf logs.tar.gz",
    "mkfs.ext4 /dev/sdd1",
    "torchrun --standalone --nproc_per_node=8 train.py",
    "pip install -r requirements.txt",
    "python -V",
    "mpirun --version",
    "docker run --rm -it img bash",
]

NOT_RUNNABLE = [
    # sentences
    "find out which rank failed first",
    "while training, watch the loss",
    "while the job runs; do not touch the node",
    # python, not shell
    "for step in range(10):",
    "for x in batch: print(x)",
    # a multi-line loop's own lines run nothing by themselves
    "for i in {0..7}",
    "for((i=0;i<RANK_SIZE;i++))",
    "do",
    "done",
    # program output and log lines, even with a pipe in them
    "| 0  Tesla V100-SXM2  On   | 00000000:1A:00.0 Off |",
    "epoch 3 | loss 0.412 | lr 1e-4",
    "rank_0 | step 100 | grad_norm 2.1",
    "2024-05-01 10:00:01 | grep started",
    "W0501 10:00:01.123 worker.cc:42] heartbeat late | retry 3",
    "LAUNCH INFO job id 7 | grep ok",
    "foo | grep bar",  # an unknown word piped: runnable, but no FAQ command (tests/test_code.py)
    # a command named in a sentence: an option or a subcommand with nothing to act on
    "torchrun --standalone",
    "python -u",
    "pip install",
    "pip install --upgrade",
    "docker run",
    "docker run --memory",
    "git clone",
]


@pytest.mark.parametrize("line", RUNNABLE)
def test_lines_an_faq_tells_the_reader_to_run(line):
    assert is_command_line(line), line
    assert looks_like_command(line), line  # the broad question agrees with the strict one


@pytest.mark.parametrize("line", NOT_RUNNABLE)
def test_output_log_lines_sentences_and_fragments_are_not_commands(line):
    assert not is_command_line(line), line


# ---- what an entry lists --------------------------------------------------------------------

FAQ = """## Q: The disk fills up with checkpoints and the RoCE card shows no v2 GID. What do I do?

First check which GIDs the card has:

```bash
show_gids | grep v2
```

Then print every NPU's address in one go:

```shell
for i in $(seq 0 7); do hccn_tool -i $i -ip -g; done
```

Old checkpoints and a runaway log can go:

```bash
find /data/ckpt -name '*.ckpt' -mtime +7 -delete
truncate -s 0 /data/logs/train.log
git clean -fdx
```

The log looked like this before the cleanup:

```text
[rank0] step 10 | loss 2.31
[rank0] step 20 | loss 2.05
find: '/data/ckpt/tmp': Permission denied
No space left on device
```

For a single node, `torchrun --standalone` picks a free port itself; run
`torchrun --standalone --nproc_per_node=8 train.py`.
"""


def test_an_entry_lists_find_truncate_loops_and_tool_pipes_and_flags_the_wipes():
    (entry,) = entries_from_text("en/cleanup.md", FAQ)
    assert entry.commands == (
        "show_gids | grep v2",
        "for i in $(seq 0 7); do hccn_tool -i $i -ip -g; done",
        "find /data/ckpt -name '*.ckpt' -mtime +7 -delete",
        "truncate -s 0 /data/logs/train.log",
        "git clean -fdx",
        "torchrun --standalone --nproc_per_node=8 train.py",
    )
    # What every door labels (the MCP answer's destructive_commands is this same filter).
    assert [c for c in entry.commands if is_destructive(c)] == [
        "find /data/ckpt -name '*.ckpt' -mtime +7 -delete",
        "truncate -s 0 /data/logs/train.log",
        "git clean -fdx",
    ]


def test_output_blocks_and_named_options_add_no_commands():
    body = (
        "```text\nepoch 1 | loss 0.9\nepoch 2 | loss 0.7\nfind: 'x': No such file or directory\n```\n\n"
        "The `torchrun --standalone` option and the `docker run` command are described below.\n"
        "If the second node's `accelerate launch` never started, use the same `swift sft` arguments.\n"
    )
    assert commands(body) == ()


# ---- a long hostile line is read in linear time ---------------------------------------------


@pytest.mark.parametrize(
    "unit", ["(find ", "(dd x ", "curl x ", "(git reset ", "while ; do ", "A=x ", 'A="x ']
)
def test_a_long_hostile_line_is_checked_quickly(unit):
    line = unit * (300_000 // len(unit))
    started = time.monotonic()
    is_destructive(line)
    looks_like_command(line)
    is_command_line(line)
    assert time.monotonic() - started < 5


# ---- a shell loop written over several lines is one command ------------------------------------

LOOPS = """# Check every NPU's link

Run this on each host:

```bash
$ for i in $(seq 0 7)
do
    hccn_tool -i $i -link -g
done
npu-smi info
```

Clean the stale sockets of every rank, one at a time:

```shell
while read host; do
  for port in 29500 29501; do
    ssh $host "fuser -k $port/tcp"
  done
  rm -rf /tmp/hccl_$host
  for d in 0 1; do ssh $host "npu-smi info -t health -i $d"; done
done < hostfile
```

```python
for rank in ranks:
    print(rank)
```
"""


def test_a_loop_over_several_lines_is_listed_whole_and_python_loops_are_not():
    (entry,) = entries_from_text("en/loops.md", LOOPS)
    first, second = (
        "for i in $(seq 0 7)\ndo\n    hccn_tool -i $i -link -g\ndone",
        'while read host; do\n  for port in 29500 29501; do\n    ssh $host "fuser -k $port/tcp"\n'
        "  done\n  rm -rf /tmp/hccl_$host\n"
        '  for d in 0 1; do ssh $host "npu-smi info -t health -i $d"; done\ndone < hostfile',
    )
    # The body alone (`hccn_tool -i $i ...` with $i unset) is not a command anyone can run.
    assert entry.commands == (first, "npu-smi info", second)
    assert [c for c in entry.commands if is_destructive(c)] == [second]


def test_several_settings_before_a_command_and_settings_continued_on_the_next_line():
    body = (
        '```bash\nNCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA="mlx5_0 mlx5_1" torchrun --nnodes=2 train.py\n'
        "NPROC_PER_NODE=4 \\\nCUDA_VISIBLE_DEVICES=0,1,2,3 \\\nswift sft \\\n    --train_type lora\n```\n"
        "```ini\nMASTER_ADDR=10.0.0.1\nWORLD_SIZE=16\n```\n"
    )
    assert commands(body) == (
        'NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA="mlx5_0 mlx5_1" torchrun --nnodes=2 train.py',
        "NPROC_PER_NODE=4 \\\nCUDA_VISIBLE_DEVICES=0,1,2,3 \\\nswift sft \\\n    --train_type lora",
    )
    assert not is_command_line("A=1 B=2") and not is_command_line("A=1 B=2 not_a_program --x")


def test_a_loop_that_is_never_closed_gives_the_commands_inside_it():
    body = "```bash\nfor n in node1 node2\ndo\n  ping -c 1 $n\n```\n"
    assert commands(body) == ("ping -c 1 $n",)


@pytest.mark.parametrize(
    "command,found",
    [
        ("docker run --gpus all -it <image> /bin/bash", ["<image>"]),
        ("ssh <user>@<host> 'kill -9 <PID>'", ["<user>", "<host>", "<PID>"]),
        ('curl -H "Authorization: Bearer <your token>" http://x', ["<your token>"]),
        ("cat <<EOF > hostfile", []),
        ("python train.py 2>&1 | tee log < /dev/null", []),
        ('echo "<b>"', []),
        # A value described in words where it goes, as Chinese FAQs write it; not comments, not quotes.
        ("pip install paddlepaddle-gpu==需要安装的版本号（如 2.0）", ["需要安装的版本号（如 2.0）"]),
        ("ulimit -u 最大进程数", ["最大进程数"]),
        ("export ASCEND_SLOG_PRINT_TO_STDOUT=1    # 配置开启日志打屏", []),
        ('echo "训练开始" && python train.py', []),
    ],
)
def test_placeholders_are_what_the_reader_fills_in_and_not_redirections(command, found):
    assert placeholders(command) == found
