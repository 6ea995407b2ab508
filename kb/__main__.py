"""`python -m kb` is the `kb` command."""

import sys

from kb.doors.cli import main

sys.exit(main())
