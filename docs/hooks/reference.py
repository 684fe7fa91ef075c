"""References generated from the code when the site is built (a mkdocs hook).

Each marker in a page becomes a table made from the code:

- ``<!-- error-codes -->``: the error-code reference (below);
- ``<!-- compat-patches -->``: the pyspark methods lakefeed's compatibility module wraps
  (``lakefeed.compat.patches.PATCHES``);
- ``<!-- delta-features -->``: the Delta table features lakefeed keeps working with or refuses
  (``lakefeed.delta.properties.FEATURES`` / ``REFUSED``);
- ``<!-- event-log-schema -->``: the event log's columns and event types
  (``lakefeed.runtime.event_log.EVENT_SCHEMA`` / ``EVENT_TYPES``);
- ``<!-- versions -->``: the Python, Java and package versions lakefeed supports and was tested
  with (``pyproject.toml``, the installed packages);
- ``<!-- configuration -->``: every setting lakefeed reads (``lakefeed.core.config.SETTINGS``);
- ``<!-- performance-results -->`` / ``<!-- performance-commands -->``: the benchmarks' headline
  table and the commands that reproduce it, from ``bench/results/*.json``.
- ``<!-- compat-api -->``: DLT's and SDP's functions and arguments on lakefeed
  (``lakefeed.compat.features.FEATURES``).

The site's name carries ``lakefeed.__version__`` (``on_config``), the version ``lakefeed
--version`` prints and the wheel is built with.

The error codes:

The codes, their classes and whether each is permanent come from ``lakefeed.core.errors``'s registry
(``registered()``) after importing every lakefeed module (each area registers its codes once, in
its ``errors.py``). What a code means comes from the registry too (``description()``: the
description given to ``register_code``, or the docstring of the class that defines the code); how
to fix it from the source itself: the message and ``fix=`` text of the places that raise it (read
with ``ast``, never executed; ``code=NAME`` is resolved through the module's own namespace). So
the page cannot drift from the code: a new code appears at the next build, a code that nothing
describes (no description, no class of its own, no raise site with a message) fails the build,
and a test checks that every registered code is on the page.

"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ERRORS_MARKER = "<!-- error-codes -->"
PATCHES_MARKER = "<!-- compat-patches -->"
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lakefeed", "delta")
SKIP = ("lakefeed.examples",)  # user pipelines shipped as package data


@dataclass
class Code:
    """One error code as the reference shows it."""

    code: str
    cls: type
    messages: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    description: str | None = None  # the registry's (see the module), if it has one

    @property
    def permanent(self) -> bool:
        return bool(self.cls.permanent)


def registry() -> dict[str, type]:
    """Every registered code to its class, after importing every module that may register one."""
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f"{package}."):
            if not info.name.startswith(SKIP):
                importlib.import_module(info.name)
    from lakefeed.core import errors

    return errors.registered()


def _template(node: ast.expr | None) -> str | None:
    """A string literal or f-string as text, each ``{...}`` part shown as ``…``; in a ``+``
    concatenation any other expression is a ``…`` part too, a call wrapping a text
    (``scrub(f"...")``) shows that text, and a call of a module function that returns one
    (``_refresh_fix(...)``, see :func:`_texts`) shows what it returns. None when no literal
    text is left to show."""
    text = _text(node, inside=False)
    return text if text is not None and re.search(r"[A-Za-z]", text) else None


def _text(node: ast.expr | None, inside: bool) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = [v.value if isinstance(v, ast.Constant) else "…" for v in node.values]
        return "".join(str(p) for p in parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, inside=True), _text(node.right, inside=True)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and GLOBAL_TEXTS.get(_call_name(node) or ""):
        return GLOBAL_TEXTS[_call_name(node) or ""]  # a function that writes the text
    wrapper = isinstance(node, ast.Call) and node.args and not _on_literal(node)
    if wrapper and isinstance(node, ast.Call):
        return _text(node.args[0], inside)
    return "…" if inside and node is not None else None


def _on_literal(node: ast.Call) -> bool:
    """``"; ".join(...)``, ``"{}".format(...)``: a method of a string, not a wrapper of one."""
    func = node.func
    return isinstance(func, ast.Attribute) and isinstance(func.value, (ast.Constant, ast.JoinedStr))


@dataclass(frozen=True)
class _Helper:
    """A function that raises a code with the message and fix it is given
    (``_refuse(what, fix)``, ``problem(message, fix, code)``): calls to it are raise sites."""

    params: tuple[str, ...]
    code: str | None  # None: its ``code`` parameter names the code

    def bind(self, call: ast.Call) -> dict[str, ast.expr]:
        bound = dict(zip(self.params, call.args, strict=False))
        return bound | {k.arg: k.value for k in call.keywords if k.arg}


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


class _Source:
    """Raise sites found in the source: code -> message and fix templates."""

    def __init__(self, classes: dict[str, type]) -> None:
        self.registered = classes
        self.class_codes = {
            cls.__name__: code for code, cls in classes.items() if cls.__dict__.get("code") == code
        }
        self.messages: dict[str, list[str]] = defaultdict(list)
        self.fixes: dict[str, list[str]] = defaultdict(list)

    def names(self, path: Path, tree: ast.Module) -> dict[str, str]:
        """The module's names bound to codes: its own ``register_code`` results, imported ones."""
        return {**self._imported_codes(path), **self._code_names(tree)}

    def scan(self, path: Path) -> None:
        tree = ast.parse(path.read_text(), str(path))
        names = self.names(path, tree)
        helpers = {**{n: h for n, h in GLOBAL_HELPERS.items() if h}, **self.helpers(tree, names)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                self._call(node, names, helpers)

    def helpers(self, tree: ast.Module, names: dict[str, str]) -> dict[str, _Helper]:
        """The module's functions that raise a code with a ``fix`` parameter as the fix."""
        found = {}
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            params = tuple(a.arg for a in node.args.args)
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                passed = {k.arg: k.value for k in call.keywords if k.arg}
                fix, given = passed.get("fix"), passed.get("code")
                if not (isinstance(fix, ast.Name) and fix.id == "fix" and "fix" in params):
                    continue
                if isinstance(given, ast.Name) and given.id in params:
                    found[node.name] = _Helper(params, None)
                elif len(codes := self._codes(call, given, names)) == 1:
                    found[node.name] = _Helper(params, codes[0])
        return found

    def _imported_codes(self, path: Path) -> dict[str, str]:
        """The module's names bound to a registered code (an area's ``errors.py`` registers it,
        the raising module imports it, maybe under another name), read from the imported
        module; none for a file outside the packages."""
        try:
            parts = path.resolve().relative_to(ROOT).with_suffix("").parts
        except ValueError:
            return {}
        module = sys.modules.get(".".join(p for p in parts if p != "__init__"))
        namespace = vars(module) if module is not None else {}
        codes = set(self.registered)
        return {n: v for n, v in namespace.items() if isinstance(v, str) and v in codes}

    @staticmethod
    def _code_names(tree: ast.Module) -> dict[str, str]:
        """``NAME = register_code("CODE", ...)`` in this module (and codes in kin modules are
        usually imported under the same name, resolved by :func:`_global_names`)."""
        found: dict[str, str] = {}
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and _call_name(node.value) == "register_code"
                and node.value.args
                and isinstance(node.value.args[0], ast.Constant)
            ):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = str(node.value.args[0].value)
        return found

    def _codes(self, call: ast.Call, given: ast.expr | None, names: dict[str, str]) -> list[str]:
        """The codes a call raises: its ``code=`` (a literal, a name bound to a code, or ``A if
        ... else B``), else the code of the class it instantiates."""
        if isinstance(given, ast.IfExp):
            return self._codes(call, given.body, names) + self._codes(call, given.orelse, names)
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            return [given.value]
        if isinstance(given, ast.Name):
            code = names.get(given.id) or GLOBAL_NAMES.get(given.id)
            return [code] if code else []
        code = self.class_codes.get(_call_name(call) or "") if given is None else None
        return [code] if code else []

    def _call(self, node: ast.Call, names: dict[str, str], helpers: dict[str, _Helper]) -> None:
        helper = helpers.get(_call_name(node) or "")
        if helper is not None:
            bound = helper.bind(node)
            codes = [helper.code] if helper.code else self._codes(node, bound.get("code"), names)
            message, fix = bound.get("message"), bound.get("fix")
        else:
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            codes = self._codes(node, keywords.get("code"), names)
            message = node.args[0] if node.args else keywords.get("message")
            fix = keywords.get("fix")
        for code in codes:
            self._add(self.messages[code], _template(message))
            self._add(self.fixes[code], _template(fix))

    @staticmethod
    def _add(texts: list[str], text: str | None) -> None:
        if text and text not in texts:
            texts.append(text)


GLOBAL_NAMES: dict[str, str] = {}
GLOBAL_HELPERS: dict[str, _Helper | None] = {}  # None: a name two modules define differently
GLOBAL_TEXTS: dict[str, str] = {}  # function name -> the text it returns ("" if ambiguous)


def _texts(tree: ast.Module) -> dict[str, str]:
    """The module's functions whose body ends in returning a text: message and fix writers."""
    found = {}
    for node in tree.body:
        last = node.body[-1] if isinstance(node, ast.FunctionDef) else None
        text = _template(last.value) if isinstance(last, ast.Return) else None
        if isinstance(node, ast.FunctionDef) and text:
            found[node.name] = text
    return found


def _sources() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "examples" not in path.relative_to(ROOT).parts[:2]
    ]


def codes() -> list[Code]:
    """Every registered code with what the registry and the source say about it, sorted by
    code; a code nothing describes fails the build."""
    from lakefeed.core import errors

    classes = registry()
    source = _Source(classes)
    paths = _sources()
    trees = {path: ast.parse(path.read_text()) for path in paths}
    for tree in trees.values():  # names that modules import from each other: unique ones only
        for name, code in source._code_names(tree).items():
            GLOBAL_NAMES[name] = code if GLOBAL_NAMES.get(name, code) == code else ""
    for tree in trees.values():
        for name, text in _texts(tree).items():
            GLOBAL_TEXTS[name] = text if GLOBAL_TEXTS.get(name, text) == text else ""
    for path, tree in trees.items():
        for name, helper in source.helpers(tree, source.names(path, tree)).items():
            GLOBAL_HELPERS[name] = helper if GLOBAL_HELPERS.get(name, helper) == helper else None
    for path in paths:
        source.scan(path)
    found = [
        Code(
            code,
            cls,
            source.messages.get(code, []),
            source.fixes.get(code, []),
            errors.description(code),
        )
        for code, cls in sorted(classes.items())
    ]
    undescribed = [c.code for c in found if not c.description and not c.messages]
    if undescribed:
        raise ValueError(
            f"error codes without a description: {', '.join(undescribed)}; give each one "
            "(register_code(..., description=...)) or raise it with a message"
        )
    return found


_RST_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def _meaning(item: Code) -> str:
    """The code's description, else its class's docstring: the first paragraph, its reST roles
    and literals as Markdown."""
    doc = item.description or inspect.getdoc(item.cls) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    return _RST_ROLE.sub(r"`\1`", text).replace("``", "`")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


FAMILY_SHOWN = 12


def section(item: Code, family: Sequence[str] = ()) -> str:
    """One code as a short section: its heading (an anchor to link), kind, meaning, fix; a code
    no place raises by itself (a base class's) names the codes its family is raised with."""
    kind = "permanent" if item.permanent else "transient: retried with backoff"
    lines = [f"### {item.code}", "", f"*{kind}* · `{item.cls.__name__}` · {_meaning(item)}", ""]
    if family and not item.messages and not item.fixes:
        named = ", ".join(f"[`{c}`](#{c.lower()})" for c in family[:FAMILY_SHOWN])
        more = f" and {len(family) - FAMILY_SHOWN} more" if len(family) > FAMILY_SHOWN else ""
        lines += [f"Raised as one of its own kinds: {named}{more}.", ""]
    if item.messages:
        lines += ["Says, e.g.:", ""] + [f"- “{_cell(m)}”" for m in item.messages[:3]] + [""]
    if item.fixes:
        lines += ["**Fix:** " + "; ".join(_cell(f) for f in item.fixes[:3]), ""]
    return "\n".join(lines)


def render() -> str:
    """The reference as Markdown: an index table, then a section per code."""
    items = codes()
    index = ["| code | retry? |", "| --- | --- |"] + [
        f"| [`{i.code}`](#{i.code.lower()}) | {'permanent' if i.permanent else '**transient**'} |"
        for i in items
    ]
    return "\n".join(index) + "\n\n" + "\n".join(section(i, _family(i, items)) for i in items)


def _family(item: Code, items: list[Code]) -> list[str]:
    """The other codes raised with a subclass of the class ``item`` is the own code of (none for
    a code registered to a class that has its own: it is a sibling, not a family)."""
    if item.cls.__dict__.get("code") != item.code:
        return []
    return [i.code for i in items if i is not item and issubclass(i.cls, item.cls)]


def render_patches() -> str:
    """The patch table as Markdown: class or module, attribute, why, who puts it in."""
    from lakefeed.compat.patches import PATCHES

    lines = [
        "| pyspark class or module | attribute | why lakefeed patches it | put in by |",
        "| --- | --- | --- | --- |",
    ]
    for patch in PATCHES:
        lines.append(
            f"| `{patch.cls.__name__}` | `{patch.method}` | {_cell(patch.why)} | `{patch.by}` |"
        )
    return "\n".join(lines) + "\n"


def render_features() -> str:
    """Delta table features: the ones lakefeed can add and keep writing, the ones it refuses."""
    from lakefeed.delta.properties import FEATURES, REFUSED

    lines = ["| table feature | on lakefeed | why |", "| --- | --- | --- |"]
    lines += [
        f"| `{name}` | supported | read and written; `addFeatureSupport` adds it |"
        for name in FEATURES
    ]
    lines += [f"| `{name}` | refused | {_cell(why)} |" for name, why in REFUSED.items()]
    return "\n".join(lines) + "\n"


# What each event-log column holds; a test checks these are exactly the schema's columns.
EVENT_COLUMNS = {
    "event_id": "unique id of the event",
    "timestamp": "when it happened",
    "pipeline": "the pipeline's name",
    "run_id": "the run that wrote it",
    "flow": "the flow, for flow events",
    "event_type": "one of the event types below",
    "level": "`INFO`, `WARN` or `ERROR`",
    "message": "one line for people (secrets masked)",
    "details": "a JSON object with the event's figures (secrets masked)",
}


def render_event_log() -> str:
    """The event log's columns (from its Arrow schema) and its event types."""
    from lakefeed.runtime.event_log import EVENT_SCHEMA, EVENT_TYPES

    lines = ["| column | type | null? | meaning |", "| --- | --- | --- | --- |"]
    for f in EVENT_SCHEMA:
        null = "nullable" if f.nullable else "never null"
        lines.append(f"| `{f.name}` | {f.type} | {null} | {EVENT_COLUMNS.get(f.name, '')} |")
    types = ", ".join(f"`{t}`" for t in sorted(EVENT_TYPES))
    return "\n".join(lines) + f"\n\nEvent types: {types}.\n"


def render_versions() -> str:
    """What lakefeed supports (pyproject.toml: its requirements, and ``[tool.lakefeed] java``)
    and what this build was tested with: the versions installed where the site is built, which
    are the ones CI installs and runs the tests on."""
    import platform
    import tomllib
    from importlib.metadata import PackageNotFoundError, version

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project, java = pyproject["project"], pyproject["tool"]["lakefeed"]["java"]
    lines = ["| requirement | supported | tested with |", "| --- | --- | --- |"]
    lines.append(f"| Python | {project['requires-python']} | {platform.python_version()} |")
    lines.append(f"| Java (a JDK) | {java['supported']} | {java['tested']} |")
    for dependency in project["dependencies"]:
        match = re.match(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?(.*)", dependency)
        assert match is not None
        name, _, spec = match.groups()
        try:
            tested = version(name)
        except PackageNotFoundError:
            tested = "—"
        lines.append(f"| {name} | {spec or 'any'} | {tested} |")
    return "\n".join(lines) + "\n"


def _setting_row(setting: Any) -> str:
    """One setting as a table row; its docs page linked from reference/configuration.md."""
    meaning = _cell(setting.meaning)
    if setting.doc:
        meaning += f" ([more](../{setting.doc}))"
    default = _cell(setting.default) if setting.default else "—"
    return f"| `{setting.key}` | {_cell(setting.type) or '—'} | {default} | {meaning} |"


def render_configuration() -> str:
    """The settings registry as one section per kind (where a setting is given)."""
    from lakefeed.core.config import SETTINGS, Kind

    sections = []
    for kind in Kind:
        rows = [_setting_row(s) for s in SETTINGS.values() if s.kind is kind]
        table = ["| key | type | default | meaning |", "| --- | --- | --- | --- |", *rows]
        sections.append(f"## {kind.value}\n\n" + "\n".join(table) + "\n")
    return "\n".join(sections)


def _bench_results() -> Any:
    """``bench/results.py`` (bench/ is a folder of scripts at the root, not installed)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import results

    return results


def render_performance() -> str:
    """The headline table from the benchmarks' result files."""
    results = _bench_results()
    return str(results.table(results.load()))


def render_performance_commands() -> str:
    """The commands that reproduce the table, from the same files."""
    results = _bench_results()
    return str(results.commands(results.load()))


def render_compat_api() -> str:
    """DLT's and SDP's API on lakefeed, one row per function and argument
    (``lakefeed.compat.features.FEATURES``)."""
    from lakefeed.compat.features import FEATURES

    lines = [
        "| API | function | argument | on lakefeed | note |",
        "| --- | --- | --- | --- | --- |",
    ]
    for f in FEATURES:
        status = f"refused (`{f.code}`)" if f.code else f.status
        argument = f"`{f.argument}`" if f.argument else ""
        lines.append(f"| {f.api} | `{f.function}` | {argument} | {status} | {_cell(f.note)} |")
    return "\n".join(lines) + "\n"


RENDERERS = {
    ERRORS_MARKER: render,
    PATCHES_MARKER: render_patches,
    "<!-- delta-features -->": render_features,
    "<!-- event-log-schema -->": render_event_log,
    "<!-- versions -->": render_versions,
    "<!-- configuration -->": render_configuration,
    "<!-- performance-results -->": render_performance,
    "<!-- performance-commands -->": render_performance_commands,
    "<!-- compat-api -->": render_compat_api,
}


def on_config(config: Any, **_: Any) -> Any:
    """mkdocs hook: the site's name carries the package version."""
    from lakefeed import __version__

    config["site_name"] = f"lakefeed {__version__}"
    return config


def on_page_markdown(markdown: str, **_: Any) -> str:
    """mkdocs hook: replace each marker with its generated table."""
    for marker, make in RENDERERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
