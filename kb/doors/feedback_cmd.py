"""`kb feedback`: vote from the terminal, and read the unanswered queue.

    kb feedback down "ExternalError: Nccl error(2)" --right "NCCL error(2)" --comment "it was shm"
    kb feedback up "Init plugin so failed, ret = 1343225860"
    kb feedback list [--json]             the queue, one row per error signature, with its count
    kb feedback export --gold FILE        the queue as gold rows `kb eval FILE` reads
    (list and export read the rows of one index: --index, else the one kb.toml or KB_INDEX names)
    kb feedback export --gold FILE --confirmed   and the answers confirmed with 👍 (to refit on)

A vote from the terminal records what `kb search` shows for the question now (the entries, the
match strength, the index generation), or with `--answer FILE` what the answer saved from
`kb ask --json` showed (with a language model it may cite another entry, or say none applies):

    kb ask --json "Duplicate GPU detected" > answer.json
    kb feedback down --answer answer.json --right "NCCL error(5)"

`--right` names the entry that answers it (its id, its `doc:start-end` or its title). cli.py
names these functions with `_lazy`; the core is kb/feedback.py and kb/unanswered.py.
"""

from __future__ import annotations

import json
import sys
import time

from ..errors import KbError


def _store(settings):
    from ..feedback import open_store

    store = open_store(settings)
    if store is None:
        raise KbError(
            "feedback is turned off (feedback = false in kb.toml or KB_FEEDBACK); nothing is stored"
        )
    return store


def _index_rows(settings, queue: bool = False) -> list:
    """The rows of the index the settings name (--index, KB_INDEX, kb.toml, else the bundled
    KB): one home's store serves every index, and an export for one must not name another's
    entries. Says on stderr how many rows other indexes answered."""
    from index.backends import has_index

    from ..feedback import index_name
    from ..indexing import resolve_index, store_options
    from ..service import no_index_message

    store = _store(settings)
    index_dir, bundled = resolve_index(settings)
    if not bundled and not has_index(store_options(settings), index_dir):
        raise KbError(no_index_message(index_dir))  # a mistyped --index is no empty queue
    name = index_name(store_options(settings), index_dir)
    others = store.other_indexes(name)
    if others:
        print(f"({others} rows of other indexes left out; --index names the index to read)", file=sys.stderr)
    return store.rows(queue=queue, index=name)


def _saved_answer(path: str) -> object:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise KbError(f"--answer {path}: cannot read it ({e.strerror})") from None
    except ValueError as e:
        raise KbError(f"--answer {path}: not the JSON `kb ask --json` prints ({e})") from None


def _question_of(answer: object) -> str:
    from ..answer_json import echoed_question

    if answer is None:
        raise KbError("give the question or log that was asked ('-' reads stdin), or --answer FILE")
    try:
        return echoed_question(answer)
    except KbError as e:
        raise KbError(f"{e} ('-' reads stdin)") from None


def cmd_vote(args, settings) -> int:
    from ..progress import ProgressBar
    from ..query import check_query, decode_paste
    from ..service import KnowledgeBase
    from ..vote import Vote, record_vote

    answer = _saved_answer(args.answer) if args.answer else None
    text = args.text if args.text is not None else _question_of(answer)
    if text == "-":
        text = decode_paste(sys.stdin.buffer.read())
    query = check_query(text, settings.max_query_bytes)
    store = _store(settings)
    kb = KnowledgeBase.open(settings=settings, progress=ProgressBar(quiet=args.json))
    vote = Vote(query, args.vote, args.lang, args.comment or "", args.right, answer)
    names = {"right_entry": "--right", "answer": f"--answer {args.answer}" if args.answer else "--answer"}
    row = record_vote(kb, store, "cli", vote, names)
    if args.json:
        print(json.dumps({"id": row.id, "vote": args.vote, "in_queue": row.in_queue}, ensure_ascii=False))
        return 0
    mark = "👍" if args.vote == "up" else "👎"
    # What the vote is about: the first entry shown, and how many more were listed under it.
    shown = f"{row.shown[0]['title']}" if row.shown else "nothing shown"
    more = f", and {len(row.shown) - 1} more listed" if len(row.shown) > 1 else ""
    print(f"recorded {mark} #{row.id} ({row.match}: {shown}{more})")
    if row.right:
        right = row.right
        print(f"  right entry: {right['title']} ({right['doc']}:{right['start_line']}-{right['end_line']})")
    if row.in_queue:
        print("  it is in the unanswered queue: kb feedback list")
    return 0


def cmd_list(args, settings) -> int:
    from ..unanswered import groups

    found = groups(_index_rows(settings, queue=True))
    if args.json:
        print(json.dumps({"groups": [g.as_json() for g in found]}, ensure_ascii=False))
        return 0
    if not found:
        print("the unanswered queue is empty")
        return 0
    print(f"{'count':>5} {'none':>4} {'down':>4}  {'last seen':16}  signature")
    for g in found:
        last = time.strftime("%Y-%m-%d %H:%M", time.localtime(g.last))
        print(f"{g.count:>5} {g.no_match:>4} {g.down:>4}  {last:16}  {g.label[:100]}")
        for e in g.named[:2]:
            print(f"{'':34}right: {e['title'][:60]} ({e['doc']}:{e['start_line']}-{e['end_line']})")
    print(
        f"\n{len(found)} signatures, {sum(g.count for g in found)} questions; kb feedback export --gold FILE"
    )
    return 0


def cmd_export(args, settings) -> int:
    from ..unanswered import export_rows, write_rows

    out = export_rows(_index_rows(settings), confirmed=args.confirmed)
    write_rows(out.rows, args.gold)
    queue = len(out.rows) - out.confirmed
    parts = f" ({queue} from the queue, {out.confirmed} confirmed with 👍)" if args.confirmed else ""
    print(
        f"wrote {len(out.rows)} gold rows to {args.gold}{parts} "
        f"(review them, then: kb eval {args.gold} --index INDEX)"
    )
    if out.unknown:
        print(
            f"left out {out.unknown} signatures with a thumbs-down but no named entry: "
            "the right answer is unknown (kb feedback list shows them)",
            file=sys.stderr,
        )
    if out.disputed:
        print(
            f"left out the 👍 of {out.disputed} signatures that a thumbs-down contradicts (it named another "
            "entry, or none): kb feedback list shows them, and `kb feedback down TEXT --right ENTRY` "
            "says which entry is right",
            file=sys.stderr,
        )
    return 0
