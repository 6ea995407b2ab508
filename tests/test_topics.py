"""Product and symptom profiles (index/topics.py) and the features that compare them."""

import numpy as np

from index import topics
from index.facts import document_products, entry_products
from index.post import read_post
from ingest.entry import Entry

PADDLE_POST = """[Bug] multi-node job dies at the first allreduce
### Environment
paddlepaddle-gpu            2.6.1
nccl                        2.18.3
python -m paddle.distributed.launch --ips 10.1.0.4,10.1.0.5 train.py
### Error
OSError: (External) NCCL error(2), unhandled system error
"""


def _entry(doc: str, title: str, body: str, heading: tuple[str, ...] = ()) -> Entry:
    return Entry("id", "hash", doc, "en", title, heading, body, 1, 5)


def _family(counts, name, families=topics.PRODUCT_FAMILIES):
    return counts[families.names.index(name)]


def test_a_post_is_about_the_product_its_environment_dump_names():
    post = read_post(PADDLE_POST)
    assert _family(post.products, "paddle") == 3  # paddlepaddle in the pip row, the launcher
    assert _family(post.products, "nvidia") == 3  # -gpu, the nccl row, the error
    assert _family(post.products, "mindspore") == 0


def test_each_family_is_counted_in_one_pass_in_both_languages():
    counts = topics.symptom_counts("训练卡住了，通信超时 after a NCCL timeout; the job hangs")
    assert _family(counts, "hang", topics.SYMPTOM_FAMILIES) == 4  # 卡住 超时 timeout hangs
    assert _family(counts, "comm", topics.SYMPTOM_FAMILIES) == 2  # 通信 NCCL
    assert topics.symptom_counts("x" * 10 + "timeout" * 3)[0] == 3
    assert sum(topics.symptom_counts("timeout " * 20_000)) == topics.SYMPTOM_CHARS // 8


def test_profile_puts_the_main_family_at_one_and_damps_long_dumps():
    p = topics.profile([40, 1, 0])
    assert p[0] == 1.0 and 0 < p[1] < 0.25 and p[2] == 0.0
    assert not topics.profile([0, 0]).any()


def test_a_document_names_the_product_its_entries_do_not():
    entries = [
        _entry("paddle/distributed_faq.md", "How do I choose the port range?", "Set FLAGS_START_PORT."),
        _entry(
            "paddle/distributed_faq.md", "Training hangs", "Use paddle.distributed.launch with --log_dir."
        ),
        _entry("mindspore/faq.md", "Training hangs", "Check msrun's worker logs."),
    ]
    assert _family(entry_products(entries[0]), "paddle") == 1  # only its path
    docs = document_products(entries)
    assert _family(docs["paddle/distributed_faq.md"], "paddle") == 3
    assert _family(docs["mindspore/faq.md"], "mindspore") == 1


def test_same_product_matches_and_a_different_specific_product_conflicts():
    post = topics.profile(read_post(PADDLE_POST).products)
    paddle = topics.profile(topics.product_counts("paddle fleet nccl"))
    mindspore = topics.profile(topics.product_counts("mindspore hccl ascend mindspore"))
    plain_nccl = topics.profile(topics.product_counts("nccl cuda"))
    match, conflict, generic, cosine = topics.product_columns(post, paddle)
    assert match == 1.0 and conflict == 0.0 and generic > 0 and cosine > 0.8
    match, conflict, _, cosine = topics.product_columns(post, mindspore)
    assert match == 0.0 and conflict == 1.0 and cosine < 0.5
    # A document about no specific product neither matches nor conflicts: it is about NCCL.
    match, conflict, generic, _ = topics.product_columns(post, plain_nccl)
    assert match == 0.0 and conflict == 0.0 and generic > 0.5


def test_symptoms_match_by_kind_of_trouble_and_a_title_about_another_kind_conflicts():
    post = topics.profile(topics.symptom_counts("job hangs at init_process_group, then a timeout"))
    hang_title = topics.profile(topics.symptom_counts("Training hangs after the first step"))
    oom_title = topics.profile(topics.symptom_counts("Out of memory on device 0"))
    body = topics.profile(topics.symptom_counts("Out of memory on device 0\nLower the batch size."))
    assert topics.symptom_columns(post, hang_title, hang_title)[:2] == [1.0, 1.0]
    match, title_match, cosine, conflict = topics.symptom_columns(post, oom_title, body)
    assert (match, title_match, cosine, conflict) == (0.0, 0.0, 0.0, 1.0)
    # A title that names no kind of trouble is not a conflict.
    neutral = topics.profile(topics.symptom_counts("FAQ"))
    assert topics.symptom_columns(post, neutral, body)[3] == 0.0


def test_the_candidate_features_carry_the_topic_columns():
    from index.features import FEATURES

    start = FEATURES.index(topics.FEATURES[0])
    assert FEATURES[start : start + len(topics.FEATURES)] == topics.FEATURES
    assert np.isfinite(topics.product_columns(np.zeros(11), np.zeros(11))).all()


def test_a_blank_post_names_no_product_and_still_gets_every_column():
    post = read_post("  \n ")
    assert post.products == (0,) * len(topics.PRODUCT_FAMILIES.names)
    assert topics.product_columns(topics.profile(post.products), topics.profile([1] * 11)) == [
        0.0,
        0.0,
        0.0,
        0.0,
    ]
