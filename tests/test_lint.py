"""The house style and the house's shape, checked like everything else: ruff lint and format,
mypy on the product's packages, module and function sizes, and which layer may import which
(docs/architecture.md describes the layers)."""

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ingest", "index", "kb", "evaluation")
CODE = (*PACKAGES, "eval", "tests")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
DOORS = ("cli", "web", "slack", "mcp")


def modules(*roots: str) -> list[Path]:
    return sorted(p for r in roots for p in (ROOT / r).rglob("*.py") if ".venv" not in p.parts)


def name_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved, inside functions too."""
    package = name_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            out.add(module)
            out |= {f"{module}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff(args):
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    p = subprocess.run([ruff, *args], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_mypy_is_clean_on_the_product():
    mypy = shutil.which("mypy")
    if mypy is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    p = subprocess.run([mypy], cwd=ROOT, capture_output=True, text=True)  # [tool.mypy] in pyproject.toml
    assert p.returncode == 0, p.stdout + p.stderr


def test_modules_and_functions_stay_small():
    too_big, too_long = [], []
    for path in modules(*CODE):
        source = path.read_text("utf-8")
        if source.count("\n") > MAX_MODULE_LINES:
            too_big.append(f"{path.relative_to(ROOT)}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert not too_big and not too_long, too_big + too_long


def test_layers_point_one_way():
    """ingest -> index -> kb core -> doors; evaluation beside the runtime, never under it."""
    wrong = []
    for path in modules(*PACKAGES):
        name, used = name_of(path), imports(path)
        if name == "kb.__main__":
            continue  # `python -m kb` is the terminal door's entry point
        forbidden = {
            "ingest": ("index", "kb", "evaluation"),
            "index": ("kb", "evaluation"),
            "kb": ("evaluation",) if name.startswith("kb.doors") else ("evaluation", "kb.doors"),
            "evaluation": ("kb.doors",),
        }[name.split(".")[0]]
        wrong += [
            f"{name} imports {m}" for m in used if m.split(".")[0] in forbidden or m.startswith(forbidden)
        ]
    assert wrong == []


def test_no_door_imports_another():
    """Doors share the host (kb/doors/host/); only host/app.py composes two of them."""
    wrong = []
    for door in DOORS:
        paths = [ROOT / "kb" / "doors" / "cli.py"] if door == "cli" else modules(f"kb/doors/{door}")
        for path in paths:
            for other in DOORS:
                if other != door:
                    wrong += [
                        f"{name_of(path)} imports {m}"
                        for m in imports(path)
                        if m.startswith(f"kb.doors.{other}")
                    ]
    for path in modules("kb/doors/host"):
        if path.name != "app.py":
            wrong += [
                f"{name_of(path)} imports {m}"
                for m in imports(path)
                if m.startswith(("kb.doors.web", "kb.doors.slack", "kb.doors.mcp"))
            ]
    assert wrong == []


# What only index/ may touch: an index's files and the stores' insides.
INDEX_FILES = (
    "entries.bin",
    "entries.npz",
    "facts.bin",
    "facts.npz",
    "rows.npz",
    "vectors.json",
    "files.json",
    "bm25.npz",
    "bm25_terms.json",
)
STORE_INSIDES = (
    "row_entry",
    "row_kind",
    "row_entries",
    "row_kinds",
    "bm25",
    "idf_arr",
    "vocab",
    "indptr",
    "_index",
    "_searcher",
    "_VECTORS",
)


def test_only_index_reads_index_files_and_store_internals():
    wrong = []
    for path in modules("ingest", "kb", "evaluation", "eval"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in INDEX_FILES:
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} names {node.value}")
            own = (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            )
            if isinstance(node, ast.Attribute) and node.attr in STORE_INSIDES and not own:
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} reads .{node.attr}")
    assert wrong == []
