"""The MCP server: tools over the knowledge base, with the shapes of the other doors.

    search(query, k?, lang?)        -> the JSON of `kb search --json` / POST /api/search
    ask(query, lang?, history?)     -> the JSON of `kb ask --json` / POST /api/ask (verified
                                       commands and citations, match strength)
    get_entry(entry_id)             -> the JSON of GET /api/entry/ID (the entry and its
                                       other-language version); the entry may also be named by
                                       its place, `doc:start-end` as answers cite it
    feedback(query, vote, answer?, right_entry?, comment?, lang?)
                                    -> the JSON of POST /api/feedback: after trying an answer,
                                       whether it worked (stored as a vote)
    faq://{entry_id}                -> one entry as markdown, for a client to attach

Fields are checked by the rules the HTTP API uses (kb/request.py): the same size limit, the same
messages. A refused call is a tool error whose text is the API's error JSON, e.g.
`{"error": "the query is 2097200 bytes; the limit is 2097152 (KB_MAX_QUERY_BYTES). ...",
"status": 413}`, so an agent reads the reason and can send the part of the log that matters.

The tools are plain functions: the SDK runs them on worker threads, so a search never blocks
the event loop. A "no match" lands in the unanswered queue (kb/feedback.py) as from any door.
An agent is the one that runs the commands, so it is the one that knows whether they fixed the
error: `feedback` stores that as a vote from the "mcp" door, by the API's rules (kb/vote.py).
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at runtime, and
# pydantic's Field is imported inside the function that defines them.
import json
from pathlib import PurePath
from typing import Annotated, Any, Literal

from ...errors import KbError
from ...request import RequestError, history_field, k_field, lang_field, query_field
from ...vote import record_vote, vote_fields, vote_json
from ..host.live import LiveKb

# What the bundled knowledge base covers; another index is described by its own documents.
BUNDLED_TOPICS = (
    "A troubleshooting knowledge base for distributed-training errors (NCCL, HCCL, MindSpore, "
    "PaddlePaddle, PyTorch, accelerate, multi-node setup), in Chinese and English."
)
USAGE = (
    "Pass the error "
    "message, the whole log or the user's question as `query`: `ask` answers with the matching "
    "FAQ entry, the commands to run and numbered citations; `search` lists the matching entries; "
    "`get_entry` (or the resource faq://ENTRY_ID) reads one entry in full. `match` says how sure "
    "the answer is: 'match', 'weak' (the closest entry, shown without commands: check its "
    "symptoms first) or 'none' (the knowledge base has no answer; do not invent one); in `search`, "
    "only a match's first hit lists commands. Every "
    "result that lists `commands` also lists `destructive_commands` (they delete data, kill "
    "processes or stop a machine: confirm with the user before running one) and "
    "`placeholder_commands` (fill in each <placeholder> first; as written the shell reads < and > "
    "as redirections). For a follow-up question, pass the earlier turns as `history`. After "
    "trying an answer, call `feedback` with the `ask` result as `answer`: vote 'up' when it fixed "
    "the error, 'down' when it did not (with `right_entry` if another entry did)."
)

Lang = Literal["zh", "en"]
QUERY_HELP = "The error message, the pasted log (up to the size limit) or the question, zh or en"
LANG_HELP = 'Answer language: "zh", "en", or null to follow the question'


def _result(obj: dict):
    """A tool's answer: the JSON object as structured content, and as text (the same JSON the
    CLI prints) for clients that read only text."""
    from mcp.types import CallToolResult, TextContent

    text = json.dumps(obj, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=obj)


def _refused(e: KbError):
    """A KbError as the tool error an MCP client shows: exactly the HTTP API's error JSON."""
    from mcp.types import CallToolResult, TextContent

    body = e.as_json() if isinstance(e, RequestError) else {"error": str(e), "status": 422}
    text = json.dumps(body, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def cited_entry(kb, named: str):
    """The entry an agent names: its entry_id, or its place as the answer text and `kb ask`
    cite it (`zh/hccl.md:29-50`, or a line inside it). Agents copy the citation they read, and
    were refused the entry it names. A title is not taken here: a guess that hits another
    entry's words would hand back the wrong entry without a word."""
    from ...naming import entry_at

    e = kb.entry(named) or entry_at(kb.index.entries, named)
    if e is None:
        raise RequestError(
            404,
            f"no entry {named!r} in the index (give an entry_id from search or ask, or its doc:start-end)",
        )
    return e


def entry_markdown(kb, entry_id: str) -> str:
    """An entry (and a pointer to its other-language version) as the resource's text."""
    e = cited_entry(kb, entry_id)
    out = [f"# {e.title}", "", f"{e.lang} · {e.location} · faq://{e.id}", "", e.body.rstrip()]
    other = kb.entry(e.translation) if e.translation else None
    if other is not None:
        out += ["", "---", f"{other.lang}: {other.title} · {other.location} · faq://{other.id}"]
    return "\n".join(out) + "\n"


MAX_NAMED_DOCS = 12


def instructions(kb) -> str:
    """What the server tells an agent it knows. The bundled topics for the bundled index; for a
    team's own index its size and document names: an agent routes questions by this text, and a
    Gloo/Slurm FAQ described as MindSpore's would be sent MindSpore questions."""
    from ...indexing import is_bundled

    if is_bundled(kb):
        return f"{BUNDLED_TOPICS} {USAGE}"
    stats = kb.stats()
    titles: dict[str, str] = {}  # a document's top heading, else its file name
    for e in kb.index.entries:
        if not titles.get(e.doc):
            titles[e.doc] = e.heading_path[0] if e.heading_path else ""
    docs = list(dict.fromkeys(title or PurePath(doc).stem for doc, title in titles.items()))
    named = ", ".join(docs[:MAX_NAMED_DOCS]) + (
        f" and {len(docs) - MAX_NAMED_DOCS} more" if len(docs) > MAX_NAMED_DOCS else ""
    )
    langs = stats["languages"]
    return (
        f"A troubleshooting knowledge base of {stats['entries']} FAQ entries ({langs['zh']} in Chinese, "
        f"{langs['en']} in English) from the documents: {named}. {USAGE}"
    )


def build_server(live: LiveKb, store=None):
    """The MCPServer for `live`; `store` (kb/feedback.py) receives its "no match" answers."""
    server = _checked_server_class()("kb", instructions=instructions(live.get()), log_level="WARNING")
    _add_tools(server, live, store)
    _add_entry_tool(server, live)
    _add_feedback_tool(server, live, store)
    _add_resources(server, live)
    return server


def _checked_server_class():
    """MCPServer whose tools refuse arguments as the API does: a wrong type or an unknown field is
    `{"error": 'field "k": ...', "status": 422}`, like a bad value (the SDK answered a wrong type
    with pydantic's text and dropped unknown fields: `top_k: 3` gave five hits without a word); a
    misspelt tool is a 404 that lists the tools."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    class CheckedServer(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            tools = {t.name: t for t in await self.list_tools()}
            if name not in tools:  # the SDK's "Unknown tool: x" was the one refusal not in the API's JSON
                return _refused(
                    RequestError(404, f"unknown tool {name!r} (this server has: {', '.join(sorted(tools))})")
                )
            known = set(tools[name].input_schema.get("properties", {}))
            unknown = sorted(set(arguments or {}) - known)
            if unknown:
                fields = ", ".join(f'"{f}"' for f in unknown)
                return _refused(
                    RequestError(422, f"unknown field {fields} (this tool takes: {', '.join(sorted(known))})")
                )
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as e:
                if not isinstance(e.__cause__, ValidationError):
                    raise
                problems = [
                    f'field "{".".join(str(p) for p in err["loc"])}": {err["msg"]}'
                    for err in e.__cause__.errors()
                ]
                return _refused(RequestError(422, "; ".join(problems[:5])))

    return CheckedServer


def _add_tools(server, live: LiveKb, store) -> None:
    from mcp.types import CallToolResult, ToolAnnotations
    from pydantic import Field

    from ...feedback import Recording
    from ...schema import ask_json, search_json

    how_many = Field(description="How many entries (1-50; default: top_k)", strict=True, ge=1, le=50)
    settings = live.kb.settings
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    # The result's schema is the JSON object's; the tools build the result themselves, so the text
    # is the CLI's JSON and a refusal is the API's error JSON (not the SDK's "Error executing...").
    Json = Annotated[CallToolResult, dict[str, Any]]

    def kb():
        return Recording(live.get(), store, "mcp")

    @server.tool(name="search", annotations=read_only)
    def search(
        query: Annotated[str, Field(description=QUERY_HELP)],
        k: Annotated[int | None, how_many] = None,
        lang: Annotated[Lang | None, Field(description=LANG_HELP)] = None,
    ) -> Json:
        """Find the FAQ entries that match an error, a log or a question (the JSON of `kb search --json`)."""
        body = {"query": query, "k": k, "lang": lang}
        try:
            q = query_field(body, settings.max_query_bytes)
            return _result(search_json(kb().search(q, k_field(body), lang_field(body))))
        except KbError as e:
            return _refused(e)

    @server.tool(name="ask", annotations=read_only)
    def ask(
        query: Annotated[str, Field(description=QUERY_HELP)],
        lang: Annotated[Lang | None, Field(description=LANG_HELP)] = None,
        history: Annotated[
            list[dict[str, str]] | None,
            Field(description='Earlier turns: [{"role": "user"|"assistant", "content": str}]'),
        ] = None,
    ) -> Json:
        """Answer an error, a log or a question from the knowledge base: the answer text, the
        commands to run (verified against the cited entries), citations and the match strength
        (the JSON of `kb ask --json`)."""
        body = {"query": query, "lang": lang, "history": history}
        try:
            q = query_field(body, settings.max_query_bytes)
            return _result(ask_json(kb().ask(q, lang=lang_field(body), history=history_field(body))))
        except KbError as e:
            return _refused(e)


def _add_entry_tool(server, live: LiveKb) -> None:
    from mcp.types import CallToolResult, ToolAnnotations
    from pydantic import Field

    from ...schema import entry_json

    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    Json = Annotated[CallToolResult, dict[str, Any]]  # built as _add_tools' results are

    @server.tool(name="get_entry", annotations=read_only)
    def get_entry(
        entry_id: Annotated[
            str,
            Field(description="An entry_id from search or ask, or the entry's place as cited: doc:start-end"),
        ],
    ) -> Json:
        """One FAQ entry in full (title, source lines, body, commands) and its other-language version."""
        current = live.get()
        try:
            e = cited_entry(current, entry_id)
        except KbError as err:
            return _refused(err)
        return _result(entry_json(e, current.entry(e.translation) if e.translation else None))


def _answer_json(answer: dict | str | None) -> object:
    """An answer passed as JSON text is read as the object it holds (kb/vote.py refuses it otherwise)."""
    if isinstance(answer, str):
        try:
            return json.loads(answer)
        except ValueError:
            return answer
    return answer


def _add_feedback_tool(server, live: LiveKb, store) -> None:
    from mcp.types import CallToolResult, ToolAnnotations
    from pydantic import Field

    settings = live.kb.settings
    Json = Annotated[CallToolResult, dict[str, Any]]  # built as _add_tools' results are
    writes = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )

    @server.tool(name="feedback", annotations=writes)
    def feedback(
        query: Annotated[str, Field(description="The query the answer was for, as it was sent")],
        vote: Annotated[
            Literal["up", "down"], Field(description='"up": the answer fixed it; "down": it did not')
        ],
        answer: Annotated[
            dict[str, Any] | str | None,
            Field(
                description="The JSON `ask` (or `search`) returned for the query: the vote is about what it showed"
            ),
        ] = None,
        right_entry: Annotated[
            str | None, Field(description="The entry that did fix it: entry_id, doc:start-end or title")
        ] = None,
        comment: Annotated[str | None, Field(description="What happened when its commands were run")] = None,
        lang: Annotated[Lang | None, Field(description=LANG_HELP)] = None,
    ) -> Json:
        """Record whether an answer worked, after trying it (the JSON of POST /api/feedback). A
        'down' vote puts the question in the queue people review, with right_entry if given."""
        body = {
            "query": query,
            "vote": vote,
            "answer": _answer_json(answer),
            "right_entry": right_entry,
            "comment": comment,
            "lang": lang,
        }
        try:
            row = record_vote(live.get(), store, "mcp", vote_fields(body, settings.max_query_bytes))
            return _result(vote_json(row))
        except KbError as e:
            return _refused(e)


def _add_resources(server, live: LiveKb) -> None:
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    @server.resource("faq://{entry_id}", name="entry", mime_type="text/markdown")
    def entry(entry_id: str) -> str:
        """A FAQ entry as markdown: title, language, source lines, body, other-language version."""
        try:
            return entry_markdown(live.get(), entry_id)
        except RequestError as e:
            raise ResourceNotFoundError(e.message) from None
