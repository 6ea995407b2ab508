import json

import numpy as np
import pytest
from conftest import CORPUS, needs_shared

from ingest.entry import Entry
from ingest.link import link_translations

S000, S001 = "000_41158c45c4594662.txt", "001_6befd99b7fbb14ab.txt"


def _e(doc, lang, title, sigs=()):
    return Entry(
        id=f"{doc}:{title}",
        content_hash="h",
        doc=doc,
        lang=lang,
        title=title,
        heading_path=(),
        body="",
        start_line=1,
        end_line=1,
        signatures=tuple(sigs),
    )


def test_path_pairs_align_in_order_and_content_pairs_need_mutual_best():
    entries = [
        _e("zh/a.md", "zh", "一"),
        _e("zh/a.md", "zh", "二"),
        _e("en/a.md", "en", "one"),
        _e("en/a.md", "en", "two"),
        _e("notes.md", "zh", "共享内存不足", ["Nccl error(2), unhandled system error"]),
        _e("other.md", "en", "Shared memory too small", ["Nccl error(2), unhandled system error"]),
        _e("misc.md", "en", "Unrelated"),
    ]

    def sim(a, b):  # a stand-in similarity: 0.9 for the intended pair, 0.1 otherwise
        m = np.full((len(a), len(b)), 0.1)
        for i, x in enumerate(a):
            for j, y in enumerate(b):
                if x == "共享内存不足" and y == "Shared memory too small":
                    m[i, j] = 0.9
        return m

    linked = {e.id: e.translation for e in link_translations(entries, similarity=sim)}
    assert linked["zh/a.md:一"] == "en/a.md:one" and linked["en/a.md:two"] == "zh/a.md:二"
    assert linked["notes.md:共享内存不足"] == "other.md:Shared memory too small"
    assert linked["misc.md:Unrelated"] is None


@needs_shared
@pytest.mark.slow
def test_seed_000_and_001_questions_are_linked(seeds_kb):
    by_id = {e.id: e for e in seeds_kb.index.entries}
    pairs = {
        (e.start_line, by_id[e.translation].start_line)
        for e in seeds_kb.index.entries
        if e.doc == S000 and e.translation
    }
    # 000's questions at lines 5, 27, 48, 62 are 001's at 5, 11, 32, 46; 000:11 has no English twin.
    assert pairs == {(5, 5), (27, 11), (48, 32), (62, 46)}
    for e in seeds_kb.index.entries:
        if e.translation:
            assert by_id[e.translation].translation == e.id and by_id[e.translation].lang != e.lang


@needs_shared
@pytest.mark.slow
def test_corpus_ingests_without_error_and_declared_pairs_link(tmp_path):
    from kb.indexing import ingest
    from kb.service import KnowledgeBase

    outcome = ingest([str(CORPUS)], tmp_path / "idx")
    assert outcome.problems == ["MANIFEST.md: project metadata, not a FAQ page (no question in its headings)"]
    kb = KnowledgeBase.open(index=str(tmp_path / "idx"))
    listed = {
        row.split("\t")[0] for row in (CORPUS / "files.tsv").read_text().splitlines()[1:] if row.strip()
    }
    assert len(listed) == 138
    assert listed == {e.doc for e in kb.index.entries}  # every FAQ file gave entries, the manifest none
    by_id = {e.id: e for e in kb.index.entries}
    pairs = [line.split("\t") for line in (CORPUS / "pairs.tsv").read_text().splitlines() if line.strip()]
    for zh_doc, en_doc in pairs:
        zh = [e for e in kb.index.entries if e.doc == zh_doc]
        assert zh, zh_doc
        linked = [by_id[e.translation].doc for e in zh if e.translation]
        assert linked and set(linked) == {en_doc}, zh_doc
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["counts"]["zh"] > 500 and manifest["counts"]["en"] > 400
