"""Conversations: when a short follow-up is read together with the earlier questions.

KnowledgeBase.search_in_context uses this; the doors pass the earlier turns as (role, text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A follow-up longer than this is a new question, never read together with earlier turns.
FOLLOW_UP_MAX_CHARS = 200
FOLLOW_UP_MAX_WORDS = 5  # a follow-up leans on the context: "what if I use RoCE?" has one word of its own
# A message that only acknowledges or thanks carries no question: it never pulls the earlier
# topic back (the web chat used to answer "thanks!" with the first answer again).
_SMALL_TALK = re.compile(
    r"^\W*(thanks?|thank you( so much| very much)?|thx|ty|ok(ay)?|great|cool|nice|got it|perfect|awesome|"
    r"solved|it works|谢谢(你|您)?|多谢|感谢|好的|好|明白了?|收到|了解了?|解决了|可以了)[\W\s]*$",
    re.I,
)


# A follow-up leans on what came before: it points back ("it", "that", "same") or continues
# ("what if", "what about", "and", "also", "如果", "那", "还是"). A short question without such a
# word is a new topic ("How do I set up passwordless SSH?"), answered on its own.
_REFERS_BACK = re.compile(
    r"\b(it|its|this|that|these|those|same|also|too|again|still|instead|then|there|what if|what about|"
    r"how about|and|or|but)\b|如果|假如|那|还是|还|这个|那个|同样|也|呢|换成|改成",
    re.I,
)
CONFIDENT_ALONE = 0.8  # a message this sure of its own answer is not read with the earlier turns


def contextual_query(query: str, history: Sequence[tuple[str, str]]) -> str | None:
    """The message read together with the conversation's earlier questions, for a short
    follow-up ("what if I use RoCE?"); None when history cannot help it."""
    from index.text import tokenize

    earlier = [text for role, text in history if role == "user" and text.strip()]
    if not earlier or len(query) > FOLLOW_UP_MAX_CHARS or _SMALL_TALK.match(query):
        return None
    if len(set(tokenize(query))) > FOLLOW_UP_MAX_WORDS or not _REFERS_BACK.search(query):
        return None  # a question with this much of its own, or that points nowhere back, is a new topic
    # The earlier question first, the follow-up last: the post reader reads both.
    return "\n".join([*(t[-4000:] for t in earlier[-2:]), query])
