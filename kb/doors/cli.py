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

EXIT_USAGE = 2
EXIT_ERROR = 1


def _read_query(text: str, settings) -> str:
    """The query text (stdin for '-'), checked before any index is opened or built."""
    from ..query import check_query

    if text == "-":
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    return check_query(text, settings.max_query_bytes)


def _open_kb(args, settings):
    from ..feedback import Recording, open_store
    from ..progress import ProgressBar
    from ..service import KnowledgeBase

    kb = KnowledgeBase.open(settings=settings, progress=ProgressBar(quiet=getattr(args, "json", False)))
    return Recording(kb, open_store(settings), "cli")  # a "no match" lands in the unanswered queue


def cmd_ingest(args, settings) -> int:
    from index.store import read_manifest

    from ..indexing import ingest, resolve_index
    from ..progress import ProgressBar

    index_dir, bundled = resolve_index(settings)
    paths = args.paths
    if not paths:
        # The sources are recorded in the manifest (an unreadable one raises its own KbError).
        paths = (read_manifest(index_dir) or {}).get("sources", [])
        if not paths:
            raise SystemExit("kb ingest: give the folders or files to ingest, e.g. `kb ingest docs/`")
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
        # Doc names and reasons are made printable where they are made (ingest/read.py).
        for p in outcome.problems:
            print(f"skipped {p}", file=sys.stderr)
        for p in outcome.warnings:
            print(f"warning {p}", file=sys.stderr)
        print(
            f"indexed {outcome.entries} entries from {outcome.files} files into {outcome.index} "
            f"({outcome.embedded} texts embedded, {outcome.reused} reused, {outcome.seconds:.1f}s)"
        )
    return 0


def _batch(args, settings, answer) -> int | None:
    """--batch FILE (kb/doors/batch.py): every line answered by `answer(kb, text, lang)`; None
    when there is no --batch."""
    if args.batch is None:
        if args.text is None:
            raise SystemExit(f"kb {args.command}: give the text, '-' for stdin, or --batch FILE")
        return None
    if args.text is not None:
        raise SystemExit(f"kb {args.command}: give either the text or --batch FILE, not both")
    from ..query import check_query
    from .batch import read_lines, run_batch

    kb = _open_kb(argparse.Namespace(json=True), settings)
    return run_batch(
        read_lines(args.batch),
        lambda text, lang: answer(kb, text, lang),
        lambda text: check_query(text, settings.max_query_bytes),
        sys.stdout,
    )


def cmd_search(args, settings) -> int:
    from ..schema import search_json

    code = _batch(args, settings, lambda kb, text, lang: search_json(kb.search(text, lang=lang)))
    if code is not None:
        return code
    query = _read_query(args.text, settings)
    kb = _open_kb(args, settings)
    result = kb.search(query, lang=args.lang)
    if args.json:
        print(json.dumps(search_json(result), ensure_ascii=False))
        return 0
    if result.no_match:
        print("no match." if result.lang == "en" else "没有匹配的条目。")
        if result.suggestions:
            print("nearest (not a match):" if result.lang == "en" else "最接近的条目（并不匹配）：")
    for n, h in enumerate(result.hits or result.suggestions, 1):
        e = h.entry
        print(f"{n}. {e.title}\n   {e.location} [{e.lang}]  score={h.score:.4f}")
        if h.translation is not None:
            t = h.translation
            print(f"   {t.lang}: {t.title} ({t.location})")
        for c in e.commands[:6]:
            print(f"   $ {c}")
    return 0


def render_text(answer, docs_base_url: str = "", lookup=None) -> str:
    """An answer for the terminal, as kb/present.py decides what it shows."""
    from ..present import present

    p = present(answer, docs_base_url, lookup)
    out = [p.text]
    if p.notice:
        out.insert(0, f"! {p.notice}")
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
        out += [f"  [{r.n}] {r.location} {r.title}" for r in p.sources]
        if p.other_language is not None:
            o = p.other_language
            out.append(f"  {p.labels['other_lang']}: {o.location} {o.title}")
    return "\n".join(out)


def cmd_ask(args, settings) -> int:
    from dataclasses import replace

    from ..schema import ask_json

    code = _batch(args, settings, lambda kb, text, lang: ask_json(kb.ask(text, lang=lang)))
    if code is not None:
        return code
    query = _read_query(args.text, settings)
    kb = _open_kb(args, settings)

    def shown(answer) -> str:
        return render_text(answer, settings.docs_base_url, kb.entry)

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
    rest = shown(replace(answer, text="", notice="")).strip("\n")  # commands (with cautions), sources
    if rest:
        print("\n" + rest)
    return 0


def cmd_stats(args, settings) -> int:
    kb = _open_kb(args, settings)
    print(json.dumps(kb.stats(), ensure_ascii=False, indent=1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kb",
        description="Bilingual (zh/en) troubleshooting knowledge base: paste an error, get the FAQ entry, "
        "its commands and its source. Works offline.",
        epilog='examples:\n  kb ask "NCCL error(2) unhandled system error"\n  some_job 2>&1 | kb ask -\n'
        '  kb ingest docs/ --index ./kb-index\n  kb search --json "Init plugin so failed"',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
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
        sp.add_argument("text", nargs="?", help="the error, log or question; '-' reads stdin")
        sp.add_argument(
            "--batch",
            metavar="FILE",
            help='JSON Lines of {"text", "id"?, "lang"?}, \'-\' for stdin: one JSON line out per line in',
        )
        add_index(sp)
        sp.add_argument("--json", action="store_true", help="print one JSON object")
        sp.add_argument("--lang", choices=("zh", "en"), help="answer language (default: the query's)")
        if name == "search":
            sp.add_argument("--k", type=int, help="number of hits (default: top_k, 5)")
        sp.set_defaults(func=func)

    sp = sub.add_parser("stats", help="show what the index holds")
    add_index(sp)
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
        v.add_argument("text", help="the question or log that was asked; '-' reads stdin")
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    from ..config import load_settings
    from ..errors import KbError

    try:
        settings = load_settings(index=args.index, top_k=getattr(args, "k", None))
        return args.func(args, settings)
    except KbError as e:
        print(f"kb {args.command}: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"kb {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:
        print(f"kb {args.command}: {e}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "build_parser"]
