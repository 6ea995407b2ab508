"""kb/present.py decides what an answer shows; the terminal, the chat and Slack only format it.
The drift this removed: suggestions in the reader's language only on the web, line anchors only
in Slack, the other-language version only in Slack, a command repeated under the LLM's answer
only outside the web."""

from __future__ import annotations

from dataclasses import replace

import pytest

from index.search import Hit
from ingest.code import segments
from ingest.entry import Entry
from kb.answer import LABELS, Answer, Citation
from kb.doors.cli import render_text
from kb.doors.slack.blocks import answer_messages
from kb.doors.web.render import render_answer
from kb.present import CAUTION, present

BASE = "https://docs.example.org/kb"


def entry(n: int, lang: str = "en", translation: str | None = None) -> Entry:
    return Entry(
        id=f"{lang}{n}", content_hash="h", doc=f"nccl/{lang}/faq.md", lang=lang, title=f"{lang} title {n}",
        heading_path=(), body="b", start_line=10 * n, end_line=10 * n + 5, translation=translation,
    )  # fmt: skip


def hit(e: Entry, translation: Entry | None) -> Hit:
    return Hit(e, 1.0, 1, 1, 0.9, None, translation)


def slack_text(answer: Answer, lookup=None) -> str:
    blocks = [b for m in answer_messages(answer, BASE, lookup) for b in m["blocks"]]
    return "\n".join(b["text"]["text"] if "text" in b else b["elements"][0]["text"] for b in blocks)


def test_suggestions_follow_the_readers_language_in_every_door():
    zh, en = entry(1, "zh", "en1"), entry(1, "en", "zh1")
    answer = Answer("q", "zh", LABELS["zh"]["no_match"], (), (), True, suggestions=(hit(en, zh),))
    p = present(answer, BASE)
    assert [r.entry.id for r in p.suggestions] == ["zh1"] and p.labels is LABELS["zh"]
    assert "zh title 1" in render_text(answer) and "en title 1" not in render_text(answer)
    assert "zh title 1" in render_answer(answer) and "en title 1" not in render_answer(answer)
    assert "zh title 1" in slack_text(answer) and "en title 1" not in slack_text(answer)


def test_links_carry_line_anchors_and_the_other_language_is_shown_everywhere():
    en, zh = entry(2, "en", "zh2"), entry(2, "zh", "en2")
    answer = Answer("q", "en", "en title 2\n\nfix [1]", ("rm -rf /tmp/x",), (Citation(1, en),), False)
    lookup = {"zh2": zh}.get
    p = present(answer, BASE, lookup)
    assert (
        p.sources[0].url == f"{BASE}/nccl/en/faq.md#L20-L25"
        and p.sources[0].location == "nccl/en/faq.md:20-25"
    )
    assert p.other_language is not None and p.other_language.entry is zh
    assert p.commands[0].caution == CAUTION["en"]
    shown = {
        "terminal": render_text(answer, BASE, lookup),
        "chat": render_answer(answer, BASE, lookup),
        "slack": slack_text(answer, lookup),
    }
    for door, text in shown.items():
        assert LABELS["en"]["other_lang"] in text and "zh title 2" in text, door
        assert CAUTION["en"] in text and "rm -rf /tmp/x" in text, door
    assert "#L20-L25" in shown["slack"]


def test_a_command_with_a_placeholder_says_what_to_fill_in_in_every_door_and_every_json():
    """`<image> /bin/bash` run as written reads the file `image` into /bin/bash: overwritten."""
    from kb.present import FILL_IN
    from kb.schema import ask_json, entry_json, hit_json

    e = replace(
        entry(4), commands=("docker run --shm-size 32G -it <image> /bin/bash", "ipcrm -m <shmid>", "ipcs -m")
    )
    answer = Answer("q", "en", "en title 4\n\nfix [1]", e.commands, (Citation(1, e),), False)
    p = present(answer, BASE)
    assert p.commands[0].caution == FILL_IN["en"].format(names="<image>")
    assert p.commands[1].caution == CAUTION["en"] + " " + FILL_IN["en"].format(names="<shmid>")
    assert p.commands[2].caution == ""
    for door, text in {
        "terminal": render_text(answer),
        "chat": render_answer(answer),
        "slack": slack_text(answer),
    }.items():
        assert "Replace <image> before running" in text.replace("&lt;", "<").replace("&gt;", ">"), door
    from kb.present import FILL_IN_WORDS, block_caution

    assert block_caution(["ulimit -u 最大进程数"], "zh") == FILL_IN_WORDS["zh"].format(names="最大进程数")
    # The commands an answer shows in its own code blocks are not listed again: the blocks carry
    # the label themselves (the bundled answer to NCCL error(2) showed `<image>` unlabelled).
    in_text = Answer(
        "q",
        "en",
        "fix:\n\n```bash\ndocker run -it <image> /bin/bash\n```\n\n[1]",
        e.commands[:1],
        (Citation(1, e),),
        False,
    )
    for door, text in {
        "terminal": render_text(in_text),
        "chat": render_answer(in_text),
        "slack": slack_text(in_text),
    }.items():
        label = "Replace <image> before running"
        assert label in text.replace("&lt;", "<").replace("&gt;", ">"), door
        assert "Replace <image>" not in text or door == "terminal", door  # no raw tag for a browser or Slack
    for shown in (ask_json(answer), hit_json(hit(e, None), answers=True), entry_json(e)):
        assert shown["destructive_commands"] == ["ipcrm -m <shmid>"]
        assert shown["placeholder_commands"] == list(e.commands[:2])


def test_a_fill_in_note_is_said_once_for_commands_in_a_row_and_a_caution_every_time():
    """Two `docker run ... <image>` in a row showed the same note twice in every door."""
    from index.search import SearchResult
    from kb.doors.terminal import search_text
    from kb.present import FILL_IN

    runs = ("docker run --shm-size 32G <image> sh", "docker run --ipc=host <image> sh", "docker run <other>")
    e = replace(entry(4), commands=(*runs, "rm -rf /tmp/x", "rm -rf /tmp/y"))
    answer = Answer("q", "en", "en title 4\n\nfix [1]", e.commands, (Citation(1, e),), False)
    image, other = (FILL_IN["en"].format(names=n) for n in ("<image>", "<other>"))
    expected = [image, "", other, CAUTION["en"], CAUTION["en"]]
    assert [c.caution for c in present(answer, BASE).commands] == expected
    for text in (render_text(answer), search_text(SearchResult("q", "en", [hit(e, None)], confidence=0.9))):
        assert text.count(image) == 1 and text.count(other) == 1 and text.count(CAUTION["en"]) == 2


def test_kb_search_shows_commands_of_the_match_only():
    from index.search import SearchResult
    from kb.doors.terminal import search_text

    first, second = (replace(entry(n), commands=(f"export HCCL_BUFFSIZE={n}00",)) for n in (5, 6))
    hits = [hit(first, None), hit(second, None)]
    weak = search_text(SearchResult("slow on 8 cards", "en", hits, confidence=0.5, weak=True))
    assert "HCCL_BUFFSIZE" not in weak and "en title 6" in weak
    matched = search_text(SearchResult("q", "en", hits, confidence=0.9))
    assert (
        "export HCCL_BUFFSIZE=500" in matched and "HCCL_BUFFSIZE=600" not in matched
    )  # hit 2 may be another problem


def test_a_command_the_model_already_shows_is_not_listed_again():
    e = entry(3)
    text = "Source [1] applies [1].\n\n```bash\nnpu-smi info\n```"
    answer = Answer("q", "en", text, ("npu-smi info", "ls /dev"), (Citation(1, e),), False, mode="llm")
    assert [c.text for c in present(answer).commands] == ["ls /dev"]
    assert render_text(answer).count("npu-smi info") == 1
    assert render_answer(answer).count("npu-smi info") == 1


def test_a_closest_entry_marks_where_its_commands_were_left_out():
    from dataclasses import replace

    from index.search import SearchResult
    from kb.answer import extractive

    body = (
        "A: Raise the window on every node before launch:\n\n"
        "```bash\nexport MS_NODE_TIMEOUT=900\n```\n\n"
        "Above 128 cards, 900 to 1800 seconds.\n\n"
        "Why: the exchange runs on the host."
    )
    e = replace(entry(1), body=body, commands=("export MS_NODE_TIMEOUT=900",))
    answer = extractive(SearchResult("cluster hangs at start", "en", [hit(e, None)], weak=True))
    paragraphs = answer.text.split("\n\n")
    assert paragraphs[:4] == [
        "Raise the window on every node before launch:",
        LABELS["en"]["commands_here"],  # the sentence's colon leads somewhere
        "Above 128 cards, 900 to 1800 seconds.",
        "Why: the exchange runs on the host.",
    ]
    assert "\n\n\n" not in answer.text and "export" not in answer.text and answer.commands == ()
    assert paragraphs[4] == LABELS["en"]["code_in_source"]  # it cites [1]: no second [1] after it


def test_a_closest_entry_withholds_commands_written_in_its_sentences():
    from dataclasses import replace

    from index.search import SearchResult
    from kb.answer import extractive

    body = (
        "A: The interpreter is linked to Python 2.\n\n"
        "- Type `python` and read the version it prints.\n"
        "- Execute the `sudo ln -sf /usr/bin/python3.9 /usr/bin/python` command, then run the job again.\n\n"
        "Or install the package:\n\n    apt install libidn11\n"
    )
    e = replace(entry(1), body=body)
    closest = extractive(SearchResult("python: not found", "en", [hit(e, None)], weak=True)).text
    assert "ln -sf" not in closest and "apt install" not in closest
    assert "Type `python` and read" in closest  # a word in code is no command
    assert f"Or install the package:\n\n{LABELS['en']['commands_here']}\n\n" in closest
    assert (
        f"Execute the {LABELS['en']['command']} command" in closest
        and LABELS["en"]["code_in_source"] in closest
    )
    matched = extractive(SearchResult("python: not found", "en", [hit(e, None)])).text
    assert "sudo ln -sf /usr/bin/python3.9 /usr/bin/python" in matched and "apt install libidn11" in matched


def test_a_closest_entry_keeps_prose_and_tables_that_begin_with_a_command_word():
    from dataclasses import replace

    from index.search import SearchResult
    from kb.answer import extractive

    body = (
        "A: Check every node.\n\n- ssh into each node and check the driver\n"
        "- docker containers need a bigger /dev/shm\n\n| python | torch |\n|---|---|\n| 3.10 | 2.1 |\n"
    )
    closest = extractive(SearchResult("q", "en", [hit(replace(entry(1), body=body), None)], weak=True)).text
    for kept in (
        "ssh into each node and check the driver",
        "docker containers need",
        "| python | torch |",
        "| 3.10 | 2.1 |",
    ):
        assert kept in closest, kept


def test_the_source_mark_never_breaks_a_code_block_and_a_title_alone_says_so():
    from dataclasses import replace

    from index.search import SearchResult
    from kb.answer import extractive

    ends_in_code = replace(
        entry(1), body="A: Add the tensors on the device:\n\n```python\nx = torch.add(a, b)\n```"
    )
    text = extractive(SearchResult("add fails", "en", [hit(ends_in_code, None)])).text
    assert text.endswith("x = torch.add(a, b)\n```\n\n[1]")
    assert [seg.code for seg in segments(text)] == [False, True, False]
    for body in (
        "A: List the cards:\n\n    nvidia-smi -L",
        "A: Versions:\n\n| python | torch |\n|---|---|\n| 3.10 | 2.1 |",
    ):
        shown = extractive(SearchResult("q", "en", [hit(replace(entry(1), body=body), None)])).text
        assert shown.endswith("\n\n[1]"), shown  # not copied with the command, not a table cell
    title_only = replace(entry(1), body="")
    assert extractive(SearchResult("q", "en", [hit(title_only, None)])).text == LABELS["en"]["title_only"]


def test_an_entry_that_is_only_code_shows_its_code():
    """A snippet, a loop or a hostfile with no sentence around it is the whole answer: it was left
    out as illustration and the answer said the entry had no more than its title."""
    from dataclasses import replace

    from index.search import SearchResult
    from kb.answer import extractive
    from kb.entry_text import ANSWER_CHARS

    for block in (
        "```python\nimport datetime\ndist.init_process_group('nccl', timeout=datetime.timedelta(hours=1))\n```",
        "```text\nnode1 slots=8\nnode2 slots=8\n```",
        "```bash\nfor i in $(seq 0 7); do hccn_tool -i $i -link -g; done\n```",
    ):
        shown = extractive(SearchResult("q", "en", [hit(replace(entry(1), body=block), None)])).text
        assert shown == f"{block}\n\n[1]"
    # Too long to show whole: never half a block, only where the rest is.
    long_block = "```text\n" + "node slots=8\n" * (ANSWER_CHARS // 10) + "```"
    shown = extractive(SearchResult("q", "en", [hit(replace(entry(1), body=long_block), None)])).text
    assert "```" not in shown and LABELS["en"]["more"] in shown


def test_a_fix_in_code_is_shown_and_a_block_left_out_says_where_it_is():
    """'In your script:' and the lines of the fix: the answer, not an illustration. A shell block
    runs a site's own tool (shown); one that shows its output, left out, says so; a healthy log
    nobody introduced goes silently."""
    from dataclasses import replace

    from index.search import SearchResult
    from kb.answer import extractive

    fix = (
        "```python\nlocal_rank = int(os.environ['LOCAL_RANK'])\ntorch.cuda.set_device(local_rank)\n"
        "dist.init_process_group('nccl')\nmodel = model.cuda(local_rank)\n```"
    )
    tool = "```bash\nmy_cluster_tool --drain node7\n```"
    log = "```text\nepoch 1 loss 0.9\nepoch 2 loss 0.8\nepoch 3 loss 0.7\nepoch 4 loss 0.6\n```"
    state = "```bash\nNODELIST   STATE     REASON\nnode7      drained   gpu xid 79\n```"
    body = (
        f"Each process must pick its own GPU. In your script:\n\n{fix}\n\nThen drain it\n\n{tool}\n\n"
        f"It then shows\n\n{state}\n\nA healthy run\n\n{log}"
    )
    shown = extractive(SearchResult("q", "en", [hit(replace(entry(1), body=body), None)])).text
    assert fix in shown and tool in shown and "NODELIST" not in shown and "epoch" not in shown
    assert shown.count(LABELS["en"]["in_source"]) == 1  # after "It then shows", not after the log


@pytest.mark.parametrize("label", ["A:", "**A:**", "**A：**", "__A:__", "答：", "**答：**"])
def test_the_answer_starts_after_its_label(label):
    from dataclasses import replace

    from index.search import SearchResult
    from kb.answer import extractive

    body = f"**Q:** Why does NCCL fail in Docker?\n\n{label} Start the container with a larger `/dev/shm`."
    shown = extractive(SearchResult("q", "en", [hit(replace(entry(1), body=body), None)])).text
    assert shown.startswith("Start the container with a larger"), shown


def test_the_matched_line_is_quoted_as_it_was_pasted():
    from index.search import SearchResult
    from kb.answer import matched_line

    pasted = "[E ProcessGroupNCCL.cpp:828] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)"
    noise = [f"step {i} loss 0.{i}" for i in range(5000)]  # a long log: the error near its end
    hint = "grep 'Watchdog caught' train.log  # where I looked"
    query = "\n".join([hint, *noise, f"\x1b[31m{pasted}\x1b[0m", "train.py FAILED"])
    signature = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=ALLREDUCE)"
    e = hit(entry(1), None)
    found = Hit(e.entry, 1.0, 1, 1, 0.9, signature)
    normalised = ("[E ProcessGroupNCCL.cpp] [Rank] Watchdog caught collective operation timeout",)
    result = SearchResult(query, "en", [found], signature_lines=normalised)
    assert matched_line(result) == pasted  # the rank's number kept, the terminal's colours not
    # A paste where no line carries the signature's words quotes nothing: the entry's own line is
    # no line of the paste (it was shown as one, with the entry's timestamp and process id).
    elsewhere = SearchResult("the job hangs", "en", [found], signature_lines=())
    assert matched_line(elsewhere) == ""
    # Another run of the same error: its timestamp, process id and rank are not what matched.
    run = "[ERROR] 2024-10-11-09:41:12 (PID:19372, Device:3, RankID:3) ERR01100 OPS call acl api failed"
    theirs = Hit(
        e.entry,
        1.0,
        1,
        1,
        0.9,
        "[ERROR] 2025-02-16-12:18:25 (PID:775, Device:0, RankID:0) ERR01100 OPS call acl api failed",
    )
    again = SearchResult(f"DDP on 8 cards fails:\n[rank3]: {run}", "en", [theirs], signature_lines=(run,))
    assert matched_line(again) == f"[rank3]: {run}"


def test_a_short_output_a_sentence_introduces_stays_code_and_listings_do_not():
    from dataclasses import replace

    from index.search import SearchResult
    from kb.answer import extractive

    listing = "\n".join(f"GPU {i}: NVIDIA A100 (UUID: GPU-{i:04d})" for i in range(8))
    body = (
        "A: The ranks stop at NCCL's start, whose last log line is:\n\n"
        "```text\nStart initializing NCCL communicator for device 1\n```\n\n"
        "A healthy node lists every card:\n\n"
        f"```text\n{listing}\n```\n\n"
        "Cap the memory the framework takes:\n\n"
        '```python\nms.runtime.set_memory(max_size="26GB")\n```'
    )
    e = replace(entry(1), body=body)
    shown = extractive(SearchResult("ranks hang", "en", [hit(e, None)])).text
    assert "Start initializing NCCL communicator" in shown  # what "is:" introduces
    assert "GPU 7: NVIDIA" not in shown  # an eight-line listing stays in the source, and says so
    assert "A healthy node lists every card:\n\n" + LABELS["en"]["in_source"] in shown
    assert 'set_memory(max_size="26GB")' in shown
    closest = extractive(SearchResult("ranks hang", "en", [hit(e, None)], weak=True)).text
    assert "Start initializing NCCL communicator" in closest  # a log line is no command
    assert "set_memory" not in closest and LABELS["en"]["code_in_source"] in closest
    cleanup = replace(e, body="A: Its log ends with:\n\n```text\nKilled\nrm -rf /data/ckpt\nDone\n```")
    weak = extractive(SearchResult("ranks hang", "en", [hit(cleanup, None)], weak=True)).text
    assert "rm -rf" not in weak  # a command inside a block of output is still a command


def test_a_shortened_answer_cites_its_source_once_at_the_end():
    from dataclasses import replace

    from index.search import SearchResult
    from kb.answer import extractive

    long_body = "A: " + "\n\n".join(f"Step {i}: check the link of node {i} twice. " * 8 for i in range(12))
    e = replace(entry(1), body=long_body)
    text = extractive(SearchResult("links fail", "en", [hit(e, None)])).text
    assert text.endswith(LABELS["en"]["more"]) and text.count("[1]") == 1


def test_no_door_shows_a_direction_override_or_a_zero_width_character():
    """A document can hide them in a command: shown reversed, or copied with a character nobody
    sees. What every door shows is what is copied."""
    tricky = "rm -rf ~/\u202ehcac/\u202c && export TOKEN=abc\u200bdef"
    body = f"A: Clean the cache\u2066 first:\n\n```bash\n{tricky}\n```\n"
    e = Entry(
        id="x1", content_hash="h", doc="a.md", lang="en", title="Cache", heading_path=(), body=body,
        start_line=1, end_line=6, commands=(tricky,),
    )  # fmt: skip
    answer = Answer("q", "en", body, (tricky,), (Citation(1, e),), False)
    shown = [
        render_text(answer),
        render_answer(answer),
        slack_text(answer),
        *(m["text"] for m in answer_messages(answer, BASE)),
    ]
    for out in shown:
        assert not any(ch in out for ch in "\u202e\u202c\u2066\u200b"), out
        assert "rm -rf ~/hcac/" in out and "export TOKEN=abcdef" in out
