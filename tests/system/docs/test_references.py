"""The docs site's references are generated from the code; these checks keep them whole.

Spark-free: they import lakefeed's modules (as the site build does) but start no JVM.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

import lakefeed
from lakefeed.cli.main import cli

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    """docs/hooks/reference.py, the mkdocs hook that renders the generated tables."""
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _commands(command: click.Command, path: str) -> list[tuple[str, click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += _commands(sub, f"{path} {name}")
    return found


def _options(command: click.Command, path: str) -> list[tuple[str, click.Option]]:
    commands = _commands(command, path)
    return [(at, p) for at, c in commands for p in c.params if isinstance(p, click.Option)]


def test_every_cli_option_has_help_text() -> None:
    """The CLI reference is generated from the click definitions: an option without help would
    show an empty description there and in --help."""
    missing = [f"{path} {opt.opts[0]}" for path, opt in _options(cli, "lakefeed") if not opt.help]
    assert missing == []


def test_every_cli_command_says_what_it_does() -> None:
    """The CLI reference shows each command's docstring as its description."""
    assert [path for path, c in _commands(cli, "lakefeed") if not c.help] == []


def test_commands_a_scheduler_runs_say_their_exit_codes() -> None:
    """Schedulers branch on these commands' exit codes: the CLI reference (their help) says
    them, as the scheduling how-to's table does."""
    helps = {name: cli.commands[name].help or "" for name in ("run", "validate", "plan", "verify")}
    silent = [name for name, text in helps.items() if "Exits" not in text]
    assert silent == []


def test_python_reference_documents_every_public_name() -> None:
    page = (DOCS / "reference" / "python.md").read_text()
    documented = {line.split(".")[-1] for line in re.findall(r"^::: (\S+)", page, re.M)}
    assert sorted(set(lakefeed.__all__) - documented) == []


def test_every_public_name_has_a_docstring() -> None:
    """mkdocstrings renders the docstring: without one a name shows only its signature."""
    assert [n for n in lakefeed.__all__ if not inspect.getdoc(getattr(lakefeed, n))] == []


def test_error_reference_lists_every_registered_code(hook: ModuleType) -> None:
    page = hook.render()
    codes = hook.registry()
    assert len(codes) > 50  # every module was imported, so every area's codes are there
    missing = [code for code in codes if f"\n### {code}\n" not in page]
    assert missing == []


def test_error_reference_reads_a_codes_fix_and_kind_from_the_raise_site(
    hook: ModuleType, tmp_path: Path
) -> None:
    """A code raised with ``code=NAME`` is found through ``NAME = register_code(...)``; its
    message and ``fix=`` are on the page, and a transient class shows as retried. (Stand-in
    classes: a real subclass would join the process-wide registry.)"""
    flaky = type("_Flaky", (), {"code": "DOCS_TEST_FLAKY", "permanent": False})
    other = type("_Other", (), {"permanent": True})

    source = tmp_path / "raiser.py"
    source.write_text(
        'OTHER = register_code("DOCS_TEST_OTHER", ConfigError)\n'
        "def f(x):\n"
        '    raise ConfigError(f"bad {x} value", fix="give a good one", code=OTHER)\n'
        "def g():\n"
        '    raise _Flaky("went away")\n'
    )
    scan = hook._Source({"DOCS_TEST_FLAKY": flaky, "DOCS_TEST_OTHER": other})
    scan.scan(source)
    assert scan.messages["DOCS_TEST_OTHER"] == ["bad … value"]
    assert scan.fixes["DOCS_TEST_OTHER"] == ["give a good one"]
    assert scan.messages["DOCS_TEST_FLAKY"] == ["went away"]
    assert not hook.Code("DOCS_TEST_FLAKY", flaky).permanent
    assert "*transient: retried" in hook.section(hook.Code("DOCS_TEST_FLAKY", flaky))


def test_error_reference_reads_fixes_given_through_a_helper_or_a_concatenation(
    hook: ModuleType, tmp_path: Path
) -> None:
    """A code raised by a helper (``_refuse(what, fix)``, ``problem(message, fix, code)``) gets
    the fix each caller gives; a message or fix built with ``+`` or wrapped in a call shows its
    text with ``…`` for what is computed."""
    flaky = type("_Flaky", (), {"code": "DOCS_TEST_FLAKY", "permanent": False})
    source = tmp_path / "raiser.py"
    source.write_text(
        'OTHER = register_code("DOCS_TEST_OTHER", ConfigError)\n'
        "def _refuse(what, fix):\n"
        '    raise _Flaky(f"{what} is not here", fix=fix)\n'
        "def problem(message, fix, code):\n"
        "    return registered()[code](message, fix=fix, code=code)\n"
        "def f(names):\n"
        '    _refuse("the thing", "bring it")\n'
        '    problem("bad", fix="make it " + ", ".join(names) + " again", code=OTHER)\n'
        '    raise ConfigError(scrub(f"lost {names}"), code=OTHER)\n'
        '    raise ConfigError(", ".join(names), fix=compute(names), code=OTHER)\n'
        '    raise ConfigError("either", fix="pick one",\n'
        '                      code=OTHER if names else "DOCS_TEST_FLAKY")\n'
    )
    scan = hook._Source({"DOCS_TEST_FLAKY": flaky, "DOCS_TEST_OTHER": object})
    scan.scan(source)
    assert scan.fixes["DOCS_TEST_FLAKY"] == ["bring it", "pick one"]
    assert scan.messages["DOCS_TEST_FLAKY"] == ["… is not here", "either"]  # not `what`
    assert scan.fixes["DOCS_TEST_OTHER"] == ["make it … again", "pick one"]
    assert scan.messages["DOCS_TEST_OTHER"] == ["bad", "lost …", "either"]


def test_a_base_code_nothing_raises_names_its_family(hook: ModuleType) -> None:
    """A base class's own code (``SOURCE``) is raised only as its subclasses' codes: its section
    links them; a code that only shares a class with others has no family."""
    from lakefeed.core.errors import ConfigError, OptionError

    base = type("_Base", (), {"code": "DOCS_BASE", "permanent": True})
    kid = type("_Kid", (base,), {"code": "DOCS_KID"})
    items = [hook.Code("DOCS_BASE", base), hook.Code("DOCS_KID", kid)]
    assert hook._family(items[0], items) == ["DOCS_KID"]
    assert "Raised as one of its own kinds: [`DOCS_KID`](#docs_kid)." in hook.section(
        items[0], ["DOCS_KID"]
    )
    shared = [hook.Code("DOCS_A", ConfigError), hook.Code("DOCS_B", OptionError)]
    assert hook._family(shared[0], shared) == []


def test_compat_patch_table_lists_every_patch(hook: ModuleType) -> None:
    from lakefeed.compat.patches import PATCHES

    table = hook.render_patches()
    assert len(table.splitlines()) == len(PATCHES) + 2


def test_readme_is_short_and_keeps_the_quick_start() -> None:
    """The README is read in two minutes; CI (.ci/run) runs the test command it gives."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "./dev demo     # installs into .venv" in readme
    assert "./dev test     # installs into .venv" in readme
    for target in re.findall(r"\]\(((?:docs/|CHANGELOG)[^)#]*)", readme):
        assert (ROOT / target).exists(), target


def test_event_log_page_describes_every_column(hook: ModuleType) -> None:
    from lakefeed.runtime.event_log import EVENT_SCHEMA, EVENT_TYPES

    assert set(hook.EVENT_COLUMNS) == set(EVENT_SCHEMA.names)
    page = hook.render_event_log()
    assert all(f"`{t}`" in page for t in EVENT_TYPES)


def test_delta_feature_table_lists_supported_and_refused_features(hook: ModuleType) -> None:
    from lakefeed.delta.properties import FEATURES, REFUSED

    page = hook.render_features()
    assert all(f"| `{name}` | supported |" in page for name in FEATURES)
    assert all(f"| `{name}` | refused |" in page for name in REFUSED)


def test_every_marker_on_a_page_is_rendered(hook: ModuleType) -> None:
    """A marker no renderer knows would reach readers as an empty spot."""
    used = {
        m for page in DOCS.rglob("*.md") for m in re.findall(r"<!-- [a-z-]+ -->", page.read_text())
    } - {"<!-- clear-namespace -->"}  # a directive of the examples' runner (run_pages.py)
    assert used <= set(hook.RENDERERS)
    assert set(hook.RENDERERS) <= used


def test_versions_table_names_the_pinned_engines(hook: ModuleType) -> None:
    table = hook.render_versions()
    assert "| pyspark | ==4.3.0 | 4.3.0 |" in table
    assert "| deltalake | ==1.6.6 | 1.6.6 |" in table
    assert "| Java (a JDK) | 17 or 21 | 17 |" in table
    assert "| sqlglot | >=30.0,<31 | 30." in table  # extras dropped from the name


def test_changelog_names_the_package_version() -> None:
    """Keep a Changelog: the newest released section is the version the wheel and --version
    carry."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.M)
    assert released and released[0] == lakefeed.__version__


def test_configuration_reference_lists_every_setting(hook: ModuleType) -> None:
    from lakefeed.core.config import SETTINGS, Kind

    page = hook.render_configuration()
    assert all(f"| `{key}` |" in page for key in SETTINGS)
    assert all(f"## {kind.value}\n" in page for kind in Kind)


def test_the_tests_run_on_the_java_the_docs_name(spark) -> None:  # noqa: ANN001
    """The version table's "tested with" Java is the JDK this suite (and so CI) runs on."""
    import tomllib

    java = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["lakefeed"]["java"]
    running = spark._jvm.java.lang.System.getProperty("java.specification.version")
    assert running == java["tested"]


def test_validate_json_page_names_every_key_of_the_document() -> None:
    """reference/validate-json.md is written by hand: each key ``to_dict`` puts in the document,
    at the top, in a dataset and in a flow, has a row in that part of the page, and each row
    names keys the document has there (a key added to the code without a row, or a row left
    for a key the code dropped, fails here)."""
    from lakefeed.pipeline.kinds import DatasetKind
    from lakefeed.runtime.results import DatasetInfo, FlowInfo, SinkInfo, ValidationResult

    sink = DatasetInfo("out", DatasetKind.SINK, "f.py:1", sink=SinkInfo("kafka", "Kafka topic t"))
    flow = FlowInfo("out", DatasetKind.SINK, "append", True, False, False)
    document = ValidationResult("p", datasets=(sink,), flows=(flow,)).to_dict()
    page = (DOCS / "reference" / "validate-json.md").read_text()
    top, datasets, flows = re.split(r"^A (?:dataset|flow):$", page, flags=re.M)
    parts = ((top, document), (datasets, document["datasets"][0]), (flows, document["flows"][0]))
    missing = [key for text, keys in parts for key in keys if f"`{key}`" not in text]
    assert missing == []
    first_cells = [(re.findall(r"^\| (.*?) \|", text, re.M)[2:], keys) for text, keys in parts]
    stale = [k for cells, keys in first_cells for c in cells for k in _names(c) if k not in keys]
    assert stale == []


def _names(cell: str) -> list[str]:
    """The backticked keys of a table cell."""
    return re.findall(r"`(\w+)`", cell)


DOTTED = re.compile(r"(?<![\w/-])((?:dev\.)?lakefeed(?:\.[A-Za-z_]\w*)+)")
NOT_NAMES = {"lakefeed.zip"}  # a file: `--py-files lakefeed.zip`


def _resolves(name: str) -> bool:
    """``lakefeed.a.b``: a module, or an attribute of one (a class, a function)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                found = getattr(found, attribute)
        except AttributeError:
            return False
        return True
    return False


def _logger_names() -> set[str]:
    """The names lakefeed's code gives ``getLogger`` / ``get_logger`` as literals."""
    names = set()
    for path in (ROOT / "lakefeed").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in ("getLogger", "get_logger"):
                    names.add(str(node.args[0].value))
    return names


def test_every_dotted_lakefeed_name_in_the_docs_exists() -> None:
    """A module, class, logger, setting or JVM class named on a page exists under that name: a
    reader filters logs, imports or sets what the page says (a module that moved left its old
    name on pages before)."""
    from lakefeed.core.config import registered

    loggers = _logger_names()
    java = ROOT / "lakefeed" / "spark" / "jvm" / "java"
    pages = [ROOT / "README.md", *(p for p in DOCS.rglob("*.md") if p.name != "benchmarks.md")]
    stale = []
    for page in pages:
        for name in set(DOTTED.findall(page.read_text())) - NOT_NAMES:
            if name.startswith("dev."):
                known = java.joinpath(*name.split(".")).with_suffix(".java").exists()
            else:
                known = name in loggers or registered(name) or registered(name + ".")
                known = known or _resolves(name)
            if not known:
                stale.append(f"{page.relative_to(ROOT)}: {name}")
    assert stale == []


def test_the_tutorial_lists_the_files_lakefeed_init_writes(tmp_path: Path) -> None:
    """The tutorial's first table is what `lakefeed init` makes, file for file."""
    from lakefeed.scaffold import create_project

    project = create_project(str(tmp_path / "my_pipeline"))
    made = {str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()}
    page = (DOCS / "get-started" / "tutorial.md").read_text()
    table = page.split("| File | What it is |", 1)[1].split("\n\n", 1)[0]
    cells = re.findall(r"^\| (.*?) \|", table, re.M)
    listed = {name for cell in cells for name in re.findall(r"`([^`]+)`", cell)}
    assert listed == made
