"""The settings registry against the code: every ``"lakefeed.…"`` key and ``LAKEFEED_…``
variable in lakefeed's source is declared in ``lakefeed.core.config``, so the configuration
reference generated from it lists everything the code reads."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lakefeed.core import config

PACKAGE = Path(config.__file__).resolve().parents[1]
KEY = re.compile(r"lakefeed\.[A-Za-z][A-Za-z0-9_.]*")
ENV = re.compile(r"\bLAKEFEED_[A-Z][A-Z0-9_]*")
# A table of old module names to new ones (names, not settings).
NOT_SETTINGS = {PACKAGE / "moved.py"}


def _is_module(name: str) -> bool:
    """``lakefeed.a.b`` names a module or package of lakefeed (an import, a logger's name)."""
    path = PACKAGE.parent.joinpath(*name.rstrip(".").split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _logger_names(tree: ast.AST) -> set[int]:
    """ids of the string nodes given to ``getLogger`` / ``get_logger``: logger names."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("getLogger", "get_logger"):
                found.add(id(node.args[0]))
    return found


def found_in(path: Path) -> tuple[set[str], set[str]]:
    """The ``lakefeed.…`` keys (whole string literals) and ``LAKEFEED_…`` names in a module."""
    tree = ast.parse(path.read_text(), str(path))
    loggers = _logger_names(tree)
    keys, envs = set(), set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        envs.update(ENV.findall(node.value))
        if KEY.fullmatch(node.value) and id(node) not in loggers and not _is_module(node.value):
            keys.add(node.value)
    return keys, envs


def sources() -> list[Path]:
    return [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if p not in NOT_SETTINGS and "examples" not in p.relative_to(PACKAGE).parts[:1]
    ]


def test_every_key_and_variable_in_the_code_is_declared() -> None:
    undeclared = []
    for path in sources():
        keys, envs = found_in(path)
        where = path.relative_to(PACKAGE.parent)
        missing = sorted(n for n in keys | envs if not config.registered(n))
        undeclared += [f"{where}: {name}" for name in missing]
    assert undeclared == [], "declare these in lakefeed/core/config.py"


def test_the_scan_finds_keys_and_skips_module_and_logger_names(tmp_path: Path) -> None:
    module = tmp_path / "reader.py"
    module.write_text(
        'KEY = "lakefeed.someNewKey"\n'
        'log = logging.getLogger("lakefeed.kafka.sink")\n'
        'MOD = "lakefeed.core.errors"\n'
        'HELP = "the token (env LAKEFEED_NEW_TOKEN)"\n'
        'TEXT = "lakefeed.writer=python is for tests"\n'
    )
    assert found_in(module) == ({"lakefeed.someNewKey"}, {"LAKEFEED_NEW_TOKEN"})
    assert not config.registered("lakefeed.someNewKey")
    assert config.registered("lakefeed.state.")  # a prefix of declared keys
    assert config.registered(config.UI_TOKEN_ENV.key)


def test_a_setting_is_declared_once() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        config._add(config.LAKEHOUSE.key, config.Kind.SPARK, "path", "again")


def test_every_setting_says_what_it_means() -> None:
    assert all(s.meaning and s.key for s in config.SETTINGS.values())
    assert {s.kind for s in config.SETTINGS.values()} == set(config.Kind)
