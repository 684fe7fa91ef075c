"""The fault soak: randomized storage faults and kill -9s against every fault scenario, then a
restart and ``lakefeed verify`` after each (not in CI: about a minute per fault).

    python -m bench.faults --faults 300 --seed 1 [--scenarios iot,sink] [--layers s3,disk]

Runs are ``lakefeed run`` / ``lakefeed verify`` subprocesses, as an operator runs them
(``--in-process``: ``lf.run`` / ``lf.verify`` on one SparkSession here, no JVM start per run; a
kill trial still runs ``lakefeed run`` as a subprocess). Each fault gets its own seed
(``--seed`` + its index), drawn into a scenario, a layer and either a storage fault (N chosen
within the operation counts of a clean run) or a kill -9 at a random moment. It prints one line
per fault and, at the end, "faults survived / rows lost / rows duplicated / refused" with every
finding's seed; ``--replay SEED`` runs that one fault again. Findings and refusals are written
to ``--out`` (JSON lines) with their output excerpts.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from pyspark.sql import SparkSession

from tests.connectors.kafka.broker import Tansu
from tests.support.faultlab import (
    Driver,
    Lab,
    Outcome,
    calibrate,
    cli,
    in_process,
    kill_moment,
    lab,
    trial,
)
from tests.support.faults import random_fault
from tests.support.faultscenarios import SCENARIOS

KILL_SHARE = 0.2
KILL_WITHIN = 75.0  # seconds: a ``lakefeed run`` of a scenario takes 40-90 s on 2 busy cores


def plan_trial(seed: int, scenarios: list[str], layers: list[str]) -> tuple[str, str, bool]:
    """(scenario, layer, is a kill) of the fault with this seed."""
    rng = random.Random(seed)
    return rng.choice(scenarios), rng.choice(layers), rng.random() < KILL_SHARE


Calibration = dict[tuple[str, str], tuple[dict[str, int], float]]


def run_one(lab_: Lab, drive: Driver, seed: int, scenarios: list[str], layers: list[str],
            calibration: Calibration) -> Outcome:  # fmt: skip
    name, layer, kill = plan_trial(seed, scenarios, layers)
    scenario = SCENARIOS[name]
    if (name, layer) not in calibration:
        calibration[(name, layer)] = calibrate(lab_, scenario, layer, drive)
    ops = calibration[(name, layer)][0]
    rng = random.Random(seed * 7919)
    if kill:  # a subprocess run: its JVM starts first; the moment depends on the seed alone
        moment = kill_moment(rng, KILL_WITHIN)
        return trial(lab_, scenario, layer, None, seed, kill_after=moment, drive=drive)
    return trial(lab_, scenario, layer, random_fault(rng, layer, ops), seed, drive=drive)


def session(lab_: Lab) -> SparkSession:
    """One SparkSession for every in-process run (S3A aimed at the fault proxy)."""
    from lakefeed.session import spark_session

    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "2g"}  # fmt: skip
    return spark_session("lakefeed-faults", "local[2]", conf, storage=[f"s3://{lab_.bucket}/"])


def report(outcomes: list[Outcome]) -> str:
    verdicts = Counter(o.verdict for o in outcomes)
    others = ", ".join(f"{k} {v}" for k, v in verdicts.items() if k not in _PLAIN)
    lost = sum(c.lost for o in outcomes for c in o.counts if c.lost > 0)
    duplicated = sum(c.duplicated for o in outcomes for c in o.counts if c.duplicated > 0)
    lines = [
        f"faults survived: {verdicts['survived']} of {len(outcomes)}",
        f"rows lost: {lost} (in {verdicts['lost']} faults)",
        f"rows duplicated: {duplicated} (in {verdicts['duplicated']} faults)",
        f"refused: {verdicts['refused']}",
        f"other findings: {others or 'none'}",
    ]
    lines += [f"  finding: {o.summary()}" for o in outcomes if o.finding]
    lines += [f"  refused: {o.summary()}" for o in outcomes if o.verdict == "refused"]
    return "\n".join(lines)


_PLAIN = ("survived", "lost", "duplicated", "refused")


def save(out: Path, outcome: Outcome) -> None:
    record = asdict(outcome)
    record["excerpt"] = outcome.excerpt()
    for run in ("first", "second"):
        if record[run] is not None:
            record[run]["output"] = record[run]["output"][-6000:]
    with out.open("a") as handle:
        handle.write(json.dumps(record, default=str) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faults", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--replay", type=int, help="run the fault of this seed only")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--layers", default="s3,disk")
    parser.add_argument("--out", type=Path, default=Path("faults-soak.jsonl"))
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="lf.run / lf.verify on one SparkSession here (faster) instead of `lakefeed` processes",
    )
    args = parser.parse_args()
    scenarios, layers = args.scenarios.split(","), args.layers.split(",")
    seeds = [args.replay] if args.replay is not None else range(args.seed, args.seed + args.faults)
    workdir = Path(tempfile.mkdtemp(prefix="lakefeed-faults-"))
    broker = Tansu(workdir / "tansu.log").start()
    outcomes: list[Outcome] = []
    calibration: Calibration = {}
    started = time.monotonic()
    try:
        with lab(workdir, broker) as lab_:
            drive = in_process(session(lab_)) if args.in_process else cli
            for seed in seeds:
                outcome = run_one(lab_, drive, seed, scenarios, layers, calibration)
                outcomes.append(outcome)
                print(f"[{time.monotonic() - started:6.0f}s] {outcome.summary()}", flush=True)
                if outcome.verdict != "survived":
                    save(args.out, outcome)
    finally:
        broker.stop()
        print(report(outcomes), flush=True)


if __name__ == "__main__":
    main()
