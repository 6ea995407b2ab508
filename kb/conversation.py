"""Conversations: when a short follow-up is read together with the earlier questions, and the
messages that are no question at all (thanks, "clear").

KnowledgeBase.ask and search_in_context use this; the doors pass the earlier turns as (role, text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A follow-up longer than this is a new question, never read together with earlier turns.
FOLLOW_UP_MAX_CHARS = 200
FOLLOW_UP_MAX_WORDS = 5  # a follow-up leans on the context: "what if I use RoCE?" has one word of its own
CONFIDENT_ALONE = 0.8  # a message this sure of its own answer is not read with the earlier turns

# A follow-up leans on what came before: it points back ("it", "that", "same") or continues
# ("what if", "what about", "and", "also", "如果", "那", "还是"). A short question without such a
# word is a new topic ("How do I set up passwordless SSH?"), answered on its own.
_REFERS_BACK = re.compile(
    r"\b(it|its|this|that|these|those|same|also|too|again|still|instead|then|there|what if|what about|"
    r"how about|and|or|but)\b|如果|假如|那|还是|还|这个|那个|同样|也|呢|换成|改成",
    re.I,
)
# A question word alone asks about the answer just given: "why?", "为什么？", "what now?",
# "是什么意思？". Read with the earlier question it wins over its own search: alone, "what now?"
# matched an FAQ title that ends in "What now?" and was answered with that entry's commands.
_ABOUT_THE_ANSWER = re.compile(
    r"^\W*(why( not| so)?|how (come|so)|(and |so )?(what now|now what)|what('s| is)? next|"
    r"what else( (can|should) i (try|do))?|what does (it|this|that) mean|"
    r"(为什么|为啥|怎么)(会)?(这样|如此)?|怎么回事|然后呢|(这|那)?(是)?什么意思|怎么解决|如何解决|什么原因|咋办|怎么办|下一步(呢|怎么办)?|接下来呢)"
    r"\W*$",
    re.I,
)


def about_the_answer(query: str) -> bool:
    return bool(_ABOUT_THE_ANSWER.match(query))


# ...unless it quotes an error of its own: "now it says Out of memory", "那 torchrun: not found 呢"
# are new problems, and read with the earlier question they got its answer again.
_QUOTES = re.compile(
    r"\b(says?|said|shows?|showed|prints?|printed|reports?|gives?|gave|gets?|got|getting|throws?|threw|"
    r"raises?|raised|fails? with|failed with)\b(?!\s+(the same|same|similar|that|this|it)\b)"
    r"|(报错?|提示|显示|出现|变成)\s*[:：]?\s*(?=[A-Za-z])",  # in Chinese, before the error's own words
    re.I,
)
_ERROR_NAME = re.compile(
    r"\w+(Error|Exception|Failure)\b|:\s*(not found|no such file|permission denied)", re.I
)

# "clear" (and its kin) starts over: earlier turns are not read again.
_CLEAR = re.compile(
    r"^\W*(clear|reset|start over|new (chat|conversation|topic)|forget (it|that|everything)|"
    r"清空|清除|重置|重新开始|新对话|新话题)\W*$",
    re.I,
)
# Thanks and acknowledgements carry no question: they never pull the earlier topic back, are
# not searched, and are not queued as unanswered (the web chat answered "thank you, that fixed
# it" with the first answer again, and the queue filled with "ok" and "cheers").
_THANKS = frozenset(
    """thanks thank thx ty tysm 3q cheers appreciate appreciated ok okay great cool nice perfect
    awesome excellent wonderful amazing brilliant worked works fixed solved resolved got understood""".split()
)
_ALONG = frozenset(
    """you so much very a lot it that this did the trick now good yes yep yeah sure
    alright all right fine helpful helped help for your again is was working makes sense guys
    man lol""".split()
)
_NEGATION = re.compile(r"\b(not|no|never|still|but|though|however)\b|n't|没|不|未|仍|还是|但", re.I)
_ZH_THANKS = re.compile(
    r"谢谢|多谢|感谢|好的|好|行|嗯|明白|收到|了解|解决了|可以了|搞定|管用|有用|成功了|改好了|修好了|正常了|跑通了"
)
# What goes along with thanks: "好的谢谢，已经解决了", "感谢！按照这个改好了" (both were searched).
_ZH_ALONG = re.compile(r"[你您了啦呀啊哈嗯哦喔好的非常太棒问题已经按照这个样就都我现在终于！!，,。.~～\s]")


def small_talk(query: str) -> str | None:
    """ "clear" for a request to start over, "thanks" for an acknowledgement, else None."""
    if len(query) > 80 or query.rstrip().endswith(("?", "？")):
        return None  # "is it fixed?", "reset?" ask something
    if _CLEAR.match(query):
        return "clear"
    if _NEGATION.search(query):
        return None
    if _ZH_THANKS.search(query) and not _ZH_ALONG.sub("", _ZH_THANKS.sub("", query)):
        return "thanks"
    words = re.findall(r"[a-z0-9']+", query.lower())
    if re.search(r"[\u3400-\u9fff]", query) or not words:
        return None
    if any(w in _THANKS for w in words) and all(w in _THANKS or w in _ALONG for w in words):
        return "thanks"
    return None


def _quotes_a_new_error(query: str) -> bool:
    from index.codes import error_codes
    from index.evidence import GENERIC_WORDS
    from index.text import tokenize

    if error_codes(query) or _ERROR_NAME.search(query):
        return True
    m = _QUOTES.search(query)
    if m is None:
        return False
    said = [t for t in tokenize(query[m.end() :]) if t not in GENERIC_WORDS and not _REFERS_BACK.fullmatch(t)]
    return len(said) >= 2


def since_cleared(history: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The turns after the last "clear" the person typed."""
    last = max(
        (i for i, (role, text) in enumerate(history) if role == "user" and _CLEAR.match(text)), default=-1
    )
    return list(history[last + 1 :])


def contextual_query(query: str, history: Sequence[tuple[str, str]]) -> str | None:
    """The message read together with the conversation's earlier questions, for a short
    follow-up ("what if I use RoCE?"); None when history cannot help it."""
    from index.text import tokenize

    earlier = [text for role, text in since_cleared(history) if role == "user" and text.strip()]
    if not earlier or len(query) > FOLLOW_UP_MAX_CHARS or small_talk(query):
        return None
    if not _ABOUT_THE_ANSWER.match(query):  # "why?" alone is about the answer just given
        if len(set(tokenize(query))) > FOLLOW_UP_MAX_WORDS or not _REFERS_BACK.search(query):
            return None  # a question with this much of its own, or that points nowhere back, is a new topic
        if _quotes_a_new_error(query):
            return None
    # The earlier question first, the follow-up last: the post reader reads both.
    return "\n".join([*(t[-4000:] for t in earlier[-2:]), query])
