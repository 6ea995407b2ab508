"""The post reader on posts shaped like real ones (written here): what is kept, what is dropped."""

import pytest

from index.post import MAX_LINE_CHARS, MAX_LINES, read_post

ISSUE_TEMPLATE_POST = """[Bug]: two-node training hangs at init_process_group

### System Info

- `transformers` version: 4.38.2
- Platform: Linux-5.15.0-91-generic-x86_64-with-glibc2.35
- Python version: 3.10.13
- PyTorch version (GPU?): 2.2.1+cu121 (True)
- Using distributed or parallel set-up in script?: yes

```
Package                  Version
------------------------ ----------
accelerate               0.27.2
deepspeed                0.13.4
torch                    2.2.1
```

+-----------------------------------------------------------------------------+
| NVIDIA-SMI 535.129.03   Driver Version: 535.129.03   CUDA Version: 12.2     |
|   0  NVIDIA A100-SXM4-80GB  On   | 00000000:07:00.0 Off |                    0 |
+-----------------------------------------------------------------------------+

### Reproduction

```yaml
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
num_machines: 2
```

I start both nodes with the same config, but node 2 never joins. What should I check?

```
Traceback (most recent call last):
  File "/opt/train.py", line 40, in <module>
    dist.init_process_group("nccl")
  File "/usr/lib/python3.10/site-packages/torch/distributed/c10d.py", line 91, in init
    raise RuntimeError(msg)
RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1691, unhandled system error, NCCL version 2.19.3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
```
"""


def test_title_question_and_error_are_kept_and_the_template_noise_dropped():
    post = read_post(ISSUE_TEMPLATE_POST)
    assert post.title == "two-node training hangs at init_process_group"  # the [Bug]: tag is not the title
    [said] = post.prose  # what the person typed, and nothing else
    assert said.startswith("I start both nodes with the same config") and said.endswith(
        "What should I check?"
    )
    assert post.errors[0].startswith("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp")
    assert post.exceptions[0].startswith("RuntimeError: NCCL error in")
    kept = " ".join([post.title, *post.prose, *post.errors, *post.exceptions]).lower()
    for noise in (
        "transformers",
        "glibc",
        "deepspeed",
        "nvidia-smi",
        "a100",
        "num_machines",
        "compute_environment",
    ):
        assert noise not in kept, noise
    # Launcher boilerplate is kept apart: every failed torchrun job prints it.
    assert any("ChildFailedError" in b for b in post.boilerplate)
    assert not any("ChildFailedError" in e for e in post.errors)


def test_chinese_words_around_an_english_error_decide_the_language():
    post = read_post("两台机器用 mpirun 跑 mindspore，报 Failed to receive UCX worker address")
    assert post.lang == "zh"
    assert post.errors and "UCX worker address" in post.errors[0]
    log = "训练卡住了，怎么办？\n" + "\n".join(["[rank3] NCCL WARN Connect failed: Connection refused"] * 64)
    post = read_post(log)
    assert post.lang == "zh" and post.errors.count("NCCL WARN Connect failed: Connection refused") == 1
    # A few Chinese words among the field's English terms are still the person's language; so is
    # a line typed above a log that reads as a label, and Chinese in a paste of nothing else.
    for typed in (
        "paddle 多机 Nccl error(2)",
        "用 accelerate launch 多机时 NCCL timeout",
        "多机训练报错 NCCL WARN NET/Socket : No usable listening interface found",
        "报错如下：\nTraceback (most recent call last):\nRuntimeError: NCCL error in: x.cpp:1, unhandled system error",
    ):
        assert read_post(typed).lang == "zh", typed
    # Chinese in a path is no Chinese sentence.
    log = (
        'Traceback (most recent call last):\n  File "/home/用户/train.py", line 3\nRuntimeError: NCCL timeout'
    )
    assert read_post(log).lang == "en"


def test_a_chinese_sentence_around_a_setting_is_the_persons_words():
    # `KEY=VALUE` starts it, so it looked like an environment line and the post had no prose.
    post = read_post(
        "ncclCommInitRank failed: unhandled system error\n\n设置NCCL_DEBUG=INFO之后重新运行，日志如下：\n"
        "```\nnode1:2231:2231 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>\n```"
    )
    assert any(p.startswith("设置NCCL_DEBUG=INFO之后") for p in post.prose) and post.lang == "zh"
    # A setting with a value is still a setting, not a sentence.
    post = read_post(
        "hang on init\n\n操作系统: Ubuntu 22.04\nNCCL_SOCKET_IFNAME=eth0\n两台机器都卡在初始化，怎么排查？"
    )
    assert post.prose == ("两台机器都卡在初始化，怎么排查？",)


def test_an_issue_forms_checklist_is_not_what_the_person_said():
    post = read_post(
        "昇腾上加载分词器超时\n\n### Reminder\n\n- [X] I have read the README and searched the existing "
        "issues.\n- [x] I have checked that this is not a duplicate of another report.\n\n### Reproduction\n\n"
        "```\nHCCL Timeout: wait for rank 3 exceeds 1800 s\n```"
    )
    assert post.prose == () and post.lang == "zh"


def test_an_english_post_with_a_chinese_file_name_stays_english():
    post = read_post("Training fails\n\nI get this error when I load 数据.json:\nValueError: bad json")
    assert post.lang == "en"


def test_a_sentence_is_an_error_only_when_it_carries_the_error():
    post = read_post(
        'Help with CUDA error: invalid device ordinal\n\nI keep getting "RuntimeError: CUDA error: invalid '
        'device ordinal" on the second GPU.\n\nI am still getting this error and I do not know what to do.'
    )
    assert "RuntimeError: CUDA error: invalid device ordinal" in post.errors
    assert not any("do not know what to do" in e for e in post.errors)
    assert any("do not know what to do" in p for p in post.prose)


def test_the_launchers_line_is_the_error_when_it_is_all_the_post_shows():
    # Beside a real error, the launcher's footer stays apart (the issue-template test); over a vague
    # title with nothing else, it is what went wrong, and Paddle's FAQ answers it.
    line = (
        "ABORT!!! Out of all 4 trainers, the trainer process with rank=[2] was aborted. Please check its log."
    )
    post = read_post(f"训练跑到一半就退出了\n\n{line}")
    assert post.title == "训练跑到一半就退出了" and len(post.errors) == 1
    assert post.errors[0].startswith("ABORT!!! Out of all 4 trainers")
    post = read_post(
        f"训练跑到一半就退出了\n\n{line}\nOSError: (External) NCCL error(2), unhandled system error"
    )
    assert post.errors[0].startswith("OSError") and not any("ABORT" in e for e in post.errors)


def test_the_key_line_is_found_when_buried_or_last():
    noise = [f"[2024-03-01 12:00:{i % 60:02d}] worker-{i % 8}: INFO step {i} loss=1.{i}" for i in range(300)]
    tb = ["Traceback (most recent call last):", '  File "/x/train.py", line 3, in <module>', "    main()"]
    last = "\n".join([*noise, *tb, "ExternalError: Nccl error(2), unhandled system error"])
    buried = "\n".join(
        [*noise[:150], *tb, "ExternalError: Nccl error(2), unhandled system error", *noise[150:]]
    )
    for log in (last, buried):
        post = read_post(log)
        assert post.errors[0] == "ExternalError: Nccl error(2), unhandled system error"
        assert "nccl_error_2" in post.codes


def test_coded_errors_rank_above_generic_failures():
    post = read_post(
        "Init hccl failed, please check the ERROR log above\n"
        "[ERROR] HCCL(1234) Init plugin so failed, ret = 1343225860\n"
        "training failed"
    )
    assert "1343225860" in post.errors[0]
    assert "ret_1343225860" in post.codes


def test_the_torchrun_summary_after_a_bare_exception_line_is_read():
    """`ChildFailedError:` has nothing after its colon: the summary under it was taken for the
    traceback's frames, and its one telling line with it."""
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/opt/venv/bin/torchrun", line 8, in <module>',
            "    sys.exit(main())",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
            "=" * 40,
            "pretrain.py FAILED",
            "-" * 40,
            "Failures:",
            "  <NO_OTHER_FAILURES>",
            "Root Cause (first observed failure):",
            "[0]:",
            "  rank      : 5 (local_rank: 5)",
            "  exitcode  : -9 (pid: 4411)",
            "  error_file: <N/A>",
            "  traceback : Signal 9 (SIGKILL) received by PID 4411",
        ]
    )
    post = read_post(log)
    assert post.errors[0].startswith("traceback : Signal 9 (SIGKILL) received")
    assert not any("error_file" in e or "NO_OTHER_FAILURES" in e for e in post.errors)
    # A traceback's own frames and source lines are still dropped.
    assert not any("sys.exit" in e or "File " in e for e in post.errors)


def test_a_line_that_only_a_code_marks_as_an_error_is_kept():
    """CANN's `EI0005: ... inconsistent between ranks` has no error word: it was dropped, code
    and all, when a traceback followed it."""
    line = "EI0005: [PID: 4321] 2024-05-01-10:00:00.000.000 The collective arguments differ between ranks"
    post = read_post(f"HCCL init fails on some ranks:\n\n{line}\nTraceback (most recent call last):\n"
                     '  File "t.py", line 1, in <module>\nRuntimeError: HCCL error')  # fmt: skip
    assert any(e.startswith("EI0005") for e in post.errors) and "ei0005" in post.codes


def test_a_huge_paste_is_read_within_its_bounds():
    line = "x" * 2_000_000
    post = read_post(line + "\nRuntimeError: NCCL error(5), invalid usage")
    assert all(len(e) <= MAX_LINE_CHARS for e in post.errors)
    many = (
        "\n".join(f"INFO step {i}" for i in range(200_000)) + "\nOSError: (External) NCCL error(2), unhandled"
    )
    post = read_post(many)
    assert post.lines_read <= MAX_LINES < post.lines_total and post.trimmed
    assert post.errors[0].startswith("OSError: (External) NCCL error(2)")  # the tail is always read


WATCHDOG = (
    "[E ProcessGroupNCCL.cpp:828] [Rank 3] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800520 milliseconds before timing out."
)


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (WATCHDOG, "Watchdog caught collective operation timeout"),
        ("[rank0] 训练失败：数据加载进程退出", "训练失败"),
    ],
)
def test_a_long_logs_error_in_its_middle_is_read_whatever_its_words(error, said):
    # Progress lines, then the error, then a thousand healthy teardown lines: the head and the tail
    # alone miss it. A line had to say "rror" to be kept from the middle of a long log.
    steps = [f"{{'loss': 1.{i % 1000:03d}, 'epoch': 0.{i}}}" for i in range(4000)]
    teardown = [f"node1:{1000 + i % 8}:{2000 + i} [{i % 8}] NCCL INFO comm 0x5581 rank {i % 8} - Abort COMPLETE"
                for i in range(1000)]  # fmt: skip
    post = read_post("\n".join([*steps, error, *teardown]))
    assert post.trimmed and said in " ".join((*post.errors[:1], *post.prose))  # read, as an error or as words
    # A paste over the query limit is cut to its head, its tail and its error regions the same way.
    from kb.query import excerpt

    part = excerpt("\n".join([*steps, error, *teardown]), 100_000)
    assert part.error_lines == 1 and error in part.text.split("\n")


def test_full_width_letters_and_digits_are_read_as_ascii():
    # As a Chinese input method types them; the punctuation stays Chinese.
    post = read_post("HCCL报错ＥＩ０００２，怎么办？")
    assert post.codes == {"ei0002"} and post.lang == "zh" and "EI0002，怎么办？" in post.question


def test_a_short_question_is_the_question():
    post = read_post("How do I set NCCL_SOCKET_IFNAME?")
    assert not post.is_log and post.prose == ("How do I set NCCL_SOCKET_IFNAME?",) and post.title == ""
    assert (
        read_post("本机如果不能免密登录，应该怎么处理？").question == "本机如果不能免密登录，应该怎么处理？"
    )


def test_empty_and_junk_posts_are_read_without_error():
    assert read_post("").errors == () and read_post("   \n\n").prose == ()
    assert read_post("\x00\x01\x02 🔥😭").lang == "en"


def test_a_cpp_exception_message_is_an_error_and_pytorchs_teardown_lines_are_boilerplate():
    """`what():` starts the message of the C++ exception that ended the process: the person did
    not ask "what"; the three lines ProcessGroupNCCL prints before taking the process down come
    with every NCCL failure, whatever it was."""
    log = "\n".join(
        [
            "[rank3]:[E1124 10:31:05.8 140299 ProcessGroupNCCL.cpp:630] [Rank 3] Some NCCL operations have failed "
            "or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
            "corrupted/incomplete data.",
            "[rank3]:[E1124 10:31:05.8 140299 ProcessGroupNCCL.cpp:636] [Rank 3] To avoid data inconsistency, we "
            "are taking the entire process down.",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            "  what():  [PG 0 (default_pg) Rank 3] Process group watchdog thread terminated with exception: "
            "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4521, OpType=ALLREDUCE) ran "
            "for 1800087 milliseconds before timing out.",
        ]
    )
    post = read_post(log)
    assert post.question == ""
    assert any("Watchdog caught collective operation timeout" in e for e in post.errors)
    assert not any("Some NCCL operations" in e or "entire process down" in e for e in post.errors)


def test_the_cause_nccl_prints_after_last_error_is_the_most_telling_line():
    """NCCL's result line (`unhandled system error`, `internal error`) is the same for many
    causes; the line after `Last error:` names the one that happened, even without an error word,
    and on the same line as well as on the next."""
    log = "\n".join(
        [
            "Training on one node with 4 GPUs stops at the first barrier",
            "",
            "[rank2]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
            "[rank2]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed "
            "or device error.",
            "[rank2]: Last error:",
            "[rank2]: Error while creating shared memory segment /dev/shm/nccl-Qx81Zt (size 9637888)",
        ]
    )
    post = read_post(log)
    assert post.errors[0] == "Error while creating shared memory segment /dev/shm/nccl-Qx81Zt (size 9637888)"
    assert "Last error:" not in post.errors
    same_line = read_post("ncclInternalError: Internal check failed.\nLast error: Duplicate GPU detected : rank 1 "
                          "and rank 0 both on CUDA device 41000")  # fmt: skip
    assert same_line.errors[0].startswith("Duplicate GPU detected")
    # Nothing but a traceback after it: no cause is read.
    bare = read_post(
        "ncclInternalError: Internal check failed.\nLast error:\nTraceback (most recent call last):"
    )
    assert bare.errors == ("ncclInternalError: Internal check failed.",)
    # Without `Last error:`, a plain line after NCCL's result line stays what it was.
    plain = read_post("ncclInternalError: Internal check failed.\nthe job was restarted twice")
    assert plain.errors == ("ncclInternalError: Internal check failed.",)
