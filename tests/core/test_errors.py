"""lakefeed's error classes carry stable codes and say whether a retry can help."""

from __future__ import annotations

import ast
import importlib.util
import pickle
from pathlib import Path

import pytest

from lakefeed.connectors.delta.errors import DeltaTableExistsError
from lakefeed.connectors.files.errors import (
    BadRecordsError,
    GlobError,
    NewColumnsError,
    SchemaEvolvedError,
    UnreadableFileError,
)
from lakefeed.connectors.files.errors import OptionError as FilesOptionError
from lakefeed.connectors.generator.errors import GeneratorOptionError
from lakefeed.connectors.kafka.errors import (
    DataLossError,
    KafkaOptionError,
    KafkaSinkError,
    KafkaSourceError,
    KafkaUnavailableError,
)
from lakefeed.core import errors
from lakefeed.delta.errors import DeltaOptionError, DeltaSourceError, SchemaMismatchError
from lakefeed.observe.tables import TableViewError
from lakefeed.pipeline.graph import PipelineError

# class, its code, the builtin callers catch it by, permanent?
CLASSES = [
    (PipelineError, "PIPELINE", ValueError, True),
    (DeltaSourceError, "DELTA_SOURCE", RuntimeError, True),
    (SchemaMismatchError, "DELTA_SCHEMA_MISMATCH", ValueError, True),
    (DeltaTableExistsError, "DELTA_TABLE_EXISTS", FileExistsError, True),
    (DeltaOptionError, "DELTA_OPTION", ValueError, True),
    (KafkaSourceError, "KAFKA_SOURCE", RuntimeError, True),
    (KafkaUnavailableError, "KAFKA_UNAVAILABLE", KafkaSourceError, False),
    (DataLossError, "KAFKA_DATA_LOSS", RuntimeError, True),
    (KafkaSinkError, "KAFKA_SINK", RuntimeError, False),
    (KafkaOptionError, "KAFKA_OPTION", ValueError, True),
    (NewColumnsError, "NEW_COLUMNS", RuntimeError, True),
    (SchemaEvolvedError, "SCHEMA_EVOLVED", NewColumnsError, False),
    (BadRecordsError, "BAD_RECORDS", RuntimeError, True),
    (UnreadableFileError, "UNREADABLE_FILE", RuntimeError, True),
    (TableViewError, "TABLE_VIEW", ValueError, True),
    (GeneratorOptionError, "GENERATOR_OPTION", ValueError, True),
    (FilesOptionError, "FILES_OPTION", ValueError, True),
    (GlobError, "GLOB", ValueError, True),
]


@pytest.mark.parametrize(("cls", "code", "builtin", "permanent"), CLASSES)
def test_error_classes_have_codes(
    cls: type[errors.LakefeedError], code: str, builtin: type, permanent: bool
) -> None:
    error = cls(["boom"]) if cls is PipelineError else cls("boom")
    assert isinstance(error, errors.LakefeedError)
    assert isinstance(error, builtin)
    assert errors.code_of(error) == code
    # The code survives as text (a Py4J message) and still says whether a retry helps.
    wrapped = f"py4j.protocol.Py4JJavaError: An error occurred\n  {error}\n\tat org.apache..."
    assert errors.code_of(wrapped) == code
    assert errors.is_permanent(wrapped) is permanent
    assert errors.is_permanent(error) is permanent
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_codes_are_unique() -> None:
    codes = [code for _, code, _, _ in CLASSES]
    assert len(codes) == len(set(codes))


def test_pipeline_error_keeps_its_problems() -> None:
    error = PipelineError(["a is wrong", "b is wrong"])
    again = pickle.loads(pickle.dumps(error))
    assert again.problems == ["a is wrong", "b is wrong"]
    assert "a is wrong" in str(error) and "b is wrong" in str(error)


def test_a_code_registered_twice_fails_at_import(tmp_path: Path) -> None:
    """Which class a code read back out of a message means must not depend on which module
    loaded first: a module registering a code again fails as it is imported."""
    module = tmp_path / "registers_again.py"
    module.write_text(
        "from lakefeed.core.errors import DeltaError, register_code\n"
        'AGAIN = register_code("DELTA_PARTITION_COLUMN_NOT_FOUND", DeltaError)\n'
    )
    spec = importlib.util.spec_from_file_location("registers_again", module)
    assert spec is not None and spec.loader is not None
    with pytest.raises(errors.DuplicateCodeError, match="DELTA_PARTITION_COLUMN_NOT_FOUND"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    with pytest.raises(errors.DuplicateCodeError, match="CONFIG"):
        type("ConfigAgain", (errors.LakefeedError,), {"code": "CONFIG"})
    assert errors.registered()["DELTA_PARTITION_COLUMN_NOT_FOUND"] is SchemaMismatchError


def _declarations(tree: ast.Module) -> list[int]:
    """Lines that declare a code: a ``register_code`` call, or a class body's ``code = "..."``."""
    calls = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register_code"
    ]
    classes = [
        item.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.Assign)
        and any(getattr(target, "id", None) == "code" for target in item.targets)
    ]
    return calls + classes


def test_codes_are_declared_in_their_areas_errors_module() -> None:
    """Each area declares its codes in its own ``errors.py`` (one place to read them); a module
    that raises one imports it from there."""
    root = Path(__file__).resolve().parents[2]
    found = [
        f"{path.relative_to(root)}:{line}"
        for path in sorted((root / "lakefeed").rglob("*.py"))
        if path.name != "errors.py" and "examples" not in path.relative_to(root).parts
        for line in _declarations(ast.parse(path.read_text()))
    ]
    assert found == []
