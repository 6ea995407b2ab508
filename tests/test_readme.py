"""The README's quick start and "Use" examples, run as written from a fresh copy of the checkout
(the files git tracks or would track) in a new virtual environment with a new home.

The new environment reaches the packages the project depends on through this environment's
site-packages (a .pth line) and pip works offline (PIP_NO_INDEX), so `pip install -e .` runs as
written without the network; the project itself is installed from the copy, not from here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

pytestmark = pytest.mark.slow


def bash_block(after: str) -> list[str]:
    """The command lines of the first ```bash block after the heading `after`."""
    section = README.split(after, 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("readme")
    checkout = tmp / "kb"
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    purelib = Path(subprocess.check_output([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())  # fmt: skip
    # Python 3.11's venv brings setuptools 65, which cannot build an editable wheel: this one's is used.
    subprocess.run([venv / "bin" / "python", "-m", "pip", "uninstall", "-q", "-y", "setuptools"], check=True)
    (purelib / "zz_project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(
        PATH=f"{venv / 'bin'}:{env['PATH']}",
        VIRTUAL_ENV=str(venv),
        HOME=str(tmp / "home"),
        XDG_CACHE_HOME=str(tmp / "home" / ".cache"),
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",  # pip reads this one inverted: build in this environment
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return checkout, env


def run(line: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def test_quick_start_and_use_examples_run_as_written(clone):
    checkout, env = clone
    quick = bash_block("## Set up")
    assert quick == ['pip install -e . && kb ask "NCCL error(2) unhandled system error"']
    p = run(quick[0], checkout, env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "building the bundled knowledge base's index" in p.stderr
    assert re.search(r"Matches: .*Nccl error\(2\)", p.stdout, re.I) and "[1] " in p.stdout
    kb = shutil.which("kb", path=env["PATH"])
    assert kb is not None and kb.startswith(env["VIRTUAL_ENV"])  # the copy's own `kb`
    where = run("python -c 'import kb; print(kb.__file__)'", checkout, env).stdout
    assert where.startswith(str(checkout))

    use = bash_block("## Use")
    assert len(use) == 6
    out = [run(line, checkout, env) for line in use]
    for line, p in zip(use, out, strict=True):
        assert p.returncode == 0, f"{line}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}"
    ingest, search, ask, ask_json, stats, batch = (p.stdout for p in out)
    assert re.search(r"indexed 150 entries from 20 files into my-index", ingest)
    assert "1. HCCL" in search and "Init plugin so failed, ret = 1343225860" in search
    assert "Matches:" in ask and "Nccl error(2)" in ask and "No match" not in ask
    answer = json.loads(ask_json)
    assert answer["lang"] == "zh" and not answer["no_match"]
    assert re.search(r"^entries:\s+150 ", stats, re.M)
    rows = [json.loads(line) for line in batch.splitlines()]
    assert [r["id"] for r in rows] == ["q1", "q2", "q3"] and all(r["hits"] for r in rows)
    assert rows[2]["hits"][0]["title"].startswith("HCCL")


def test_the_pictures_the_readme_shows_come_from_the_script_not_the_tests():
    results = ROOT / "eval" / "results"
    wanted = {
        f"web_{state}_{size}{dark}.png"
        for state in ("empty", "answer", "panel")
        for size in ("desktop", "phone")
        for dark in ("", "_dark")
    }
    assert wanted <= {p.name for p in results.iterdir()}, "run python eval/screenshots.py"
    for picture in re.findall(r"^!\[[^\]]*\]\(([^)]+)\)", README, re.M):  # the pictures shown
        assert (ROOT / picture).is_file(), picture
    here = Path(__file__).name
    shots = [
        p.name for p in (ROOT / "tests").glob("*.py") if p.name != here and ".screenshot(" in p.read_text()
    ]
    assert shots == []
