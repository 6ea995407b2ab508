"""The terminal door, `kb`: ingest, search, ask, stats, eval, feedback; `kb serve`, `kb slack`
and `kb mcp` start the HTTP host (kb/doors/host/app.py) with the web, Slack or MCP door.

Settings are resolved once here (flags default to "not given", so kb.toml and KB_* decide
unless a flag is typed) and passed to the command. Every KbError, a bad setting included, ends
as one line on stderr and exit code 1. Only argparse and the standard library are imported at
start-up, so `kb --help` is instant; each command imports what it needs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from .terminal import MAX_K, PrintableStream, k_value, print_json_error, read_query

EXIT_USAGE = 2
EXIT_ERROR = 1


def _read_query(args, settings) -> str:
    """The query text (an argument, '-' or a pipe), checked before any index is opened or built."""
    return read_query(args.text, settings, args.command)


def _open_kb(args, settings):
    from ..feedback import Recording, open_store
    from ..progress import ProgressBar
    from ..service import KnowledgeBase

    kb = KnowledgeBase.open(settings=settings, progress=ProgressBar(quiet=getattr(args, "json", False)))
    return Recording(kb, open_store(settings), "cli")  # a "no match" lands in the unanswered queue


def cmd_ingest(args, settings) -> int:
    from ..indexing import ingest, recorded_sources, resolve_index
    from ..progress import ProgressBar
    from .terminal import check_index_folder, print_ingest, search_hint

    index_dir, _ = resolve_index(settings)
    paths = args.paths or recorded_sources(index_dir, settings)
    if settings.store.backend != "milvus":  # a Milvus index uses no folder
        check_index_folder(index_dir)
    outcome = ingest(
        paths,
        index_dir,
        settings,
        progress=ProgressBar(quiet=args.json),
        follow_links_outside=args.follow_links_outside,
    )
    if args.json:
        print(json.dumps(outcome.__dict__, ensure_ascii=False))
    else:
        print_ingest(outcome)
        if args.index and not _is_default_index(index_dir):  # without --index it is the default
            print(search_hint(outcome.index), file=sys.stderr)
    return 0


def _is_default_index(index_dir: Path) -> bool:
    """Whether `kb ask` with no --index reads this folder (KB_INDEX, kb.toml or the bundled KB)."""
    from ..config import load_settings
    from ..indexing import resolve_index

    default, _ = resolve_index(load_settings())
    return default.resolve() == index_dir.resolve()


def cmd_search(args, settings) -> int:
    from ..schema import search_json
    from .terminal import search_text

    if args.batch is not None:  # many queries in one process (kb/doors/batch.py)
        from .batch import batch_command

        return batch_command(args, settings, lambda kb, text, lang: search_json(kb.search(text, lang=lang)))
    query = _read_query(args, settings)
    kb = _open_kb(args, settings)
    result = kb.search(query, lang=args.lang)
    print(json.dumps(search_json(result), ensure_ascii=False) if args.json else search_text(result))
    return 0


def render_text(answer, docs_base_url: str = "", lookup=None, head: bool = True) -> str:
    """An answer for the terminal, as kb/present.py decides what it shows: how strong the match
    is and the entry's title, the line of the paste that matched, the text (markdown, with a
    caution above a code block that holds a destructive command), commands, sources."""
    from ..present import present

    p = present(answer, docs_base_url, lookup)
    out = [f"! {p.notice}"] if p.notice else []
    if p.headline is not None and head:
        out.append(f"{p.strength_label}: {p.headline.title} [1]")
        if p.warning:
            out.append(f"! {p.warning}")
        if p.matched_line:
            out.append(f"{p.labels['matched_line']}: {p.matched_line}")
        out.append("")
    out.append(p.cautioned_text())
    if p.suggestions:
        out += ["", p.labels["suggest"]]
        out += [f"  - {r.title} ({r.location})" for r in p.suggestions]
    if p.commands:
        out += ["", p.labels["commands"] + ":"]
        for c in p.commands:
            if c.caution:
                out.append(f"  # {c.caution}")
            out.append("  $ " + c.text.replace("\n", "\n    "))
    if p.sources:
        out += ["", p.labels["sources"] + ":"]
        for r in p.sources:
            out.append(f"  [{r.n}] {r.location} {r.title}")
            if r is p.sources[0] and p.other_language is not None:  # [1]'s, written under it
                o = p.other_language
                out.append(f"      {p.labels['other_lang']}: {o.location} {o.title}")
    return "\n".join(out)


def cmd_ask(args, settings) -> int:
    from dataclasses import replace

    from ..schema import ask_json

    if args.batch is not None:  # many queries in one process (kb/doors/batch.py)
        from .batch import batch_command

        return batch_command(args, settings, lambda kb, text, lang: ask_json(kb.ask(text, lang=lang)))
    query = _read_query(args, settings)
    kb = _open_kb(args, settings)

    def shown(answer, head: bool = True) -> str:
        return render_text(answer, settings.docs_base_url, kb.entry, head)

    if args.json or not kb.settings.llm_enabled:
        answer = kb.ask(query, lang=args.lang)
        print(json.dumps(ask_json(answer), ensure_ascii=False) if args.json else shown(answer))
        return 0
    # With an LLM the answer is printed as it comes, a verified line at a time.
    streamed: list[str] = []

    def show(piece: str) -> None:
        streamed.append(piece)
        sys.stdout.write(piece)
        sys.stdout.flush()

    answer = kb.ask(query, lang=args.lang, on_token=show)
    if "".join(streamed).strip() != answer.text.strip():
        # The model failed midway or its answer was replaced: print the answer that stands.
        print(("\n\n" if streamed else "") + shown(answer))
        return 0
    print()
    if answer.notice:
        print(f"\n! {answer.notice}")
    # Commands (with cautions) and sources; the heading was printed before the stream.
    rest = shown(replace(answer, text="", notice=""), head=False).strip("\n")
    if rest:
        print("\n" + rest)
    return 0


def cmd_stats(args, settings) -> int:
    from .terminal import stats_text

    kb = _open_kb(args, settings)
    print(json.dumps(kb.stats(), ensure_ascii=False, indent=1) if args.json else stats_text(kb.stats()))
    return 0


def build_parser() -> _Parser:
    p = _Parser(
        prog="kb",
        description="Bilingual (zh/en) troubleshooting knowledge base: paste an error, get the FAQ entry, "
        "its commands and its source. Works offline.",
        epilog='examples:\n  kb ask "NCCL error(2) unhandled system error"\n  some_job 2>&1 | kb ask -\n'
        '  kb ingest docs/ --index ./kb-index\n  kb search --json "Init plugin so failed"',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    p.commands = sub.choices  # a command's own usage for its unknown options (main)
    _add_core_commands(sub)
    _add_eval_command(sub)
    _add_server_commands(sub)
    _add_feedback_command(sub)
    _add_mcp_command(sub)
    return p


def _add_index(sp) -> None:
    sp.add_argument("--index", help="index folder (default: KB_INDEX, kb.toml, else the bundled KB)")


def _add_core_commands(sub) -> None:
    add_index = _add_index
    sp = sub.add_parser("ingest", help="parse FAQ markdown and (re)build an index")
    sp.add_argument(
        "paths", nargs="*", help="folders or files (.md .markdown .txt); default: the index's sources"
    )
    add_index(sp)
    sp.add_argument("--json", action="store_true", help="print a JSON summary")
    sp.add_argument(
        "--follow-links-outside",
        action="store_true",
        help="follow links that lead out of the given folders (default: skip and name them)",
    )
    sp.set_defaults(func=cmd_ingest)

    for name, helptext, func in (
        ("search", "find the entries that match an error or question", cmd_search),
        ("ask", "answer with the matching entry's text, commands and citations", cmd_ask),
    ):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument(
            "text",
            nargs="?",
            help=f"the error, log or question; '-' or a pipe (`cat log | kb {name}`) reads stdin",
        )
        sp.add_argument(
            "--batch",
            metavar="FILE",
            help='JSON Lines of {"text", "id"?, "lang"?}, \'-\' for stdin: one JSON line out per line in',
        )
        add_index(sp)
        sp.add_argument("--json", action="store_true", help="print one JSON object")
        shown = "answer language" if name == "ask" else "the language entries are shown in"
        sp.add_argument("--lang", choices=("zh", "en"), help=f"{shown} (default: the query's)")
        if name == "search":
            sp.add_argument("-k", "--k", type=k_value, help=f"number of hits, 1-{MAX_K} (default: top_k, 5)")
        sp.set_defaults(func=func)

    sp = sub.add_parser("stats", help="show what the index holds")
    add_index(sp)
    sp.add_argument("--json", action="store_true", help="print one JSON object")
    sp.set_defaults(func=cmd_stats)


def _add_eval_command(sub) -> None:
    add_index = _add_index
    sp = sub.add_parser("eval", help="measure retrieval quality on a gold set (Hit@k, MRR, nDCG, abstention)")
    sp.add_argument("gold", nargs="+", help="gold set(s), JSONL")
    add_index(sp)
    sp.add_argument("--k", dest="cutoff", type=int, help="cut-off for MRR/nDCG (default 10)")
    sp.add_argument(
        "--json", action="store_true", help="print one JSON object with the numbers and the misses"
    )
    sp.add_argument(
        "--compare",
        action="store_true",
        help="also run the baselines (BM25 only, dense only, LangChain recipe)",
    )
    sp.add_argument(
        "--no-cv",
        action="store_true",
        help="skip the cross-validation on real-post sets (only the committed model's numbers)",
    )
    sp.add_argument(
        "--splits",
        type=int,
        metavar="N",
        help="splits into folds that the cross-validation is repeated over, its numbers their mean "
        "(default 3, as eval/fit.py; 1 is three times faster and moves by a post or two)",
    )
    sp.add_argument(
        "--llm",
        action="store_true",
        help="also send each answer to the configured language model (KB_LLM_MODEL) as `kb ask` "
        "does, and report its verdicts and citations as the system 'ours + LLM'",
    )
    sp.set_defaults(func=_lazy("evaluation.run", "eval_command"))


def _add_server_commands(sub) -> None:
    add_index = _add_index
    sp = sub.add_parser("serve", help="web chat (Gradio) and JSON API on one server")
    add_index(sp)
    sp.add_argument("--host", help="bind address (default 127.0.0.1; anything else is exposed)")
    sp.add_argument("--port", type=int, help="default 7860")
    sp.add_argument(
        "--slack", action="store_true", help="also mount the Slack bot at /slack/events (HTTP mode)"
    )
    sp.add_argument("--mcp", action="store_true", help="also serve the MCP server at /mcp (streamable HTTP)")
    sp.set_defaults(func=_lazy("kb.doors.host.app", "serve_command"))

    sp = sub.add_parser("slack", help="run the Slack bot (Socket Mode with SLACK_APP_TOKEN, else HTTP mode)")
    add_index(sp)
    sp.add_argument("--mode", choices=("socket", "http"), help="default: socket when SLACK_APP_TOKEN is set")
    sp.add_argument("--host", help="HTTP mode's bind address (default 127.0.0.1)")
    sp.add_argument("--port", type=int, help="HTTP mode's port (default 3000)")
    sp.set_defaults(func=_lazy("kb.doors.host.app", "slack_command"))


def _add_feedback_command(sub) -> None:
    """`kb feedback up|down|list|export` (kb/doors/feedback_cmd.py)."""
    sp = sub.add_parser("feedback", help="vote on an answer; list or export the unanswered queue")
    actions = sp.add_subparsers(dest="action", metavar="ACTION", required=True)
    for vote, helptext in (("up", "the answer was right"), ("down", "the answer was wrong or missing")):
        v = actions.add_parser(vote, help=helptext)
        v.add_argument("text", nargs="?", help="the question or log asked; '-' reads stdin")
        v.add_argument("--answer", metavar="FILE", help="the `kb ask --json` output the vote is about")
        v.add_argument("--right", help="the entry that answers it: its id, doc:start-end or title")
        v.add_argument("--comment", help="what was wrong")
        v.add_argument("--lang", choices=("zh", "en"), help="the answer language that was shown")
        v.add_argument("--json", action="store_true", help="print one JSON object")
        _add_index(v)
        v.set_defaults(func=_lazy("kb.doors.feedback_cmd", "cmd_vote"), vote=vote)
    lp = actions.add_parser("list", help="the unanswered queue, one row per error signature")
    lp.add_argument("--json", action="store_true", help="print one JSON object")
    _add_index(lp)
    lp.set_defaults(func=_lazy("kb.doors.feedback_cmd", "cmd_list"))
    ep = actions.add_parser("export", help="write the queue as gold rows that kb eval reads")
    ep.add_argument("--gold", required=True, metavar="FILE", help="the JSONL file to write")
    ep.add_argument(
        "--confirmed", action="store_true", help="also the answers confirmed with 👍 (to refit on)"
    )
    _add_index(ep)
    ep.set_defaults(func=_lazy("kb.doors.feedback_cmd", "cmd_export"))


def _add_mcp_command(sub) -> None:
    """`kb mcp`: the MCP server (kb/doors/mcp/), on stdio unless --http."""
    sp = sub.add_parser("mcp", help="MCP server for coding agents: stdio, or streamable HTTP with --http")
    _add_index(sp)
    sp.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp instead of stdio")
    sp.add_argument("--host", help="--http's bind address (default 127.0.0.1)")
    sp.add_argument("--port", type=int, help="--http's port (default 8765)")
    sp.set_defaults(func=_lazy("kb.doors.host.app", "mcp_command"))


def _lazy(module: str, function: str):
    """A command implemented in another module, imported only when that command runs."""

    def run(args, settings) -> int:
        import importlib

        return getattr(importlib.import_module(module), function)(args, settings)

    return run


class _Parser(argparse.ArgumentParser):
    """argparse, except that with --json a usage error is one JSON object on stdout too."""

    def error(self, message: str):  # type: ignore[override]
        argv = sys.argv[1:] if self._argv is None else self._argv
        if "--json" in argv:
            command = next((a for a in argv if not a.startswith("-")), "")
            print_json_error(command, message, EXIT_USAGE)
            sys.exit(EXIT_USAGE)
        super().error(message)

    _argv: list[str] | None = None
    commands: Mapping[str, argparse.ArgumentParser] = {}  # kb's own parser: each command's, by name


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    _Parser._argv = argv
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said with the command's usage (`kb search [-h] [--batch FILE] ...`), not kb's
        where = parser.commands.get(getattr(args, "command", None) or "", parser)
        where.error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    from ..config import load_settings
    from ..errors import KbError

    def fail(message: str, code: int = EXIT_ERROR) -> int:
        if getattr(args, "json", False):
            print_json_error(args.command, message, code)
        print(f"kb {args.command}: {message}", file=sys.stderr)
        return code

    if not getattr(args, "json", False):  # JSON escapes them itself; its text stays as it was
        sys.stdout = PrintableStream.around(sys.stdout)  # FAQ text, pastes, answers: no escapes
    try:
        settings = load_settings(index=args.index, top_k=getattr(args, "k", None))
        return args.func(args, settings)
    except KbError as e:
        return fail(str(e))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:
        return 0
    except OSError as e:
        return fail(str(e))


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "build_parser"]
