"""Helpers shared by the pipeline tests: load a pipeline with config, read tables back."""

from __future__ import annotations

from pathlib import Path

from lakefeed import load_pipeline
from lakefeed.pipeline.api import Pipeline, set_config
from tests.support.delta import table as table  # the pipeline tests' reader

ROOT = Path(__file__).resolve().parents[2]
IOT = ROOT / "examples" / "iot"

# 1500 rows, 2 per second from a fixed start: event times span 12.5 minutes, so the 5-minute
# gold windows [00:00, 00:05) and [00:05, 00:10) close under the 2-minute watermark.
IOT_CONF = {
    "iot.totalRows": "1500",
    "iot.rowsPerSecond": "2",
    "iot.devices": "8",
    "iot.startTime": "2026-01-01T00:00:00Z",
    "iot.lateRate": "0",
    "iot.seed": "3",
}


def load(paths: list[Path], conf: dict[str, str] | None = None) -> Pipeline:
    set_config(conf or {})
    return load_pipeline(paths)


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder
