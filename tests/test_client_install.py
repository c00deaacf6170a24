"""The Python client as its own distribution (``clients/python``, ``memsys-client``): it needs httpx, pydantic and
tqdm only, and a folder named ``memsys`` in the current directory (a checkout of this repository, run from the
folder above it) cannot hide it, installed as a wheel or editable."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "clients" / "python"


def test_the_client_depends_on_httpx_pydantic_and_tqdm_and_its_integrations_are_extras() -> None:
    requirements = metadata.requires("memsys-client") or []
    needed = sorted(r.split(">")[0] for r in requirements if "extra ==" not in r)
    extras = {r.split(";")[1].split("==")[1].strip().strip("'\"") for r in requirements if "extra ==" in r}
    assert needed == ["httpx", "pydantic", "tqdm"]
    assert extras == {"langchain", "langgraph", "llamaindex", "pydantic-ai"}


@pytest.mark.parametrize("editable", [False, True], ids=["wheel", "editable"])
def test_a_folder_named_memsys_in_the_current_directory_does_not_hide_the_client(
    tmp_path: Path, editable: bool
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    target = ["-e", str(CLIENT)] if editable else [str(CLIENT)]
    install = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--quiet", *target], capture_output=True, text=True, timeout=300
    )
    assert install.returncode == 0, install.stderr

    above_a_checkout = tmp_path / "src"
    (above_a_checkout / "memsys" / "clients").mkdir(parents=True)  # a clone named memsys: no __init__.py
    run = subprocess.run(
        [python, "-c", "import memsys; from memsys import Memsys; print(memsys.__file__)"],
        cwd=above_a_checkout,
        env={"PYTHONPATH": sysconfig.get_path("purelib")},  # httpx, pydantic and tqdm: this environment's
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    found = Path(run.stdout.strip())
    assert found == CLIENT / "memsys" / "__init__.py" if editable else found.parent.parent.parent.parent.parent == venv
