"""The package says what it is once: one version string, and every import a declared dependency."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from click.testing import CliRunner
from setuptools.config.pyprojecttoml import read_configuration

import lakefeed
from lakefeed.cli.main import cli

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = ROOT / "pyproject.toml"


@pytest.mark.filterwarnings("ignore::UserWarning")  # setuptools calls its reader "beta"
def test_the_build_reads_the_version_from_the_package() -> None:
    project = read_configuration(PYPROJECT, expand=True)["project"]
    assert "version" not in tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["version"] == lakefeed.__version__


def test_lakefeed_version_prints_it() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"lakefeed, version {lakefeed.__version__}"


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for file in (ROOT / "lakefeed").rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"lakefeed", "__future__"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def _declared() -> set[str]:
    """The dependencies, and the extras a feature asks for (``lakefeed[postgres]``)."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    extras = project.get("optional-dependencies", {})
    requirements = project["dependencies"] + [
        r for name, group in extras.items() if name != "dev" for r in group
    ]
    return {_normal(re.split(r"[\s<>=!~\[;]", r, maxsplit=1)[0]) for r in requirements}


def test_every_imported_package_is_a_declared_dependency() -> None:
    distributions = packages_distributions()
    missing = {
        module: distributions.get(module, [module])
        for module in _imported_top_levels()
        if not {_normal(d) for d in distributions.get(module, [module])} & _declared()
    }
    assert missing == {}, f"imported but not in pyproject dependencies: {missing}"
