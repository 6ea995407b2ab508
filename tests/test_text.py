from fakes import entry

from index.text import clean_line, spelled_out, tokenize
from index.views import lexical_tokens


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


def test_bm25_terms_carry_english_stems_beside_the_words():
    toks = tokenize("the job hangs while connecting; NCCL_SOCKET_IFNAME and E39999 failed", stem=True)
    words = {"hangs", "hang", "connecting", "connect", "failed", "fail"}
    assert words | {"nccl_socket_ifname", "e39999"} <= set(toks)
    assert tokenize("hanging connection failures", stem=True) == [
        "hanging", "hang", "connection", "connect", "failures", "failur",
    ]  # fmt: skip
    assert tokenize("hanging connection failures") == ["hanging", "connection", "failures"]


def test_a_post_meets_an_english_entry_by_stem_and_a_chinese_one_as_written():
    post = set(tokenize("pip installing hangs", stem=True))
    english = entry("en/faq.md", 1, 2, title="The install is hanging", lang="en")
    assert post & set(lexical_tokens(english)) == {"instal", "hang"}
    # A Chinese entry's English words are log lines and names: only the words as written match.
    chinese = entry("zh/faq.md", 1, 2, title="pip install 卡住", lang="zh")
    assert post & set(lexical_tokens(chinese)) == {"pip"}


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


def test_clean_line_keeps_system_paths_whole_and_user_paths_as_their_file_name():
    """`/dev/shm` is the resource that ran out and `/etc/hosts` the file that maps host names;
    `/home/me/envs/...` only says where one person put things."""
    out = clean_line("Error while creating shared memory segment /dev/shm/nccl-Qx81Zt (size 9637888)")
    assert "/dev/shm/nccl-Qx81Zt" in out
    assert clean_line("cannot open /etc/hosts") == "cannot open /etc/hosts"
    assert (
        clean_line("File /home/me/envs/py310/lib/site-packages/torch/run.py failed") == "File run.py failed"
    )


def test_shorthand_is_spelled_out_beside_itself():
    assert spelled_out("训练报 OOM 怎么办") == "训练报 OOM (out of memory) 怎么办"
    assert spelled_out("zero3 oom again") == "zero3 oom (out of memory) again"
    assert spelled_out("Out of Memory (`OOM`) again") == "Out of Memory (`OOM`) again"  # said already
    assert spelled_out("a segfault in nccl") == "a segfault (Segmentation fault) in nccl"
    assert spelled_out("zoom in, room, boom") == "zoom in, room, boom"
    # Beside Chinese characters (which Python counts as word characters) and inflected.
    assert spelled_out("微调OOM了") == "微调OOM (out of memory)了"
    assert spelled_out("it OOMs, then OOMed") == "it OOMs (out of memory), then OOMed (out of memory)"
    assert spelled_out("segfaulted at init") == "segfaulted (Segmentation fault) at init"
    assert spelled_out("又爆显存了") == "又爆显存 (显存不足, out of memory)了"
    # 显存炸了's words are said already; 显存不足 gets the log's.
    assert spelled_out("显存不足，显存炸了") == "显存不足 (out of memory)，显存炸了"
    assert spelled_out("shm残留") == "shm (shared memory, 共享内存)残留"
    # A path or an option names the thing exactly; it is left alone.
    assert spelled_out("/dev/shm full, docker --shm-size 8g") == "/dev/shm full, docker --shm-size 8g"
    assert spelled_out("EADDRINUSE on 29500") == "EADDRINUSE (Address already in use) on 29500"
    assert spelled_out("conn refused") == "conn refused (Connection refused)"
    assert spelled_out("perm denied") == "perm denied (Permission denied, PermissionError)"
    assert spelled_out("xsegfault, zoomed, OOMx") == "xsegfault, zoomed, OOMx"
    assert spelled_out("loss变nan了, wrong nic, nanny") == "loss变NaN了, wrong NIC, nanny"
    assert spelled_out("微调时显存不足") == "微调时显存不足 (out of memory)"
    assert spelled_out("显存不够, CUDA out of memory") == "显存不够, CUDA out of memory"  # said already
    assert spelled_out("进程被杀了") == "进程被杀了 (杀掉, Killed, SIGKILL)"
    assert spelled_out("worker 被kill掉") == "worker 被kill掉 (杀掉, Killed, SIGKILL)"
    assert spelled_out("进程被杀掉了") == "进程被杀掉了"  # said already
    assert spelled_out("文件被杀毒软件删了") == "文件被杀毒软件删了"  # an antivirus, not a kill
