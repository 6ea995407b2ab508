from index.text import clean_line, looks_like_log, read_query, tokenize


def test_identifiers_kept_whole_and_split():
    toks = tokenize("export NCCL_SOCKET_IFNAME=eth0; ncclSystemError ret = 1343225860 libgpu_collective.so")
    for t in (
        "nccl_socket_ifname",
        "nccl",
        "socket",
        "ifname",
        "ncclsystemerror",
        "system",
        "error",
        "1343225860",
        "libgpu_collective.so",
        "libgpu",
        "collective",
    ):
        assert t in toks, t


def test_chinese_is_segmented():
    toks = tokenize("共享内存不足导致训练失败")
    assert "共享内存" in toks and "训练" in toks and "失败" in toks


def test_clean_line_removes_run_noise_but_keeps_the_error():
    line = (
        "2024-03-01 12:00:01,123 node-17:2345:2400 [3] include/socket.h:403 NCCL WARN Connect to "
        "10.1.2.3<45678> failed: Network is unreachable (pid=4242) 0x7f3a2b4c5d6e"
    )
    out = clean_line(line)
    assert "NCCL WARN Connect to" in out and "Network is unreachable" in out
    for noise in ("2024-03-01", "10.1.2.3", "4242", "0x7f3a"):
        assert noise not in out
    assert clean_line("rank 7 device_id=3 failed") == "rank device_id failed"


def test_log_signature_found_even_when_buried_and_last():
    noise = [f"[2024-03-01 12:00:{i % 60:02d}] worker-{i % 8}: INFO step {i} loss=1.{i}" for i in range(300)]
    log = "\n".join(
        noise
        + [
            "Traceback (most recent call last):",
            '  File "/x/train.py", line 3, in <module>',
            "ExternalError: Nccl error(2), unhandled system error",
        ]
    )
    q = read_query(log)
    assert q.is_log
    assert q.signature_lines[0] == "ExternalError: Nccl error(2), unhandled system error"


def test_repeated_lines_collapse_and_question_language_wins():
    log = "训练卡住了，怎么办？\n" + "\n".join(["[rank3] NCCL WARN Connect failed: Connection refused"] * 64)
    q = read_query(log)
    assert q.raw_lang == "zh"
    assert q.cleaned.count("Connection refused") == 1


def test_short_question_is_not_a_log():
    assert not looks_like_log("How do I set NCCL_SOCKET_IFNAME?")
    assert looks_like_log("a\nb\nc")
