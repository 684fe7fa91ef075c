"""One class per code, checked over the source: every ``X(..., code=Y)`` in lakefeed raises Y with
the class Y is registered to, and no code is declared twice.

A code read back out of a Py4J message means its registered class (:func:`errors.is_permanent`,
the error reference); an instance raised as another class says one thing to ``except`` and
another to the message. The check walks the AST of every module (no SparkSession: the modules
are imported, never run) and resolves ``X`` and ``Y`` in the module's namespace; a code handed
to a helper as a parameter is followed to the helper's calls in the same module.
"""

from __future__ import annotations

import ast
import importlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from lakefeed.core import errors

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lakefeed"

# Raise sites whose code is computed (neither a constant nor a parameter the module's own calls
# pass one to): where it comes from, and why its class is right.
COMPUTED = {
    ("lakefeed/core/errors.py", "_rebuild"): "unpickling: the class and code it was raised with",
    ("lakefeed/delta/create.py", "_check_generated"): (
        "_refusal's GENERATED_* codes, all registered to DeltaOperationError"
    ),
    ("lakefeed/pipeline/sinks.py", "problem"): "the class the code is registered to, looked up",
}

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _modules() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if "examples" not in path.relative_to(ROOT).parts:
            yield path


def _coded_calls(tree: ast.Module) -> list[tuple[ast.Call, Function | None]]:
    """Every call with a ``code=`` keyword, with the function it sits in (None: module level)."""
    found: list[tuple[ast.Call, Function | None]] = []

    def walk(node: ast.AST, function: Function | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call) and any(k.arg == "code" for k in child.keywords):
                found.append((child, function))
            walk(child, child if isinstance(child, Function) else function)

    walk(tree, None)
    return found


def _resolve(node: ast.expr, module: ModuleType) -> object | None:
    """A constant, a name or a dotted name as the module's namespace sees it; None otherwise."""
    if not all(
        isinstance(n, ast.Name | ast.Attribute | ast.Constant | ast.Load) for n in ast.walk(node)
    ):
        return None
    try:
        return eval(compile(ast.Expression(node), "<site>", "eval"), vars(module))  # noqa: S307
    except (NameError, AttributeError):
        return None


def _argument(call: ast.Call, function: Function, name: str) -> ast.expr | None:
    """The expression ``call`` passes to ``function``'s parameter ``name``."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    params = [a.arg for a in function.args.posonlyargs + function.args.args]
    if isinstance(call.func, ast.Attribute) and params[:1] in (["self"], ["cls"]):
        params = params[1:]
    index = params.index(name)
    return call.args[index] if index < len(call.args) else None


def _passed_codes(tree: ast.Module, function: Function, name: str) -> list[ast.expr | None]:
    """What the module's calls of ``function`` pass as its parameter ``name``."""
    return [
        _argument(node, function, name)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == function.name
    ]


def _codes_at(
    tree: ast.Module, module: ModuleType, site: ast.expr, function: Function | None
) -> list[object | None]:
    """The codes a site can raise: its constant, or each constant the module passes in."""
    if isinstance(site, ast.IfExp):  # either branch
        return _codes_at(tree, module, site.body, function) + _codes_at(
            tree, module, site.orelse, function
        )
    value = _resolve(site, module)
    if value is not None or function is None or not isinstance(site, ast.Name):
        return [value]
    params = {
        a.arg for a in function.args.posonlyargs + function.args.args + function.args.kwonlyargs
    }
    if site.id not in params:
        return [None]
    passed = _passed_codes(tree, function, site.id)
    return [_resolve(p, module) if p is not None else None for p in passed] or [None]


def _module_mismatches(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    if not _coded_calls(tree):
        return []
    module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return _mismatches(path.relative_to(ROOT).as_posix(), tree, module)


def _mismatches(relative: str, tree: ast.Module, module: ModuleType) -> list[str]:
    """Each call in ``tree`` (the source of ``module``) that builds an error with a code
    registered to another class, or whose class or code the walk cannot tell."""
    found: list[str] = []
    for call, function in _coded_calls(tree):
        if (relative, function.name if function else None) in COMPUTED:
            continue
        where = f"{relative}:{call.lineno} {ast.unparse(call.func)}"
        raised = _resolve(call.func, module)
        if isinstance(raised, type) and not issubclass(raised, errors.LakefeedError):
            continue  # not an error: some other call with a code= keyword
        if not isinstance(raised, type):
            found.append(f"{where}: the class raised is not a name the module defines or imports")
            continue
        site = next(k.value for k in call.keywords if k.arg == "code")
        for code in _codes_at(tree, module, site, function):
            owner = errors.registered().get(code) if isinstance(code, str) else None
            if code is None:
                found.append(f"{where}: code={ast.unparse(site)} cannot be resolved statically")
            elif owner is not raised:
                found.append(
                    f"{where}: {code} is registered to {getattr(owner, '__name__', owner)}"
                )
    return found


def test_every_code_is_raised_with_the_class_it_is_registered_to() -> None:
    found = [line for path in _modules() for line in _module_mismatches(path)]
    assert found == []


def test_the_walk_finds_a_code_raised_with_another_class() -> None:
    """``CONFIG`` is ConfigError's: raised as DeltaError, directly, through a helper's
    parameter and in a conditional, it is found each time; a code computed at run time is
    reported as such (add it to COMPUTED with where it comes from)."""
    source = (
        "def refuse(what, code):\n"
        "    raise DeltaError(what, code=code)\n"
        "def f(flag):\n"
        "    refuse('x', CONFIG)\n"
        "    raise DeltaError('y', code=CONFIG if flag else DELTA)\n"
        "def g(codes):\n"
        "    raise DeltaError('z', code=codes[0])\n"
        "def h():\n"
        "    raise ConfigError('fine', code=CONFIG)\n"
    )
    module = ModuleType("sample")
    names = {"DeltaError": errors.DeltaError, "ConfigError": errors.ConfigError}
    vars(module).update(names, CONFIG="CONFIG", DELTA="DELTA")
    assert _mismatches("sample.py", ast.parse(source), module) == [
        "sample.py:2 DeltaError: CONFIG is registered to ConfigError",
        "sample.py:5 DeltaError: CONFIG is registered to ConfigError",
        "sample.py:7 DeltaError: code=codes[0] cannot be resolved statically",
    ]


def _declared(tree: ast.Module) -> Iterator[str]:
    """The codes a module declares: ``register_code("X", ...)``, a class body's ``code = "X"``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register_code":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant):
                yield first.value
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                targets = item.targets if isinstance(item, ast.Assign) else []
                if any(getattr(t, "id", None) == "code" for t in targets):
                    value = item.value  # type: ignore[union-attr]
                    if isinstance(value, ast.Constant):
                        yield value.value


def test_no_code_is_declared_twice() -> None:
    """Registering twice fails at import, but only for modules one process imports together:
    the source is read whole."""
    counts = Counter(code for path in _modules() for code in _declared(ast.parse(path.read_text())))
    assert [code for code, count in counts.items() if count > 1] == []
    assert len(counts) > 100
