"""CPU per job of `cairn work`, this checkout against an earlier revision, in one run.

Issue 16's target "cairn's own CPU per job halved" is stated against the code of the day the
issue was filed. Figures from different days on this machine vary by up to 2x, so this script
measures both sides side by side: it checks the earlier revision out into a temporary git
worktree with a venv of its own (`make .venv/.installed` there), then, alternating between the
two, makes an installation with each side's real CLI (SQLite store, the sample repository),
submits no-op script jobs (one file written, then finish) and times one
`cairn work --until-idle` that drives them all to review. The runner reports its own CPU
(cairn's Python) and its waited-for children's (git, the sandbox) as it exits. Each side runs
twice, with a few jobs and with many; the difference, divided by the extra jobs, is the CPU a
job costs, without interpreter start-up and imports.

With `--together`, the two sides of a round run at the same time (one core each on a 2-core
machine), so a change in the machine's speed (a virtual machine's neighbours) reaches both
alike; CPU time, not wall time, is what is compared. The side that finishes first then runs
alone for the rest, which favours the slower one, if anything.

    .venv/bin/python benchmarks/cpu_per_job.py [--against REV] [--jobs 5,25] [--rounds 2]
        [--together]
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
ISSUE_16_FILED = "11ca58dfcf299bbdbd159ab488d3d49f23062cec"
NOOP_SCRIPT = (
    "steps:\n"
    '  - write: {{path: "bench/job-{n}.txt", content: "{n}\\n"}}\n'
    '  - finish: {{summary: "wrote job-{n}.txt"}}\n'
)
# Runs `cairn work --until-idle` in-process and writes (own, children) CPU seconds at exit.
MEASURED_RUNNER = """\
import atexit, resource, sys
report = sys.argv[1]
def write_usage():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    usage = (own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime)
    with open(report, "w") as out:
        out.write(repr(usage))
atexit.register(write_usage)
sys.argv = ["cairn", "work", "--until-idle"]
from cairn.cli import main
main()
"""


@dataclass(frozen=True)
class Usage:
    own: float
    children: float
    wall: float


def drive(tree: Path, job_count: int) -> Usage:
    """Submit `job_count` no-op jobs to a new installation of `tree` and drive them to review."""
    bin_dir = tree / ".venv" / "bin"
    with tempfile.TemporaryDirectory(prefix="cairn-cpu-") as scratch:
        tmp = Path(scratch)
        (tmp / "gitconfig").write_text("")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "GIT_"))}
        env |= {
            "CAIRN_HOME": str(tmp / "home"),
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            "GIT_CONFIG_GLOBAL": str(tmp / "gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "NO_COLOR": "1",
        }

        def run(*args: str) -> None:
            subprocess.run(args, env=env, check=True, capture_output=True)

        cairn = str(bin_dir / "cairn")
        run(cairn, "init", "--run-approval", "auto", "--auto-kinds", "interactive,scheduled")
        run(cairn, "user", "add", "alice")
        make_repo = "import pathlib, sys; from cairn.testing.repos import make_sample_repo; "
        make_repo += "make_sample_repo(pathlib.Path(sys.argv[1]))"
        run(str(bin_dir / "python"), "-c", make_repo, str(tmp / "repo"))
        run(cairn, "room", "create", "sample", "--repo", str(tmp / "repo"))
        for n in range(job_count):
            script = tmp / f"job-{n}.yaml"
            script.write_text(NOOP_SCRIPT.format(n=n))
            run(
                cairn,
                "submit",
                "sample",
                f"job {n}",
                "--agent",
                f"script:{script}",
                "--as",
                "alice",
            )
        report = tmp / "usage"
        started = time.monotonic()
        run(str(bin_dir / "python"), "-c", MEASURED_RUNNER, str(report))
        wall = time.monotonic() - started
        with sqlite3.connect(tmp / "home" / "cairn.db") as db:
            stages = db.execute("SELECT stage, count(*) FROM jobs GROUP BY stage").fetchall()
        if stages != [("awaiting_review", job_count)]:
            sys.exit(f"{tree.name}: the jobs did not all reach review: {stages}")
        own, children = ast.literal_eval(report.read_text())
        return Usage(own, children, wall)


def per_job(trees: list[Path], few: int, many: int, *, together: bool) -> list[Usage]:
    """The CPU a job costs on each tree; with `together`, the trees' drives of the same
    number of jobs run at the same time."""
    if together:
        with ThreadPoolExecutor(len(trees)) as pool:
            small = list(pool.map(lambda tree: drive(tree, few), trees))
            large = list(pool.map(lambda tree: drive(tree, many), trees))
    else:
        small, large = [], []
        for tree in trees:
            small.append(drive(tree, few))
            large.append(drive(tree, many))
    pairs = zip(small, large, strict=True)
    return [_difference(few_jobs, many_jobs, many - few) for few_jobs, many_jobs in pairs]


def _difference(small: Usage, large: Usage, extra: int) -> Usage:
    return Usage(
        (large.own - small.own) / extra,
        (large.children - small.children) / extra,
        (large.wall - small.wall) / extra,
    )


def _parts(earlier: Usage, now: Usage) -> tuple[float, float, float]:
    """This checkout's cairn, children's and total CPU as fractions of the earlier's."""
    return (
        now.own / earlier.own,
        now.children / earlier.children,
        (now.own + now.children) / (earlier.own + earlier.children),
    )


@contextmanager
def checked_out(revision: str) -> Iterator[Path]:
    """`revision` in a temporary worktree of this repository, with its own venv."""
    parent = Path(tempfile.mkdtemp(prefix="cairn-against-"))
    tree = parent / "cairn"
    git = ["git", "-C", str(HERE)]
    subprocess.run([*git, "worktree", "add", "--detach", str(tree), revision], check=True)
    try:
        subprocess.run(["make", "-C", str(tree), ".venv/.installed"], check=True)
        yield tree
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", default=ISSUE_16_FILED, help="the earlier revision")
    parser.add_argument("--jobs", default="5,25", help="the two job counts, few and many")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--together", action="store_true", help="run the two sides of a round at the same time"
    )
    options = parser.parse_args()
    few, many = (int(n) for n in options.jobs.split(","))
    if not 0 < few < many:
        parser.error("--jobs takes two counts, the first smaller, for example 5,25")
    if not (HERE / ".venv" / "bin" / "cairn").exists():
        sys.exit("this checkout has no venv yet: run `make .venv/.installed` first")
    with checked_out(options.against) as earlier:
        sides = {f"{options.against[:10]} (earlier)": earlier, "this checkout": HERE}
        rounds: dict[str, list[Usage]] = {name: [] for name in sides}
        for n in range(1, options.rounds + 1):
            # Each side goes first in every other round: a drift of the machine's speed within
            # a round then favours neither.
            order = list(sides.items()) if n % 2 else list(sides.items())[::-1]
            trees = [tree for _, tree in order]
            usages = per_job(trees, few, many, together=options.together)
            for (name, _), usage in zip(order, usages, strict=True):
                rounds[name].append(usage)
                print(
                    f"round {n}, {name}: cairn {usage.own * 1000:.1f} ms, "
                    f"children {usage.children * 1000:.1f} ms, wall {usage.wall * 1000:.1f} ms "
                    "a job",
                    flush=True,
                )
    print(f"\nmedian of {options.rounds} rounds, per job ({many - few} jobs' difference):")
    print(f"{'':24} {'cairn CPU':>10} {'children':>10} {'total':>10} {'wall':>10}")
    medians = {}
    for name, usages in rounds.items():
        own = statistics.median(u.own for u in usages) * 1000
        children = statistics.median(u.children for u in usages) * 1000
        wall = statistics.median(u.wall for u in usages) * 1000
        medians[name] = (own, children, own + children)
        print(f"{name:24} {own:8.1f}ms {children:8.1f}ms {own + children:8.1f}ms {wall:8.1f}ms")
    (before, now) = medians.values()
    ratios = "  ".join(
        f"{what} {b / a:.2f}"
        for what, a, b in zip(("cairn", "children", "total"), before, now, strict=True)
    )
    print(f"this checkout / earlier: {ratios}")
    # The two sides of one round run within a minute of each other: the median of the rounds'
    # own ratios is the figure least moved by the machine's speed changing between rounds.
    (earlier_rounds, now_rounds) = rounds.values()
    parts = [_parts(a, b) for a, b in zip(earlier_rounds, now_rounds, strict=True)]
    per_round = "  ".join(
        f"{what} {statistics.median(ratios[n] for ratios in parts):.2f}"
        for n, what in enumerate(("cairn", "children", "total"))
    )
    print(f"median of the rounds' ratios: {per_round}")


if __name__ == "__main__":
    main()
