"""Web chat (Gradio, at /) and JSON API (/api/...) on one server; the same as `kb serve`.

python app.py [--index DIR] [--host 127.0.0.1] [--port 7860] [--slack]
"""

import sys

from kb.cli import build_parser
from kb.config import ConfigError
from kb.service import KbError, KnowledgeBase
from kb.web import create_app, launch


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    try:
        kb = KnowledgeBase.open(index=args.index)  # opened once, shared read-only by every request
        app = create_app(kb, slack=args.slack)
    except (KbError, ConfigError) as e:
        print(f"app.py: {e}", file=sys.stderr)
        return 1
    launch(app, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
