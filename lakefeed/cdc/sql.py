"""AUTO CDC in SQL pipeline files: the clauses after ``FROM source``, read without Spark.

The three spellings DLT/SDP know share one body::

    APPLY CHANGES INTO target FROM STREAM(source) KEYS (...) ...
    CREATE FLOW name AS AUTO CDC INTO target FROM STREAM(source) KEYS (...) ...
    CREATE OR REFRESH STREAMING TABLE target FLOW AUTO CDC FROM STREAM(source) KEYS (...) ...

    body: KEYS (k, ...) [IGNORE NULL UPDATES] [APPLY AS DELETE WHEN cond]
          [APPLY AS TRUNCATE WHEN cond] SEQUENCE BY expr
          [COLUMNS {(c, ...) | * EXCEPT (c, ...)}] [STORED AS SCD TYPE {1 | 2}]
          [TRACK HISTORY ON {(c, ...) | * EXCEPT (c, ...)}]

The result is the keyword arguments of ``lf.create_auto_cdc_flow``.
"""

from __future__ import annotations

import re
from typing import Any

from lakefeed.cdc.errors import INVALID
from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.sql.references import dataset_name, references
from lakefeed.sql.tokens import top_level

_CLAUSE = re.compile(
    r"\b(?P<word>KEYS|IGNORE\s+NULL\s+UPDATES|APPLY\s+AS\s+DELETE\s+WHEN|"
    r"APPLY\s+AS\s+TRUNCATE\s+WHEN|SEQUENCE\s+BY|COLUMNS|STORED\s+AS|TRACK\s+HISTORY\s+ON)\b",
    re.IGNORECASE,
)
_EXCEPT = re.compile(r"^\*\s*EXCEPT\s*\((?P<cols>.*)\)$", re.IGNORECASE | re.DOTALL)
_SCD = re.compile(r"^SCD\s+TYPE\s+(?P<type>\w+)$", re.IGNORECASE)


def _bad(where: str, what: str) -> PipelineDefinitionError:
    return PipelineDefinitionError(
        f"{where}: {what}",
        fix="write FROM STREAM(source) KEYS (k) [IGNORE NULL UPDATES] [APPLY AS DELETE WHEN "
        "cond] [APPLY AS TRUNCATE WHEN cond] SEQUENCE BY col [COLUMNS * EXCEPT (c)] "
        "[STORED AS SCD TYPE 2] [TRACK HISTORY ON (c)]",
        code=INVALID,
    )


def parse_body(body: str, where: str) -> dict[str, Any]:
    """``FROM source KEYS ...`` as ``create_auto_cdc_flow`` keyword arguments."""
    clauses = [m for m in _CLAUSE.finditer(body) if top_level(body, m.start())]
    given: dict[str, Any] = {
        "source": _source(body[: clauses[0].start()] if clauses else body, where)
    }
    for clause, following in zip(clauses, [*clauses[1:], None], strict=True):
        text = body[clause.end() : following.start() if following else len(body)].strip()
        _clause(" ".join(clause.group("word").upper().split()), text, given, where)
    missing = [k for k in ("keys", "sequence_by") if k not in given]
    if missing:
        raise _bad(where, f"missing {' and '.join(m.upper().replace('_', ' ') for m in missing)}")
    return given


def _source(head: str, where: str) -> str:
    """The dataset of ``FROM STREAM(source)`` / ``FROM STREAM source`` / ``FROM source``, as
    the parser reads it (``LIVE.`` dropped); nothing else may stand before the clauses."""
    text = f"SELECT * {head.strip()}"
    found = references(text, "databricks")
    reads = found.reads if found is not None else []
    alone = len(reads) == 1 and reads[0].end == len(text) and text[9:13].upper() == "FROM"
    name = dataset_name(reads[0]) if alone else None
    if name is None:
        raise _bad(where, f"expected FROM source, found {head.strip()[:40]!r}")
    return name


def _clause(word: str, text: str, given: dict[str, Any], where: str) -> None:
    if word == "KEYS":
        given["keys"] = _names(text, where, word)
    elif word == "IGNORE NULL UPDATES":
        if text:
            raise _bad(where, f"IGNORE NULL UPDATES takes no {text[:30]!r} here")
        given["ignore_null_updates"] = True
    elif word in ("APPLY AS DELETE WHEN", "APPLY AS TRUNCATE WHEN"):
        given["apply_as_deletes" if "DELETE" in word else "apply_as_truncates"] = text
    elif word == "SEQUENCE BY":
        given["sequence_by"] = text
    elif word == "STORED AS":
        scd = _SCD.match(text)
        if scd is None:
            raise _bad(where, f"STORED AS {text!r}: write STORED AS SCD TYPE 1 or 2")
        given["stored_as_scd_type"] = scd.group("type")
    else:
        prefix = "" if word == "COLUMNS" else "track_history_"
        excluded = _EXCEPT.match(text)
        if excluded is not None:
            given[f"{prefix}except_column_list"] = _names(excluded.group("cols"), where, word)
        else:
            given[f"{prefix}column_list"] = _names(text, where, word)


def _names(text: str, where: str, word: str) -> list[str]:
    inner = text[1:-1] if text.startswith("(") and text.endswith(")") else text
    names = [n.strip().strip("`") for n in inner.split(",")]
    if not all(re.fullmatch(r"\w+", n) for n in names):
        raise _bad(where, f"{word} {text!r}: expected a list of column names")
    return names
