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

    .venv/bin/python benchmarks/cpu_per_job.py [--against REV] [--jobs 5,25] [--rounds 2]
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


def per_job(tree: Path, few: int, many: int) -> Usage:
    small, large = drive(tree, few), drive(tree, many)
    extra = many - few
    return Usage(
        (large.own - small.own) / extra,
        (large.children - small.children) / extra,
        (large.wall - small.wall) / extra,
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
            for name, tree in sides.items():
                usage = per_job(tree, few, many)
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


if __name__ == "__main__":
    main()
