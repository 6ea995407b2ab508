"""ingest/parse.py: numbered lists of problems and Chinese question labels (a user's run found
both read as one entry per page)."""

from __future__ import annotations

import pytest

from ingest.entry import Section
from ingest.parse import parse_markdown


def spans(sections: list[Section]) -> list[tuple[str, int, int]]:
    return [(s.title, s.start_line, s.end_line) for s in sections]


NUMBERED_PROBLEMS = """## Converting a model

1. The model file is damaged. The log says:

   ```text
   ERROR [converter.cc:123] Read model file failed
   ```

2. Unsupported operators exist; the converter fails with -300:

   ```text
   ERROR [converter.cc:456] not supported op: Foo
   ```
"""

BOLD_NUMBERED = """# Known problems

1. **accelerate launch ignores `--num_processes`**

   A config file wins; check `accelerate env`.

2. **`swift sft` with ZeRO-3 on NPU fails: `call aclnnCast failed`**

   Use bf16.
"""

NUMBERED_STEPS = """## Setting up two nodes

1. Write the hostfile on node 0.

   ```text
   node0 slots=8
   ```

2. Check that the error log is empty, then start on both nodes:

   ```bash
   mpirun -n 16 --hostfile hostfile python train.py
   ```
"""


def test_numbered_lists_of_problems_are_entries_and_numbered_steps_are_one() -> None:
    assert spans(parse_markdown(NUMBERED_PROBLEMS)) == [
        ("The model file is damaged. The log says", 3, 7),
        ("Unsupported operators exist; the converter fails with -300", 9, 13),
    ]
    assert [s.title for s in parse_markdown(BOLD_NUMBERED)] == [
        "accelerate launch ignores --num_processes",  # no failure word: the bold list carries it
        "swift sft with ZeRO-3 on NPU fails: call aclnnCast failed",
    ]
    assert spans(parse_markdown(NUMBERED_STEPS)) == [("Setting up two nodes", 1, 13)]


@pytest.mark.parametrize("marker", ["**问：**", "问：", "问:"])
def test_chinese_question_labels_open_entries(marker: str) -> None:
    text = f"# 分布式训练 FAQ\n\n{marker} 端口被占用怎么办？\n\n**答：** 换一个端口。\n\n{marker} NCCL_IB_HCA 怎么设置？\n\n答：设成 Active 的网卡。\n"
    assert [s.title for s in parse_markdown(text)] == ["端口被占用怎么办？", "NCCL_IB_HCA 怎么设置？"]
