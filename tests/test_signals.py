from ingest.collect import entries_from_text
from ingest.lang import guess_lang
from ingest.signals import code_blocks, commands, is_error_line, signatures


def test_error_lines_and_healthy_lines():
    assert is_error_line("OSError: (External) NCCL error(5), invalid usage.")
    assert is_error_line("include/socket.h:403 NCCL WARN Connect to XXX failed: Network is unreachable")
    assert is_error_line("Init plugin so failed, ret = 1343225860")
    assert not is_error_line("LAUNCH INFO 2022-07-20 09:38:33,358 log_level: ERROR")
    assert not is_error_line("[0] NCCL INFO NET/Socket : Using [0]eth0:10.10.10.1<0> [1]")
    assert not is_error_line("RX errors 0  dropped 0  overruns 0  frame 0")
    assert not is_error_line("Traceback (most recent call last):")


def test_signatures_skip_healthy_output_and_keep_title_inline_code():
    body = (
        "```text\n[INFO] DEVICE gpu_device_context.cc:90] Start initializing NCCL communicator for device 1\n```\n\n"
        "```shell\nExternalError: Nccl error(2), unhandled system error\n```\n"
    )
    sigs = signatures("## Q: Why `Init plugin so failed, ret = 1343225860`?", body)
    assert "ExternalError: Nccl error(2), unhandled system error" in sigs
    assert "Init plugin so failed, ret = 1343225860" in sigs
    assert not any("Start initializing" in s for s in sigs)


def test_commands_from_blocks_and_inline_code_verbatim():
    body = (
        "Run `export ASCEND_SLOG_PRINT_TO_STDOUT=1` first.\n\n"
        "```bash\n$ export NCCL_SOCKET_IFNAME=eth0\nuser@node1:~$ ipcrm -m 12345\n# a comment\n"
        "mpirun -n 8 \\\n  -x NCCL_DEBUG=INFO python train.py\n```\n\n"
        "```python\nimport paddle\npython -m paddle.distributed.launch --nnodes=2 train.py\n```\n\n"
        "```text\nLAUNCH INFO started\nLAUNCH INFO env ok\nenv {'A': 1}\nLAUNCH INFO done\n```\n"
    )
    cmds = commands(body)
    assert cmds == (
        "export NCCL_SOCKET_IFNAME=eth0",
        "ipcrm -m 12345",
        "mpirun -n 8 \\\n  -x NCCL_DEBUG=INFO python train.py",
        "python -m paddle.distributed.launch --nnodes=2 train.py",
        "export ASCEND_SLOG_PRINT_TO_STDOUT=1",
    )


def test_code_blocks_dedent_list_items_and_respect_closing_rule():
    md = "- item\n\n  ```shell\n  export A=1\n  ```\n\n```\n```shell is not a close\n```\n"
    blocks = code_blocks(md)
    assert blocks[0].lines == ("export A=1",)
    assert blocks[1].lines == ("```shell is not a close",)


def test_language_guess():
    assert guess_lang("## Q: 进行HCCL分布式训练出错：`Init plugin so failed`？") == "zh"
    assert guess_lang("NCCL_SOCKET_IFNAME 设置了还是报错怎么办") == "zh"
    assert guess_lang("The NCCL error shows when the network is down.\n```\n中文日志\n```") == "en"
    assert guess_lang("[NCCL 下载地址](https://developer.nvidia.com/nccl/nccl-legacy-downloads)") == "zh"
    assert guess_lang("```bash\nulimit -l unlimited\n```", default="zh") == "zh"  # only code says nothing


MIXED_FAQ = """# 分布式训练常见问题

## NCCL 报 Connection reset by peer 怎么办？

检查两台机器的网卡名是否一致，并把 `NCCL_SOCKET_IFNAME` 设置为两台机器之间能互通的那张网卡。

## What about InfiniBand?

Set `NCCL_IB_HCA` to the HCA that `ibstat` shows as Active.

## NCCL（NVIDIA Collective Communication Library）版本一致

[NCCL download](https://developer.nvidia.com/nccl/nccl-legacy-downloads)
"""


def test_each_entry_of_a_mixed_language_file_gets_its_own_language():
    # A team keeps both languages in one file; the path names neither.
    langs = {e.title: e.lang for e in entries_from_text("team/faq.md", MIXED_FAQ)}
    assert langs == {
        "NCCL 报 Connection reset by peer 怎么办？": "zh",
        "What about InfiniBand?": "en",
        "NCCL（NVIDIA Collective Communication Library）版本一致": "zh",  # English names, a Chinese answer
    }
    # A language the path names still wins for every entry.
    assert {e.lang for e in entries_from_text("team/en/faq.md", MIXED_FAQ)} == {"en"}


def test_extractive_answer_keeps_placeholders_and_drops_html():
    from ingest.entry import Entry
    from kb.entry_text import key_text

    body = (
        "A: Check the DNS entry first.<br/>\n\n```bash\nnslookup <hostname>\n"
        "docker run --shm-size 32G -it <image> /bin/bash\n```\n\n<font size=3>done</font>\n"
    )
    e = Entry(
        id="x",
        content_hash="h",
        doc="d.md",
        lang="en",
        title="t",
        heading_path=(),
        body=body,
        start_line=1,
        end_line=9,
    )
    text = key_text(e)
    assert "nslookup <hostname>" in text and "-it <image> /bin/bash" in text
    assert "<br/>" not in text and "<font" not in text and "done" in text
