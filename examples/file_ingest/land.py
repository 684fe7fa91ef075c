"""Land sample order files the way a real exporter does (temp name, then rename).

Wave 1: orders without a ``coupon`` field. Wave 2: the exporter starts sending ``coupon`` (a
field added later) and one file carries malformed lines. ``python land.py FOLDER --wave 2``.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

START = datetime(2026, 1, 1, tzinfo=UTC)
FILES_PER_WAVE = 4
ORDERS_PER_FILE = 50


def _order(rng: random.Random, number: int, coupon: bool) -> dict[str, object]:
    order: dict[str, object] = {
        "order_id": f"o-{number:06d}",
        "customer": f"c-{rng.randrange(40):03d}",
        "amount": round(rng.uniform(5, 500), 2),
        "order_time": (START + timedelta(seconds=number * 7)).isoformat(),
    }
    if coupon and rng.random() < 0.3:
        order["coupon"] = rng.choice(["WELCOME", "SPRING", "VIP"])
    return order


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")  # hidden: never picked up half-written
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.rename(path)


def land_wave(folder: Path, wave: int, seed: int = 5) -> int:
    """Write one wave of files under ``folder/<date>/``; returns the number of valid orders."""
    rng = random.Random(seed * 100 + wave)
    valid = 0
    for index in range(FILES_PER_WAVE):
        first = ((wave - 1) * FILES_PER_WAVE + index) * ORDERS_PER_FILE
        lines = [json.dumps(_order(rng, first + i, wave > 1)) for i in range(ORDERS_PER_FILE)]
        valid += len(lines)
        if wave > 1 and index == 0:
            lines[10] = '{"order_id": "o-broken", "amount": 12.5'  # truncated line
            lines[20] = "not json at all"
            valid -= 2
        _write(folder / f"2026-01-0{wave}" / f"orders-{wave}-{index}.json", lines)
    return valid


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--wave", type=int, default=1)
    args = parser.parse_args()
    print(f"landed {land_wave(args.folder, args.wave)} valid orders in {args.folder}")
