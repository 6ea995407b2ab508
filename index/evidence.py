"""What an index knows about its words, for weighing evidence.

`Vocabulary` answers how rare a token is in the index (a token the index never saw counts as
the rarest) and how much of one token set another covers, weighted by rarity. It fills in
lazily and is bounded by the index (unknown query tokens are never cached: a stream of unique
junk cannot grow it). What the index knows of each entry is index/facts.py's.
"""

from __future__ import annotations

from collections.abc import Iterable

from .seams import LexicalIndex
from .text import tokenize
from .topics import PRODUCT_FAMILIES


def informative(tokens: Iterable[str]) -> set[str]:
    """Tokens that carry meaning on their own: not short numbers."""
    return {t for t in tokens if not t.isdigit() or len(t) >= 3}


# Words that say something failed, or ask for help, without saying what (tokens as
# index/text.py makes them: English stop words are already gone). A question made only of these
# ("it does not work", "help", "training fails", "报错了", "what now?", "是什么意思？") names nothing
# an entry could answer.
# The gate cannot learn that: none of the sets it is fitted on has such a question, and it gave
# "help" 0.57 and "it does not work" 0.83 on the bundled knowledge base, a match with commands.
# No row of the real posts or of our gold sets consists only of these words and product names.
GENERIC_WORDS = frozenset(
    """error errors fail fails failed failing failure work works worked working help issue issues
    problem problems wrong broken crash crashes crashed bug bugs fix fixed solve solved solution
    run runs running ran train training trained job jobs script code program model question please
    thanks thank something anything nothing get gets got getting happen happens happened idea
    ideas exception keep keeps kept still again always sometimes everything way tried try trying
    want need know now next else mean means meaning 报错 错误 出错 失败 问题 求助 帮忙 帮助 怎么办 怎么
    如何 解决 训练 运行 程序 崩溃 不行 不能 不 用 跑 起来 大佬 看看 请问 谢谢 代码 模型 任务 异常 为什么 什么
    原因 一直 意思 下一步 接下来""".split()
)


def own_words(question: str, errors: Iterable[str]) -> set[str]:
    """The informative words of what the person wrote and of the main error lines (none for
    emoji or junk: no vague question, but no content either)."""
    return informative(tokenize(" ".join([question, *errors])))


def names_nothing(tokens: Iterable[str]) -> bool:
    """Whether the person's words are only GENERIC_WORDS and product names (or none at all):
    "mindspore fails", "NCCL error", "paddle 报错" say which stack, not how it fails, and every
    entry of that stack's FAQ shares those words."""
    return all(t in GENERIC_WORDS or PRODUCT_FAMILIES.names_one(t) for t in informative(tokens))


class Vocabulary:
    """Rarity of tokens, read through the lexical index's seam (index/seams.py)."""

    def __init__(self, lexical: LexicalIndex) -> None:
        self._lexical = lexical
        self.idf_max = lexical.max_idf
        self._known: dict[str, float] = {}  # grows at most to the vocabulary

    def __contains__(self, token: str) -> bool:
        return token in self._lexical

    def idf(self, token: str) -> float:
        v = self._known.get(token)
        if v is None:
            found = self._lexical.idf(token)
            if found is None:
                return self.idf_max
            v = self._known[token] = found
        return v

    def coverage(self, want: Iterable[str], have: frozenset[str] | set[str]) -> float:
        """Share of `want`, weighted by rarity, that `have` contains."""
        total = covered = 0.0
        known = self._known  # read inline: a short query's features call this ~400 times
        for t in want:
            w = known.get(t)
            if w is None:
                w = self.idf(t)
            total += w
            if t in have:
                covered += w
        return covered / total if total > 0 else 0.0

    def known_share(self, tokens: Iterable[str]) -> float:
        """How much of a query (by rarity) the index's vocabulary contains at all. A Chinese
        question over English entries shares only `MindSpore` with them: its BM25 ranking is
        noise and should weigh accordingly."""
        distinct = set(tokens)
        total = sum(self.idf(t) for t in distinct)
        return sum(self.idf(t) for t in distinct if t in self._lexical) / total if total > 0 else 0.0

    def specificity(self, line: str) -> float:
        """The rarity of a line's three rarest known tokens, 0..1."""
        known = sorted((self.idf(t) for t in set(tokenize(line)) if t in self._lexical), reverse=True)[:3]
        return sum(known) / (3 * self.idf_max)
