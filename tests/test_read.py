import os

import pytest

from ingest.collect import collect
from ingest.read import UnreadableFile, decode, find_files


def test_decodes_utf8_bom_and_gbk():
    assert decode("\ufeff# 标题\n".encode()) == "# 标题\n"
    assert decode("## Q: 共享内存不足怎么办？\n".encode("gbk")) == "## Q: 共享内存不足怎么办？\n"
    assert decode(b"a\r\nb\rc") == "a\nb\nc"


def test_binary_is_refused_with_reason():
    with pytest.raises(UnreadableFile, match="binary"):
        decode(b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR")


def test_bad_files_are_reported_and_the_rest_ingests(tmp_path):
    (tmp_path / "good.md").write_text("# Doc\n\n## Q: Why?\n\nA: Because.\n", "utf-8")
    (tmp_path / "gbk.md").write_bytes("## Q: 为什么训练卡住？\n\nA: 检查网卡。\n".encode("gbk"))
    (tmp_path / "empty.md").write_text("", "utf-8")
    (tmp_path / "image.md").write_bytes(b"\x00\x01\x02binary\x00")
    (tmp_path / "notes.rst").write_text("ignored", "utf-8")
    sub = tmp_path / "sub"
    sub.mkdir()
    os.symlink(tmp_path, sub / "loop")  # a folder link back to the root
    (sub / "deep.markdown").write_text("## Q: Deep?\n\nA: Yes.\n", "utf-8")

    report = collect([tmp_path])
    docs = {e.doc for e in report.entries}
    assert docs == {"good.md", "gbk.md", "sub/deep.markdown"}
    reasons = {p.doc: p.reason for p in report.problems}
    assert "binary" in reasons["image.md"]
    assert any("loop" in d for d in reasons), reasons
    gbk = next(e for e in report.entries if e.doc == "gbk.md")
    assert gbk.lang == "zh" and "卡住" in gbk.title


def test_missing_path_and_file_deleted_between_listing_and_reading(tmp_path, monkeypatch):
    (tmp_path / "a.md").write_text("## Q: A?\n\nA: a.\n", "utf-8")
    (tmp_path / "b.md").write_text("## Q: B?\n\nA: b.\n", "utf-8")
    files, problems = find_files([tmp_path, tmp_path / "nope"])
    assert [p.reason for p in problems] == ["no such file or folder"]

    import ingest.collect as collect_mod

    real_find = collect_mod.find_files

    def find_then_delete(paths, **kw):
        found, probs = real_find(paths, **kw)
        (tmp_path / "b.md").unlink()
        return found, probs

    monkeypatch.setattr(collect_mod, "find_files", find_then_delete)
    report = collect([tmp_path])
    assert [e.doc for e in report.entries] == ["a.md"]
    assert [(p.doc, p.reason) for p in report.problems] == [("b.md", "disappeared before it could be read")]


def test_single_file_doc_is_its_name_and_several_roots_are_prefixed(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    (tmp_path / "x" / "faq.md").write_text("## Q: X?\n\nA: x.\n", "utf-8")
    (tmp_path / "y" / "faq.md").write_text("## Q: Y?\n\nA: y.\n", "utf-8")
    assert [f.doc for f in find_files([tmp_path / "x" / "faq.md"])[0]] == ["faq.md"]
    assert [f.doc for f in find_files([tmp_path / "x", tmp_path / "y"])[0]] == ["x/faq.md", "y/faq.md"]


def test_metadata_without_questions_is_no_entries(tmp_path):
    """A corpus manifest quoting `git hash-object` and an error string answers nothing; a
    metadata-named page that asks questions is read as it is."""
    (tmp_path / "MANIFEST.md").write_text(
        "# Corpus\n\nEach file was checked with `git hash-object -w`.\n\n## nccl\n\n"
        "Pages about `NCCL error(2), unhandled system error`.\n",
        "utf-8",
    )
    (tmp_path / "CHANGELOG.md").write_text("## Why does 2.1 fail with EI0006?\n\nA: Upgrade CANN.\n", "utf-8")
    report = collect([tmp_path])
    assert [(e.doc, e.title) for e in report.entries] == [("CHANGELOG.md", "Why does 2.1 fail with EI0006?")]
    assert {p.doc: p.reason for p in report.problems} == {
        "MANIFEST.md": "project metadata, not a FAQ page (no question in its headings)"
    }


def test_a_piped_paste_is_read_in_the_encodings_documents_are():
    from kb.query import decode_paste

    log = "训练报错 ExternalError: Nccl error(2), unhandled system error"
    for data in (
        log.encode("utf-16"),
        log.encode("utf-16-le"),
        log.encode("gbk"),
        b"\xef\xbb\xbf" + log.encode(),
    ):
        assert decode_paste(data) == log
    # A UTF-8 log with one bad byte stays UTF-8 (GB18030 would read it, all of it garbled).
    assert decode_paste(b"Nccl error(2) \xff at step 7") == "Nccl error(2) \ufffd at step 7"
    assert decode_paste("训练卡住了".encode() + b"\xa0") == "训练卡住了\ufffd"  # GB18030: 璁粌鍗′綇浜啝
    mostly_ascii = "\n".join(f"I1124 step {i} loss 0.{i}" for i in range(500)) + "\n训练卡住了 NCCL timeout"
    assert decode_paste(mostly_ascii.encode("gbk")) == mostly_ascii


def test_files_saved_with_a_byte_order_mark_are_read(tmp_path):
    """Windows editors and Excel start a UTF-8 file with a mark: `kb search --batch` and `kb eval`
    read its first line (both said "not JSON (Unexpected UTF-8 BOM)")."""
    from evaluation.gold import load_gold
    from kb.doors.batch import parse_line, read_lines

    queries = tmp_path / "queries.jsonl"
    queries.write_bytes(b'\xef\xbb\xbf{"id": 1, "text": "NCCL error(2)"}\r\n"EI0006"\r\n')
    assert [parse_line(line) for _, line in read_lines(str(queries))] == [
        (1, "NCCL error(2)", None),
        (None, "EI0006", None),
    ]
    gold = tmp_path / "gold.jsonl"
    row = '{"id": "q1", "query": "NCCL error(2)", "expected": [{"doc": "faq.md", "line": 3}]}'
    gold.write_bytes(b"\xef\xbb\xbf" + row.encode() + b"\r\n")
    assert [r.id for r in load_gold(gold).rows] == ["q1"]


def test_a_piped_binary_file_is_refused_and_a_log_with_nuls_or_colours_is_not():
    import random

    from kb.errors import QueryError
    from kb.query import decode_paste

    log = "\x1b[31mERROR\x1b[0m rank 3: Nccl error(2), unhandled system error\n" * 20
    # A log padded with NULs when its writer crashed, and one a progress bar redrew with \r.
    assert decode_paste(log.encode() + bytes(4096)).startswith(log)
    bar = "\r 10%|#    | 10/100" * 100 + "\nRuntimeError: CUDA out of memory\n"
    assert decode_paste(bar.encode()) == bar
    rnd = random.Random(3)
    for data in (bytes(rnd.randrange(256) for _ in range(8192)), b"PK\x03\x04" + bytes(range(256)) * 8):
        with pytest.raises(QueryError, match="looks like binary data .* `strings FILE`"):
            decode_paste(data)
