"""An entry is also embedded point by point (index/views.py answer_passages): a long answer's
own vector says what its first paragraphs say, so a question about a point further down reached
the entry only through the words they share. Real embedder, real index, the shipped model."""

import pytest

from index.views import MAX_PASSAGES, answer_passages, dense_views
from ingest.collect import entries_from_text

# One long answer whose points come after 700 characters of prose, beside entries that share
# its vocabulary (GPUs, nodes, training) but none of its points.
TRAINER_FAQ = """# Trainer FAQ

## Questions about training on several GPUs

The trainer starts one process per card through torchrun, and each process builds its own copy
of the model before the first step. The batch size you give is per card, so the global batch is
that number times the cards times the gradient accumulation steps; a run on eight cards with a
batch of four therefore takes thirty-two samples per step. Checkpoints are written by the first
process only, into the output folder of the node that launched the job. Evaluation runs on every
card and the metrics are averaged before they are printed. When the job is launched from a
scheduler, the launcher reads the node list from the scheduler's environment and no host file is
needed. The random seed is offset by the process rank so that the cards do not draw the same
samples, and the data loader of each process reads a disjoint shard of the dataset.

- Across machines only the first node prints the training log; the other nodes stay silent, which
  is expected.
- When some layers are frozen, those parameters never receive a gradient and the data-parallel
  wrapper stops with an error at the first backward pass; start the job with
  `--ddp_find_unused_parameters true` so that it skips them.
- Sharded optimiser states across machines make every step wait for the network, so expect such a
  run to be several times slower than on one machine.

## How do I pick which GPUs a job uses?

List the card numbers before the launcher:

```bash
CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py
```

## The second node cannot reach the first one

Check that the master address and port are reachable from every node:

```bash
nc -zv 10.0.0.1 29500
```

## Training is slower on two GPUs than on one

A data loader with too few workers starves the cards; raise `num_workers` and check the GPU load:

```bash
nvidia-smi dmon -s u
```
"""

# DDP's error for parameters without a gradient, in words the FAQ does not use.
FROZEN_LAYERS = [
    "冻结部分层后 DDP 报错 parameters that were not used in producing loss",
    "Froze part of the model and now DDP training fails: parameters that were not used in producing loss",
]


def _entry(title_part: str):
    return next(e for e in entries_from_text("trainer.md", TRAINER_FAQ) if title_part in e.title)


def test_a_long_answer_is_split_into_its_points():
    passages = answer_passages(_entry("several GPUs"))
    assert len(passages) == 4  # the opening paragraph and the three list items
    assert passages[2].startswith("When some layers are frozen")  # the list marker is dropped
    assert "--ddp find unused parameters true" in passages[2]  # markdown marks are dropped
    answers = [text for kind, text in dense_views(_entry("several GPUs")) if kind == "answer"]
    assert answers[1:] == [f"Questions about training on several GPUs. {p}" for p in passages]
    assert len(answers[0]) > len(answers[1])  # the whole answer (its first 700 characters) first


def test_a_short_answer_and_fragments_add_no_passage():
    assert answer_passages(_entry("pick which GPUs")) == []  # one paragraph: its answer view is it
    entry = entries_from_text("x.md", "# Q\n\n- a short item\n- another one\n- and a third\n")[0]
    assert answer_passages(entry) == []
    many = "# Q\n\n" + "\n".join(f"- point number {n} of a long list that goes on and on" for n in range(20))
    assert len(answer_passages(entries_from_text("x.md", many)[0])) == MAX_PASSAGES


def _index(root):
    from kb.indexing import ingest

    (root / "docs").mkdir()
    (root / "docs" / "trainer.md").write_text(TRAINER_FAQ, "utf-8")
    ingest([str(root / "docs")], root / "index")
    return root / "index"


def _evidence(index, post):
    """(title, dense_to_answer, score) of each candidate, best first."""
    from index.embed import get_embedder
    from index.search import Searcher
    from index.store import load

    searcher = Searcher(load(index), get_embedder())
    c = searcher.candidates(post)
    column = c.names.index("dense_to_answer")
    model = searcher.model
    scores = model.rank(model.rank.select(c.x, c.names))
    rows = [
        (searcher.index.entries[e].title, float(c.x[i, column]), float(scores[i]))
        for i, e in enumerate(c.entries)
    ]
    return sorted(rows, key=lambda r: -r[2])


@pytest.fixture(scope="module")
def both_indexes(tmp_path_factory):
    """The trainer FAQ indexed as shipped, and again with no passages."""
    with_passages = _index(tmp_path_factory.mktemp("with"))
    patch = pytest.MonkeyPatch()
    patch.setattr("index.views.answer_passages", lambda entry: [])
    try:
        without = _index(tmp_path_factory.mktemp("without"))
    finally:
        patch.undo()
    return with_passages, without


@pytest.mark.slow
@pytest.mark.parametrize("post", FROZEN_LAYERS)
def test_a_post_about_a_point_deep_in_a_long_answer_reaches_it_by_meaning(both_indexes, post):
    """The point about frozen layers is the fourth of the long answer: its own row is nearer the
    post than the whole answer's vector is, and the entry leads the others by more."""
    with_passages, without = (_evidence(index, post) for index in both_indexes)
    long_entry = "Questions about training on several GPUs"
    assert with_passages[0][0] == long_entry
    (shown,) = (r for r in with_passages if r[0] == long_entry)
    (before,) = (r for r in without if r[0] == long_entry)
    assert shown[1] > before[1] + 0.05
    lead = with_passages[0][2] - with_passages[1][2]
    lead_before = before[2] - max(r[2] for r in without if r[0] != long_entry)
    assert lead > lead_before
