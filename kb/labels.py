"""The doors' own words, in both languages: one table, read by the answer (kb/answer.py), its
presentation (kb/present.py) and the part of an entry an answer shows (kb/entry_text.py)."""

from __future__ import annotations

# The words of an answer and of its presentation (kb/present.py), in the reader's language.
LABELS = {
    "en": {
        "answer": "Answer",
        "commands": "Commands",
        "sources": "Sources",
        "no_match": "The knowledge base has no entry that answers this.",
        "vague": "This does not say how it fails, so no single entry fits it. Say what you ran and where "
        "(the command, the framework, the hardware) and paste the error line.",
        "judged_none": "The closest entries are about other problems: the language model read them and "
        "found none that answers this.",
        "suggest": "Nearest entries (not a match):",
        "weak": "Closest entry; it may not be your problem. Check its symptoms before running anything from it.",
        "other_lang": "Chinese version",
        "see_also": "See also",
        "more": "The rest of this entry is in its source [1].",
        "match": "Matches",
        "weak_badge": "Closest entry, not a match",
        "none": "No match",
        "matched_line": "Matched line in your paste",
        "code_in_source": "(Its commands are left out until you confirm it is your problem: see the source [1].)",
        "command": "(a command: see the source)",
        "commands_here": "(commands left out here: see the source)",
        "in_source": "(shown in the source)",
        "title_only": "The entry says no more than its title: see the source [1].",
        "thanks": "Glad it helped. Paste the next error whenever you need to.",
        "clear": "Starting over: earlier messages are not read with the next question.",
    },
    "zh": {
        "answer": "回答",
        "commands": "命令",
        "sources": "来源",
        "no_match": "知识库中没有能回答这个问题的条目。",
        "vague": "这句话没有说明是怎么出错的，选不出对应的条目。请说明运行了什么、在什么环境下（命令、框架、硬件），并贴出报错的那一行。",
        "judged_none": "最接近的几个条目说的是别的问题：语言模型读过之后，判断没有一个能回答这个问题。",
        "suggest": "最接近的条目（并不匹配）：",
        "weak": "最接近的条目，未必是你遇到的问题。运行其中的命令前请先核对症状。",
        "other_lang": "英文版",
        "see_also": "另见",
        "more": "条目的其余内容见来源 [1]。",
        "match": "匹配",
        "weak_badge": "最接近的条目，并不匹配",
        "none": "没有匹配",
        "matched_line": "你的日志中匹配的一行",
        "code_in_source": "（确认是同一个问题后再看其中的命令：见来源 [1]。）",
        "command": "（命令见来源）",
        "commands_here": "（此处的命令略去，见来源）",
        "in_source": "（见来源）",
        "title_only": "该条目只有标题，没有更多内容：见来源 [1]。",
        "thanks": "不客气。有新的报错随时贴上来。",
        "clear": "已重新开始：之前的消息不再和下一个问题一起读。",
    },
}
