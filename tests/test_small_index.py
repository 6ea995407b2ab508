"""A team's own small FAQ (one entry, six entries): the gate answers what the FAQ covers and
shows no command for what it does not (real embedder, real index, the committed model).

The committed gate learnt this from real posts searched in one-document indexes
(evaluation/subsets.py); before, the lead of the only entry over nothing made any post about
training look certain, and a CUDA error got the HCCL timeout's `export` as a match.
"""

import pytest

ONE_ENTRY = """# HCCL fails with EI0006 "Socket build timeout"

Not every rank reached the link setup within the default 120 s (one node was slow, or a large
model loads before the communicator is built). Allow longer:

```bash
export HCCL_CONNECT_TIMEOUT=1200
```
"""

CLUSTER_EN = """# Cluster FAQ

## torchrun stops with "Address already in use" on port 29500

An earlier job on the node still holds the rendezvous port. Wait for it to exit or use another port:

```bash
torchrun --nproc_per_node=8 --master_port=29611 train.py
```

## NCCL hangs during init on nodes with several network interfaces

NCCL can pick a docker bridge or an interface the other node cannot reach. Name the one that
carries the cluster traffic:

```bash
export NCCL_SOCKET_IFNAME=eth0
```

## HCCL fails with EI0006 "Socket build timeout"

Not every rank reached the link setup within the default 120 s. Allow longer:

```bash
export HCCL_CONNECT_TIMEOUT=1200
```

## Saving a checkpoint fails with "No space left on device"

The disk under the checkpoint folder is full. Check what is free and remove old checkpoints:

```bash
df -h /data/ckpt
```
"""

CLUSTER_ZH = """# 集群常见问题

## 多机训练时 ssh 免密登录失败怎么办？

启动脚本要能从主节点免密登录到每台机器。在主节点生成密钥并拷贝到其他节点：

```bash
ssh-keygen -t rsa
ssh-copy-id user@node2
```

## 如何查看每个进程用的是哪张卡？

在训练脚本里打印 `LOCAL_RANK`，再用下面的命令对照显存占用：

```bash
nvidia-smi
```
"""

# Posts about training that neither FAQ answers (each shares words with some entry).
NOT_COVERED = [
    "训练到一半报 RuntimeError: CUDA error: an illegal memory access was encountered",
    "多机训练时第二台机器一直卡在 init_process_group，没有任何报错",
    "Multi-node training crashes\n\nTraceback (most recent call last):\n"
    '  File "train.py", line 40, in <module>\n    dist.init_process_group("nccl")\n'
    "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled cuda error, NCCL version 2.14.3",
    "DataLoader worker (pid 1234) is killed by signal: Bus error. It is possible that dataloader's "
    "workers are out of shared memory.",
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.69 GiB total capacity)",
]


def _kb(tmp_path_factory, name: str, files: dict[str, str]):
    from kb.indexing import ingest
    from kb.service import KnowledgeBase

    docs = tmp_path_factory.mktemp(name)
    for path, text in files.items():
        (docs / path).parent.mkdir(parents=True, exist_ok=True)
        (docs / path).write_text(text, "utf-8")
    index = docs.parent / f"{docs.name}-index"
    ingest([str(docs)], index)
    return KnowledgeBase.open(index=str(index))


@pytest.fixture(scope="module")
def one_entry(tmp_path_factory):
    return _kb(tmp_path_factory, "one-entry", {"hccl.md": ONE_ENTRY})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    return _kb(tmp_path_factory, "cluster", {"en/cluster.md": CLUSTER_EN, "zh/cluster.md": CLUSTER_ZH})


@pytest.mark.parametrize("post", NOT_COVERED)
def test_a_one_entry_faq_does_not_answer_what_it_is_not_about(one_entry, post):
    answer = one_entry.ask(post)
    assert answer.no_match or answer.weak, answer.citations[0].entry.title
    assert answer.commands == ()


def test_a_one_entry_faq_answers_its_own_error(one_entry):
    answer = one_entry.ask("EI0006: Socket build timeout while creating the HCCL communicator on 16 NPUs")
    assert not answer.no_match and not answer.weak
    assert answer.commands == ("export HCCL_CONNECT_TIMEOUT=1200",)


@pytest.mark.parametrize("post", NOT_COVERED)
def test_a_small_team_faq_shows_no_command_for_what_it_does_not_cover(cluster, post):
    answer = cluster.ask(post)
    assert answer.no_match or answer.weak, answer.citations[0].entry.title
    assert answer.commands == ()


@pytest.mark.parametrize(
    "post,title",
    [
        (
            "torch.distributed.DistNetworkError: The server socket has failed to bind to [::]:29500 "
            "(errno: 98 - Address already in use).",
            "torchrun stops with",
        ),
        ("NCCL hangs at init, the machines have eth0 and docker0", "NCCL hangs during init"),
        (
            "OSError: [Errno 28] No space left on device when torch.save writes the checkpoint",
            "Saving a checkpoint",
        ),
        ("ssh 免密登录失败", "多机训练时 ssh 免密登录失败"),
        ("怎么看每个进程用哪张卡", "如何查看每个进程用的是哪张卡"),
    ],
)
def test_a_small_team_faq_answers_what_it_covers(cluster, post, title):
    answer = cluster.ask(post)
    assert not answer.no_match and not answer.weak
    assert answer.citations[0].entry.title.startswith(title) and answer.commands
