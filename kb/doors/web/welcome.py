"""What the chat's first screen offers: the bundled knowledge base's own examples and blurb, or,
for an index of your documents, examples taken from it. The bundled examples ask about NCCL,
HCCL and Paddle: on a team's own FAQ two of five got "no match" and one a wrong product's
command (a user's run), so another index offers its own error lines and questions instead.
"""

from __future__ import annotations

from ...indexing import is_bundled
from .assets import EXAMPLES, WELCOME

MAX_EXAMPLES = 5
LABEL_CHARS = 28


def examples_for(kb) -> list[tuple[str, str]]:
    """(label, text) pairs: the bundled ones, or one per document of this index, an error line
    the entry covers (what people paste) else its title when it asks something, alternating
    languages, in the index's order."""
    if is_bundled(kb):
        return EXAMPLES
    from ingest.titles import cut, names_a_problem

    by_lang: dict[str, list[tuple[str, str]]] = {"zh": [], "en": []}
    docs: set[str] = set()
    for e in kb.index.entries:
        text = e.signatures[0] if e.signatures else (e.title if names_a_problem(e.title) else "")
        if not text or e.doc in docs or len(text) > 300:
            continue
        docs.add(e.doc)
        by_lang.setdefault(e.lang, []).append((cut(e.title, LABEL_CHARS), text))
    mixed = [x for pair in zip(by_lang["en"], by_lang["zh"], strict=False) for x in pair]
    longer = by_lang["en"] if len(by_lang["en"]) > len(by_lang["zh"]) else by_lang["zh"]
    mixed += longer[len(mixed) // 2 :]
    return mixed[:MAX_EXAMPLES]


def welcome_for(kb) -> str:
    """The bundled blurb names its products; another index says what it holds."""
    if is_bundled(kb):
        return WELCOME
    counts = kb.index.manifest.get("counts", {})
    head = WELCOME.split("\n\n", 1)[0]
    return (
        f"{head}\n\nAnswers come from this knowledge base's {counts.get('entries', 0)} entries "
        f"({counts.get('zh', 0)} Chinese, {counts.get('en', 0)} English). Each answer says how well it "
        "matches, quotes the line of your log it matched, gives the commands to run and cites its source.\n\n"
        f"答案来自本知识库的 {counts.get('entries', 0)} 条 FAQ（中文 {counts.get('zh', 0)} 条，英文 "
        f"{counts.get('en', 0)} 条）。每个回答都会说明匹配程度、引用日志中匹配的那一行，并给出命令和出处。\n\n"
        + WELCOME.rsplit("\n\n", 1)[1]
    )
