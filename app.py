"""Web chat (Gradio, at /) and JSON API (/api/...) on one server; the same as `kb serve`.

python app.py [--index DIR] [--host 127.0.0.1] [--port 7860] [--slack]
"""

import sys

from kb.doors.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
