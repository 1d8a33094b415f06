"""`python -m examples.sweep --run-name demo --out DIR`: run or resume a sweep.

`--reconstruct CELL` prints the exact prompt that cell's model saw, rebuilt from the stored
recipe, and runs nothing. `CAIRN_FAULTS` (a testing aid, see `cairn.engine.faults`) is read
here and nowhere else, for example `CAIRN_FAULTS=crash:after_accept:cell-len400-depth50`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cairn.engine import Faults
from examples.sweep.errors import SweepError
from examples.sweep.haystack import reconstruct
from examples.sweep.plan import SweepPlan
from examples.sweep.sweep import run_sweep, stored_recipe


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m examples.sweep", description=__doc__)
    parser.add_argument("--run-name", required=True, help="stable name; rerun it to resume")
    parser.add_argument("--out", required=True, type=Path, help="directory holding runs")
    parser.add_argument("--lengths", type=_numbers, default=(200, 400, 800), help="words")
    parser.add_argument("--depths", type=_numbers, default=(0, 50, 100), help="percent")
    parser.add_argument("--model", default="scripted-needle-1")
    parser.add_argument("--template", default="v1")
    parser.add_argument("--seed", type=int, default=7, help="haystack corpus seed")
    parser.add_argument("--retries", type=int, default=2, help="extra attempts after an outage")
    parser.add_argument("--reconstruct", metavar="CELL", help="print CELL's prompt and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        faults = Faults.parse(os.environ.get("CAIRN_FAULTS"))
    except Exception as bad:  # cairn.engine raises its UsageError, which it does not export
        parser.error(str(bad))
    try:
        if args.reconstruct:
            sys.stdout.write(reconstruct(stored_recipe(args.out, args.run_name, args.reconstruct)))
            return 0
        plan = SweepPlan(
            args.run_name,
            lengths=args.lengths,
            depths=args.depths,
            model=args.model,
            template=args.template,
            corpus_seed=args.seed,
            retries=args.retries,
        )
        outcome = run_sweep(plan, args.out, faults=faults)
    except SweepError as refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130
    print("\n".join(outcome.lines()))
    return 0 if outcome.complete else 1


if __name__ == "__main__":
    sys.exit(main())
