"""Search over the real seed documents with the real embedder: pasted logs, both languages."""

import pytest
from conftest import needs_shared
from helpers import noisy_log

from kb.answer import LABELS

pytestmark = [pytest.mark.slow, needs_shared]

S000, S001, S002, S003, S004 = (
    "000_41158c45c4594662.txt",
    "001_6befd99b7fbb14ab.txt",
    "002_1ad754c4b0581e45.txt",
    "003_2c7350f9fc9ea2d9.txt",
    "004_bad8de7249131fae.txt",
)


LOG_CASES = [
    (["ExternalError: Nccl error(2), unhandled system error"], S002, "NCCL error(2)"),
    (
        [
            "OSError: (External) NCCL error(5), invalid usage.",
            "  [Hint: 'ncclInvalidUsage'. The call to NCCL is incorrect. This is usually reflecting a programming error.]",
        ],
        S002,
        "NCCL error(5)",
    ),
    (["RuntimeError: Init plugin so failed, ret = 1343225860"], S001, None),
    (
        ["include/socket.h:403 NCCL WARN Connect to 10.0.0.12<42417> failed: Network is unreachable"],
        S001,
        None,
    ),
    (
        [
            "pml_ucx.c:175 Error: Failed to receive UCX worker address: Not found (-13)",
            "pml_ucx.c:452 Error: Failed to resolve UCX endpoint for rank 12",
        ],
        S001,
        None,
    ),
    (
        [
            "RuntimeError: DNS resolution failed: [Errno -2] Name or service not known. Please check whether the correct host name is input."
        ],
        S001,
        None,
    ),
    (["np_tensor can not be split by strategy!"], S001, None),
    (
        [
            "Loading libgpu_collective.so failed. Many reasons could cause this:",
            "1.libgpu_collective.so is not installed.",
            "2.nccl is not installed or found.",
            "3.mpi is not installed or found",
        ],
        S000,
        None,
    ),
]


@pytest.mark.parametrize("key_at", ["end", "middle"])
@pytest.mark.parametrize("case", range(len(LOG_CASES)))
def test_noisy_200_line_log_finds_the_entry_first(seeds_kb, case, key_at):
    key_lines, doc, title = LOG_CASES[case]
    log = noisy_log(key_lines, seed=case, key_at=key_at)
    assert log.count("\n") >= 199
    result = seeds_kb.search(log)
    assert not result.no_match
    top = result.hits[0]
    docs = {top.entry.doc} | ({top.translation.doc} if top.translation else set())
    assert doc in docs, (top.entry.doc, top.entry.title)
    if title:
        assert top.entry.title == title


ZH_TO_EN_ONLY = [
    ("多机多卡训练时 OpenMPI 报 MPI_Allgather 失败，UCX 找不到 worker 地址怎么办？", 56),
    ("使用 msrun 启动时用主机名做 master_addr，报 DNS 解析失败怎么办", 181),
    ("Ascend 上用 OpenMPI 训练报 HcclCommInitRootInfo 错误怎么处理", 148),
    ("多机训练选了 RDMA 网卡之后还是报 ibv_modify_qp 错误", 112),
]


@pytest.mark.parametrize("query,line", ZH_TO_EN_ONLY)
def test_chinese_question_finds_english_only_entry(seeds_kb, query, line):
    result = seeds_kb.search(query)
    assert result.lang == "zh"
    top3 = [(h.entry.doc, h.entry.start_line) for h in result.hits[:3]]
    assert (S001, line) in top3, top3


EN_TO_ZH_ONLY = [
    ("ExternalError: Nccl error(2), unhandled system error", S002, "NCCL error(2)"),
    (
        "You are using GPU version Paddle, but your CUDA device is not set properly",
        S002,
        "PaddlePaddle 安装验证",
    ),
    (
        "RuntimeError: NCCL error in: /opt/conda/ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.10.3",
        S004,
        "NCCL导致的报错，报错信息如下",
    ),
    (
        "[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the asynchronous nature "
        "of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        S003,
        "多机多卡训练",
    ),
]


@pytest.mark.parametrize("query,doc,title", EN_TO_ZH_ONLY)
def test_english_error_finds_chinese_only_entry(seeds_kb, query, doc, title):
    result = seeds_kb.search(query)
    assert result.lang == "en" and not result.no_match
    top3 = [(h.entry.doc, h.entry.title) for h in result.hits[:3]]
    assert (doc, title) in top3, top3


def test_reader_language_first_with_translation_beside(seeds_kb):
    zh = seeds_kb.search("HCCL 分布式训练报错 Init plugin so failed, ret = 1343225860 怎么办").hits[0]
    en = seeds_kb.search("What does Init plugin so failed, ret = 1343225860 mean in HCCL training?").hits[0]
    assert (zh.entry.doc, zh.entry.lang, zh.translation.doc) == (S000, "zh", S001)
    assert (en.entry.doc, en.entry.lang, en.translation.doc) == (S001, "en", S000)


def test_the_answer_language_asked_for_changes_the_version_shown_not_the_confidence(seeds_kb):
    question = "HCCL 分布式训练报错 Init plugin so failed, ret = 1343225860 怎么办"
    found = {lang: seeds_kb.search(question, lang=lang) for lang in (None, "zh", "en")}
    assert len({r.confidence for r in found.values()}) == 1
    assert [(r.lang, r.hits[0].entry.lang) for r in found.values()] == [
        ("zh", "zh"),
        ("zh", "zh"),
        ("en", "en"),
    ]
    assert found["en"].hits[0].translation.id == found[None].hits[0].entry.id


def test_unrelated_question_is_no_match_with_suggestions(seeds_kb):
    result = seeds_kb.search("RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x512 and 256x10)")
    assert result.no_match and result.hits == [] and result.suggestions


def test_one_megabyte_paste_is_handled(seeds_kb):
    log = noisy_log(["ExternalError: Nccl error(2), unhandled system error"], seed=7, total=200)
    big = (log + "\n") * (1_000_000 // len(log) + 1)
    assert len(big) >= 1_000_000
    result = seeds_kb.search(big)
    assert result.hits and result.hits[0].entry.title == "NCCL error(2)"


def test_hits_resolve_to_whole_entries_without_duplicates(seeds_kb):
    result = seeds_kb.search("NCCL WARN Connect failed", k=10)
    ids = [h.entry.id for h in result.hits]
    assert len(ids) == len(set(ids))
    for h in result.hits:
        assert h.translation is None or h.translation.id != h.entry.id


# ---- what real posts look like (issue-tracker shapes, written here) ------------------------------

TEMPLATE_POST_ZH = """两台机器的训练起不来

### 环境
- 系统: Ubuntu 20.04
- Python 3.10, torch 2.1.0, NCCL 2.18.1

### 复现
```bash
ifconfig eth0 | grep "inet "
cat hostfile
node-a slots=8
node-b slots=8
```

本机如果不能免密登录，应该怎么处理？
"""


def test_the_question_inside_an_issue_template_is_what_is_matched(seeds_kb):
    alone = seeds_kb.search("本机如果不能免密登录，应该怎么处理？")
    in_post = seeds_kb.search(TEMPLATE_POST_ZH)
    assert alone.hits[0].entry.title == "免密登录"
    assert not in_post.no_match and in_post.hits[0].entry.title == "免密登录"


@pytest.mark.parametrize("code,other", [("2", "5"), ("5", "2")])
def test_the_error_code_decides_between_entries_of_one_family(seeds_kb, code, other):
    line = f"OSError: (External) NCCL error({code}), unhandled system error"
    titles = [h.entry.title for h in seeds_kb.search(line).hits]
    assert titles[0] == f"NCCL error({code})"
    assert f"NCCL error({other})" not in titles[:1]


def test_launcher_boilerplate_does_not_outrank_the_error(seeds_kb):
    log = "\n".join(
        [
            "LAUNCH INFO 2024-01-02 10:00:00 Pod failed",
            "I0102 10:00:01.123 collective_helper.cc:83] init nccl rank:0 nranks:2",
            "Traceback (most recent call last):",
            '  File "train.py", line 12, in <module>',
            "    paddle.distributed.init_parallel_env()",
            "OSError: (External) NCCL error(2), unhandled system error",
            "LAUNCH ERROR 2024-01-02 10:00:03 ABORT!!! Out of all 2 trainers, the trainer process with rank=[0] was aborted.",
        ]
    )
    assert seeds_kb.search(log).hits[0].entry.title == "NCCL error(2)"


@pytest.fixture(scope="module")
def paddle_zh(tmp_path_factory):
    from conftest import CORPUS

    from kb.indexing import ingest
    from kb.service import KnowledgeBase

    docs = tmp_path_factory.mktemp("paddle-zh")
    for name in ("train_cn.md", "distributed_cn.md"):
        (docs / name).write_bytes((CORPUS / "paddle" / "zh" / name).read_bytes())
    index = docs.parent / (docs.name + "-index")
    ingest([str(docs)], index)
    return KnowledgeBase.open(index=str(index))


@pytest.mark.parametrize("title", ["分布式训练出问题了", "训练挂了", "求助"])
def test_a_title_over_the_launchers_line_alone_finds_the_entry_for_that_line(paddle_zh, title):
    # Paddle's FAQ answers `Out of all N Trainers` (in Chinese). When the launcher's line is all
    # a post shows of the failure, it is the error to look up, not boilerplate to skip.
    line = (
        "ABORT!!! Out of all 4 trainers, the trainer process with rank=[3] was aborted. Please check its log."
    )
    result = paddle_zh.search(f"{title}\n\n{line}")
    assert not result.no_match
    assert "Out of all 4 Trainers" in (result.hits or result.suggestions)[0].entry.title


def test_an_english_post_finds_the_chinese_only_entry(seeds_kb):
    post = (
        "NCCL fails inside docker\n\n"
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.10.3\n"
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
        "Error while creating shared memory segment /dev/shm/nccl-XYZ (size 9637888)"
    )
    result = seeds_kb.search(post)
    assert result.lang == "en" and not result.no_match
    assert {h.entry.doc for h in result.hits[:2]} <= {S002, S004}


def test_chinese_words_around_an_english_error_get_a_chinese_answer(seeds_kb):
    answer = seeds_kb.ask("两台机器用 mpirun 跑 mindspore，报 Failed to receive UCX worker address")
    assert answer.lang == "zh" and not answer.no_match
    assert "UCX" in answer.citations[0].entry.title or "OpenMPI" in answer.citations[0].entry.title


def test_an_off_topic_post_gets_no_command(seeds_kb):
    post = (
        "pip install fails\n\n"
        "ERROR: Cannot install torch==2.1.0 and torchvision==0.17.0 because these package versions have "
        "conflicting dependencies.\nERROR: ResolutionImpossible: for help visit the pip documentation"
    )
    answer = seeds_kb.ask(post)
    assert answer.no_match or answer.weak
    assert answer.commands == ()


def test_history_helps_a_follow_up_and_nothing_else(seeds_kb):
    history = [("user", "Init plugin so failed, ret = 1343225860"), ("assistant", "(the earlier answer)")]
    follow_up = seeds_kb.search_in_context("What if I run it inside Docker?", history)
    assert "1343225860" in follow_up.hits[0].entry.title
    assert seeds_kb.search_in_context("thanks!", history).no_match
    new = seeds_kb.search_in_context("OSError: (External) NCCL error(5), invalid usage", history)
    assert new.hits[0].entry.title == "NCCL error(5)"


@pytest.mark.parametrize(
    "message", ["what now?", "What next?", "what does it mean?", "是什么意思？", "怎么解决？"]
)
def test_a_question_about_the_answer_is_answered_from_the_conversation_and_alone_names_nothing(
    seeds_kb, message
):
    """Alone they name nothing (no match, asked for the error line); after an answer they are
    about it: "what now?" matched a title ending in "What now?" and got that entry's commands."""
    assert seeds_kb.search(message).no_match
    history = [("user", "Init plugin so failed, ret = 1343225860"), ("assistant", "...")]
    answered = seeds_kb.search_in_context(message, history)
    assert "1343225860" in answered.hits[0].entry.title


def test_a_new_error_thanks_and_clear_in_a_conversation(seeds_kb):
    history = [("user", "Init plugin so failed, ret = 1343225860"), ("assistant", "(the earlier answer)")]
    earlier = seeds_kb.search(history[0][1]).hits[0].entry.title
    # A new error is searched on its own: it does not get the earlier answer again.
    for message in ("now it says Out of memory", "那 torchrun: not found 呢"):
        got = seeds_kb.search_in_context(message, history)
        alone = seeds_kb.search(message)
        assert [h.entry.id for h in got.hits] == [h.entry.id for h in alone.hits]
        assert earlier not in [h.entry.title for h in got.hits]
    # Thanks get a word back, not the first answer, and nothing is searched or queued.
    chinese = [("user", "昇腾多机训练 HCCL 超时怎么办"), ("assistant", "(the earlier answer)")]
    for message, lang, earlier_turns in (
        ("thank you, that fixed it", "en", history),
        ("好的谢谢", "zh", history),  # its own words decide
        ("ok", "zh", chinese),  # "ok" says nothing: the conversation's language
    ):
        answer = seeds_kb.ask(message, history=earlier_turns)
        assert answer.no_match and answer.vague and answer.reply and answer.lang == lang
        assert answer.text == LABELS[lang]["thanks"] and answer.suggestions == () and answer.commands == ()
    # "clear" forgets: the same follow-up that was read with the earlier question is read alone.
    cleared = [*history, ("user", "clear"), ("assistant", seeds_kb.ask("clear", history=history).text)]
    follow_up = "What if I run it inside Docker?"
    assert seeds_kb.search_in_context(follow_up, history).hits[0].entry.title == earlier
    alone = seeds_kb.search(follow_up)
    assert [h.entry.id for h in seeds_kb.search_in_context(follow_up, cleared).hits] == [
        h.entry.id for h in alone.hits
    ]


@pytest.mark.slow
def test_a_follow_up_to_an_issue_post_is_read_with_it_not_alone(bundled_kb):
    # Alone, "what if I run it inside Docker?" leans to an unrelated launcher entry; after an
    # issue-template post it is about that post's error, whatever its own words lean to.
    post = (
        "[Bug] Multi-node training hangs then crashes with NCCL error(2) on 2x8 A100\n"
        "\n"
        "### Describe the bug\n"
        "When I launch training on two nodes with torchrun, rank 8-15 crash after ~30s with the error below. Single node works fine.\n"
        "\n"
        "### Environment\n"
        "- OS: Ubuntu 20.04\n"
        "- Python: 3.10.12\n"
        "- PyTorch: 2.1.0+cu121\n"
        "- CUDA: 12.1, driver 535.104.05\n"
        "- NCCL: 2.18.1\n"
        "- GPUs: 8x A100-SXM4-80GB per node, InfiniBand HDR\n"
        "\n"
        "### pip list\n"
        "```\n"
        "Package            Version\n"
        "------------------ ----------\n"
        "accelerate         0.25.0\n"
        "deepspeed          0.12.6\n"
        "numpy              1.26.2\n"
        "torch              2.1.0+cu121\n"
        "transformers       4.36.2\n"
        "triton             2.1.0\n"
        "```\n"
        "\n"
        "### Traceback\n"
        "```\n"
        "Traceback (most recent call last):\n"
        '  File "/home/user/project/train.py", line 212, in <module>\n'
        "    main()\n"
        '  File "/home/user/project/train.py", line 88, in main\n'
        "    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])\n"
        '  File "/usr/local/lib/python3.10/dist-packages/torch/nn/parallel/distributed.py", line 795, in __init__\n'
        "    _verify_param_shape_across_processes(self.process_group, parameters)\n"
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/utils.py", line 265, in _verify_param_shape_across_processes\n'
        "    return dist._verify_params_across_processes(process_group, tensors, logger)\n"
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1331, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1\n"
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
        "Last error:\n"
        "socketStartConnect: Connect to 10.0.0.12<45123> failed : Software caused connection abort\n"
        "RuntimeError: NCCL error(2)\n"
        "```\n"
        "\n"
        "### Steps to reproduce\n"
        "torchrun --nnodes 2 --nproc_per_node 8 --rdzv_endpoint 10.0.0.11:29500 train.py\n"
    )
    follow_up = "what if I run it inside Docker?"
    alone = bundled_kb.search(follow_up)
    got = bundled_kb.search_in_context(follow_up, [("user", post), ("assistant", "(the earlier answer)")])
    assert not got.no_match
    assert got.hits[0].entry.id != (alone.hits or alone.suggestions)[0].entry.id
    assert "nccl" in (got.hits[0].entry.title + got.hits[0].entry.body).lower()
