"""The ``spark-pipeline.yml`` spec of Spark Declarative Pipelines, read as ``spark-pipelines``
reads it.

A spec names the pipeline, its ``storage`` (the root of its checkpoints; lakefeed's lakehouse
— checkpoints, tables, event log — when ``--lakehouse`` is not given), its default ``catalog``
and ``database`` (``schema`` says the same; see :mod:`lakefeed.pipeline.names`),
``configuration`` (Spark confs, also what ``lf.config`` reads) and ``libraries``: globs,
relative to the spec's folder, of its ``.py`` and ``.sql`` files (a file path or
``folder/**``, as pyspark allows). ``lakefeed run path/to/spark-pipeline.yml`` and
``lakefeed run DIR`` (a folder holding the spec) both find it.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.core.storage import AnyPath, as_path, is_object_store
from lakefeed.pipeline.errors import SPEC_INVALID as INVALID
from lakefeed.pipeline.names import DEFAULT_CATALOG, DEFAULT_DATABASE, Namespace, name_parts

SPEC_NAMES = ("spark-pipeline.yml", "spark-pipeline.yaml")
FIELDS = {"name", "storage", "catalog", "database", "schema", "configuration", "libraries"}


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    storage: AnyPath  # a local folder or an object-store URI (s3://...)
    configuration: dict[str, str] = field(default_factory=dict)
    files: tuple[Path, ...] = ()
    namespace: Namespace = Namespace()


def find_spec(path: Path) -> Path | None:
    """The spec ``path`` is, or the one in folder ``path``; None when it is neither."""
    if path.is_file():
        return path if path.name in SPEC_NAMES else None
    found = [path / name for name in SPEC_NAMES if (path / name).is_file()]
    if len(found) > 1:
        raise _invalid(path, "holds both spark-pipeline.yml and spark-pipeline.yaml", "keep one")
    return found[0] if found else None


def read_spec(path: Path) -> PipelineSpec:
    data = _load_yaml(path)
    unexpected = sorted(set(data) - FIELDS)
    if unexpected:
        raise _invalid(path, f"unexpected field(s) {', '.join(unexpected)}", _FIELDS_FIX)
    missing = [key for key in ("name", "storage") if key not in data]
    if missing:
        raise _invalid(path, f"missing field(s) {', '.join(missing)}", _FIELDS_FIX)
    configuration = data.get("configuration") or {}
    if not isinstance(configuration, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in configuration.items()
    ):
        raise _invalid(path, "configuration must map strings to strings", "quote the values")
    root = path.parent.resolve()
    storage = str(data["storage"])
    if not is_object_store(storage):  # relative to the spec's folder, as spark-pipelines has it
        storage = str(root / Path(storage.removeprefix("file://")))
    return PipelineSpec(
        name=str(data["name"]),
        storage=as_path(storage),
        configuration=dict(configuration),
        files=tuple(f for entry in data.get("libraries") or [] for f in _files(path, entry)),
        namespace=Namespace(
            _identifier(path, data, "catalog") or DEFAULT_CATALOG,
            _identifier(path, data, "database", "schema") or DEFAULT_DATABASE,
        ),
    )


def _identifier(path: Path, data: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` the spec sets (``database``, else its synonym ``schema``, as
    ``spark-pipelines`` reads them): one identifier."""
    key = next((k for k in keys if data.get(k) is not None), None)
    if key is None:
        return None
    value = str(data[key])
    parts = name_parts(value)
    if parts is None or len(parts) != 1:
        raise _invalid(path, f"{key} {value!r} is not one name", f"write {key}: a plain name")
    return parts[0]


_FIELDS_FIX = f"a spec has the fields {', '.join(sorted(FIELDS))} (name and storage required)"


def _load_yaml(path: Path) -> dict[str, Any]:
    # deferred: PyYAML loads only when this runs
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise _invalid(path, f"not valid YAML: {error}", "fix the YAML syntax") from error
    if not isinstance(data, dict):
        raise _invalid(path, "is not a mapping of fields", _FIELDS_FIX)
    return data


def _files(spec: Path, entry: Any) -> list[Path]:
    """The ``.py``/``.sql`` files one ``libraries`` entry (``{glob: {include: ...}}``) names."""
    include = entry.get("glob", {}).get("include") if isinstance(entry, dict) else None
    if not isinstance(include, str):
        raise _invalid(spec, f"library {entry!r}", "write `- glob: {include: transformations/**}`")
    pattern = include
    if glob.has_magic(include):
        if not include.endswith("/**") or glob.has_magic(include[:-3]):
            raise _invalid(spec, f"glob {include!r}", "use a file path or `folder/**`")
        pattern = include + "/*"
    root = spec.parent.resolve()
    found = sorted(p for p in root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
    return [p for p in found if p.suffix in (".py", ".sql")]


def _invalid(path: Path, what: str, fix: str) -> PipelineDefinitionError:
    return PipelineDefinitionError(f"pipeline spec {path}: {what}", fix=fix, code=INVALID)
