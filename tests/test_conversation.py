"""kb/conversation.py: which messages are thanks or "clear", and when a follow-up is read with the
earlier question (examples written here, shaped like what people typed into the chat)."""

import pytest

from kb.conversation import contextual_query, since_cleared, small_talk

EARLIER = [("user", "Init plugin so failed, ret = 1343225860"), ("assistant", "(the earlier answer)")]


@pytest.mark.parametrize(
    "message",
    [
        "thanks!",
        "got it",
        "好",
        "明白了",
        "thank you, that fixed it",
        "thanks, it works now",
        "that worked",
        "ok",
        "cheers",
        "3q",
        "great, thanks!",
        "works now",
        "好的谢谢",
        "谢谢，问题解决了",
        "多谢！",
        "好的谢谢，已经解决了",
        "感谢！按照这个改好了",
    ],
)
def test_thanks_in_its_many_forms(message):
    assert small_talk(message) == "thanks"
    assert contextual_query(message, EARLIER) is None


@pytest.mark.parametrize(
    "message",
    [
        "thanks, but it still hangs",
        "is it fixed?",
        "works?",
        "solved?",
        "reset?",
        "ok so NCCL still hangs",
        "clear the cache?",
        "not working",
        "ok what about RoCE?",
        "help",
        "it",
        "?",
        "还是不行",
        "谢谢，但是换成 HCCL 还是报错",
        "好的，我按照这个改了 NCCL_SOCKET_IFNAME",
        "thanks " * 20,
    ],
)
def test_a_question_or_a_complaint_is_no_thanks(message):
    assert small_talk(message) is None


@pytest.mark.parametrize("message", ["clear", "Clear.", "/clear", "reset", "start over", "清空", "新对话"])
def test_clear_starts_over(message):
    assert small_talk(message) == "clear"
    history = [*EARLIER, ("user", message), ("assistant", "(starting over)")]
    assert since_cleared(history) == [("assistant", "(starting over)")]
    assert contextual_query("What if I run it inside Docker?", history) is None


@pytest.mark.parametrize(
    "message",
    [
        "now it says Out of memory",
        "那 torchrun: not found 呢",
        "now I get NCCL error(5) instead",
        "and then RuntimeError: CUDA error: invalid device ordinal",
    ],
)
def test_a_follow_up_that_quotes_a_new_error_is_a_new_question(message):
    assert contextual_query(message, EARLIER) is None


@pytest.mark.parametrize(
    "message",
    [
        "What if I run it inside Docker?",
        "what if it says the same?",
        "same error on Ascend",
        "换成 HCCL 呢",
        "what if I get the same error on Ascend?",
        "and if it gives the same thing inside docker?",
        "what if I got that after upgrading the driver?",
        "如果报错是在容器里呢",
        "why?",
        "为什么？",
        "how come",
        "what now?",
        "What next?",
        "what else can I try?",
        "what does it mean?",
        "是什么意思？",
        "怎么解决？",
        "什么原因？",
        "为什么会这样？",
    ],
)
def test_a_follow_up_that_points_back_is_read_with_the_question(message):
    joined = contextual_query(message, EARLIER)
    assert joined is not None and joined.startswith("Init plugin so failed") and joined.endswith(message)
