"""The version: one number in pyproject.toml, read back by pgjax.__version__ and the CLI."""
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import pgjax
from pgjax.cli import main

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_package_version_is_pyprojects():
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    assert pgjax.__version__ == declared
    assert re.fullmatch(r"\d+\.\d+\.\d+", declared)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_flag_prints_it_and_exits_0(flag, capsys):
    assert main([flag]) == 0
    out = capsys.readouterr()
    assert out.out == f"pgjax {pgjax.__version__}\n" and out.err == ""


def test_version_flag_of_the_installed_command():
    done = subprocess.run([sys.executable, "-m", "pgjax.cli", "--version"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"pgjax {pgjax.__version__}\n"


def test_records_carry_the_version():
    from pgjax.loop.records import _versions

    assert _versions()["pgjax"] == pgjax.__version__
