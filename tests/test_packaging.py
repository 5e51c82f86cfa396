"""A fresh machine: declared imports, the package list, bundled recipes by name, the wheel outside
the checkout."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from cl_diag.errors import UserError
from cl_diag.recipes import bundled, locate, read_recipe, tomllib

ROOT = Path(__file__).resolve().parents[1]


def _check_imports():
    spec = importlib.util.spec_from_file_location(
        "check_imports", ROOT / "tools" / "check_imports.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _readme_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


def test_ci_runs_the_readme_test_command_verbatim():
    test_command = _readme_blocks()[1].strip()
    assert "pytest" in test_command and "\n" not in test_command
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()
    assert 'python_for 3.11)" -m venv .venv-ci' in ci  # a venv of its own, not the machine's Python


@pytest.mark.slow
def test_every_import_is_declared():
    assert _check_imports().problems(ROOT) == []


def test_import_check_catches_what_a_fresh_machine_lacks(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [project]
            name = "x"
            dependencies = ["numpy>=1.24"]
            [project.optional-dependencies]
            test = ["pytest"]
            """
        )
    )
    package = tmp_path / "cl_diag"
    package.mkdir()
    (package / "a.py").write_text(
        "import numpy\n"
        "import scipy.linalg\n"  # installed, not declared
        "import surely_not_installed_pkg\n"  # provided by nothing
        "import pytest\n"  # an extra's, at module level
        "def f():\n    import pytest\n"  # an extra's, inside a function: fine
    )
    found = _check_imports().problems(tmp_path)
    assert len(found) == 3, found
    assert any("a.py:2: imports scipy (from scipy)" in p for p in found)
    assert any(
        "a.py:3: imports surely_not_installed_pkg, which no installed distribution" in p
        for p in found
    )
    assert any("a.py:4: imports pytest" in p and "optional extra" in p for p in found)


def test_package_list_covers_every_subpackage_and_the_bundled_data():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    folders = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "cl_diag").rglob("__init__.py")
    }
    assert set(tool["packages"]) == folders | {"cl_diag.trainers", "cl_diag.probes"}
    assert tool["package-dir"] == {"cl_diag.trainers": "trainers", "cl_diag.probes": "probes"}


def test_bundled_recipes_and_probe_suites_are_the_checkout_files():
    recipes = bundled("recipe")
    assert set(recipes) == {p.stem for p in (ROOT / "trainers").glob("*.toml")}
    assert (
        recipes["simclr-vrn"].read_bytes() == (ROOT / "trainers" / "simclr-vrn.toml").read_bytes()
    )
    assert set(bundled("probe suite")) == {
        "quick",
        "full",
        "paper",
        "digits-study",
        "sigmoid-study",
        "vrn-weight",
    }


def test_recipe_names_resolve_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    expected = (ROOT / "trainers" / "dcl-vrn.toml").read_bytes()
    for spelling in ("dcl-vrn", "dcl-vrn.toml", "trainers/dcl-vrn.toml"):
        assert locate(spelling, "recipe").read_bytes() == expected
    assert (
        locate("quick", "probe suite").read_bytes() == (ROOT / "probes" / "quick.toml").read_bytes()
    )
    own = tmp_path / "dcl-vrn"  # a file of the user's wins over the bundled name
    own.write_text("loss = 'simclr'\n")
    assert locate("dcl-vrn", "recipe").read_text() == "loss = 'simclr'\n"
    with pytest.raises(
        UserError, match=r"neither a file nor a bundled recipe.*simclr-vrn.*cl-diag recipes"
    ):
        locate("nosuch", "recipe")
    with pytest.raises(UserError, match="bundled probe suite"):
        locate("elsewhere/quick.toml", "probe suite")


def test_recipe_by_name_through_the_cli(run_cli, tmp_path):
    listing = run_cli("recipes")
    assert listing.code == 0
    for name in (
        "simclr-vrn",
        "rebuttal-toy",
        "sigmoid-toy",
        "quick",
        "digits-study",
        "sigmoid-study",
    ):
        assert name in listing.out
    run = run_cli(
        "train", "--recipe", "rebuttal-toy", "--steps", "3", "--out", tmp_path / "toy", "--quiet"
    )
    assert run.code == 0, run.err
    assert (tmp_path / "toy" / "last.pt").is_file()
    both = run_cli("train", "rebuttal-toy", "--recipe", "simclr", "--out", tmp_path / "x")
    assert both.code == 2 and "Two recipes given" in both.err


def test_probe_suite_by_name_validates_like_a_path():
    import typer

    from cl_diag.cli import app

    analyze = typer.main.get_command(app).commands["analyze"]
    assert read_recipe("quick", analyze) == read_recipe(ROOT / "probes" / "quick.toml", analyze)


@pytest.mark.slow
def test_the_wheel_works_outside_the_checkout(tmp_path):
    """Build the wheel, install it alone into a new venv (dependencies borrowed from this one), run
    it elsewhere."""
    dist = tmp_path / "dist"
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            *isolation,
            "-w",
            str(dist),
            "-q",
        ],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = dist.glob("cl_diag-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    inner = Path(
        subprocess.run(
            [
                venv / "bin" / "python",
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # torch & co. come from this environment as a plain path (its .pth files, the editable
    # install of cl-diag among them, are not processed there), cl-diag only from the wheel
    (inner / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            "--ignore-installed",
            "-q",
            str(wheel),
        ],
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        check=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"

    def run(*args: str) -> str:
        done = subprocess.run(list(args), cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert run("python", "-c", "import cl_diag; print(cl_diag.__file__)").startswith(str(venv))
    assert "recipes" in run("cl-diag", "--help")
    assert "simclr-vrn" in run("cl-diag", "recipes")
    run("cl-diag", "train", "--recipe", "rebuttal-toy", "--out", "toy", "--quiet")
    run("cl-diag", "analyze", "toy/last.pt", "--out", "toy/analysis", "--quiet")
    run("cl-diag", "train", "--epochs", "1", "--out", "digits", "--quiet")
    run(
        "cl-diag",
        "analyze",
        "digits/last.pt",
        "--probe",
        "quick",
        "--out",
        "digits/analysis",
        "--quiet",
    )
    assert (work / "toy" / "analysis" / "report.html").stat().st_size > 0
    assert (work / "digits" / "analysis" / "result.json").stat().st_size > 0
