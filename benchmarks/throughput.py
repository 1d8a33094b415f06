"""Runner throughput, failover and wake-up latency: real `cairn work` processes, one run.

For each backend (SQLite in a temporary home; PostgreSQL in a fresh database, dropped after,
when it answers at 127.0.0.1:5432):

1. jobs per minute for no-op scripted jobs (one file written, submit to review) with 1, 2 and
   4 runner processes, and the CPU each job cost: the runners' own (cairn's Python) and their
   subprocesses' (git, the sandbox). The runners are started and registered before the jobs
   are submitted, so interpreter start-up is not counted; each round's jobs are rejected and
   `cairn gc` tidies the installation before the next round, so every round starts alike.
   For reference, the same jobs split between two installations that share nothing (two
   homes, two stores, two mirrors), one runner each: what the machine allows two runners
   before any cost of sharing a store. These run in rounds, back to back and in the reverse
   order every other round; the figures are the rounds' medians (see `in_rounds`);
2. failover: from a runner's SIGKILL to its job running again under another runner, with the
   part spent waiting for the lease to run out reported beside it;
3. pickup: from a decision (an approval at the review gate) to a runner holding the job,
   with LISTEN/NOTIFY (on SQLite: the data_version watcher) and with the plain poll alone.

    .venv/bin/python benchmarks/throughput.py [--jobs 30] [--runners 1,2,4] [--rounds 3]
        [--profile]

`--profile` also runs one runner under cProfile on SQLite and prints where its CPU went.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from cairn.jobs import gates
from cairn.jobs.submit import resolve_agent, submit_job
from cairn.sanitize import Sanitizer
from cairn.stages import Stage, Status
from cairn.store import Store
from cairn.store.schema import jobs, runners
from cairn.testing.repos import make_sample_repo

POSTGRES_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
CAIRN = Path(sys.executable).parent / "cairn"
LEASE_SECONDS = 3.0
TIMEOUT_S = 600.0
TICKS = os.sysconf("SC_CLK_TCK")
NOOP_SCRIPT = (
    "steps:\n"
    '  - write: {{path: "bench/job-{n}.txt", content: "{n}\\n"}}\n'
    '  - finish: {{summary: "wrote job-{n}.txt"}}\n'
)
SLOW_SCRIPT = 'steps:\n  - write: {path: slow.txt, content: "1\\n"}\n  - run: "sleep 60"\n'


@dataclass
class Home:
    """One cairn installation made with the real CLI, and its store opened in-process."""

    folder: Path
    url: str
    env: dict[str, str]
    store: Store = field(init=False)
    scripts: int = 0

    def cli(self, *args: str) -> None:
        subprocess.run([str(CAIRN), *args], env=self.env, check=True, capture_output=True)

    def start(self) -> None:
        init = ("init", "--run-approval", "auto", "--auto-kinds", "interactive,scheduled")
        self.cli(*init)
        self.cli("user", "add", "alice")
        repo = make_sample_repo(self.folder / "repo")
        self.cli("room", "create", "bench", "--repo", str(repo))
        self.store = Store.open(self.url)

    def submit(self, texts: list[str]) -> list[int]:
        """Submit script jobs in one transaction, as alice; their ids."""
        ids = []
        with self.store.begin() as conn:
            for text in texts:
                self.scripts += 1
                path = self.folder / "scripts" / f"{self.scripts}.yaml"
                path.parent.mkdir(exist_ok=True)
                path.write_text(text)
                agent = resolve_agent(conn, "bench", f"script:{path}")
                job = submit_job(
                    conn,
                    room="bench",
                    text="bench",
                    agent=agent,
                    actor="alice",
                    sanitizer=Sanitizer(environ={}),
                )
                ids.append(job.id)
        return ids

    def runner(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(CAIRN), "work", *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    # The benchmark's own polling reads through the read door: on SQLite it would otherwise
    # take the write lock the runners it measures wait for.
    def job_rows(self, ids: list[int]) -> list[Any]:
        with self.store.read() as conn:
            return conn.execute(sa.select(jobs).where(jobs.c.id.in_(ids))).all()

    def registered(self) -> int:
        with self.store.read() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(runners)).scalar())


@contextlib.contextmanager
def home(backend: str) -> Iterator[Home]:
    folder = Path(tempfile.mkdtemp(prefix="cairn-throughput-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "GIT_"))}
    (folder / "gitconfig").write_text("")
    env |= {
        "CAIRN_HOME": str(folder / "home"),
        "CAIRN_LEASE_SECONDS": str(LEASE_SECONDS),
        "GIT_CONFIG_GLOBAL": str(folder / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": f"{CAIRN.parent}{os.pathsep}{env.get('PATH', '')}",
    }
    admin = None
    name = f"cairn_throughput_{uuid.uuid4().hex[:8]}"
    if backend == "postgres":
        admin = sa.create_engine(f"{POSTGRES_SERVER}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        url = f"{POSTGRES_SERVER}/{name}"
        env["CAIRN_DATABASE_URL"] = url
    else:
        url = f"sqlite:///{folder / 'home' / 'cairn.db'}"
    made = Home(folder, url, env)
    try:
        made.start()
        yield made
    finally:
        with contextlib.suppress(AttributeError):
            made.store.close()
        if admin is not None:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()
        shutil.rmtree(folder, ignore_errors=True)


def wait_until(condition: Any, what: str, poll: float = 0.01) -> float:
    """Poll until `condition()` holds; the monotonic time it was first seen to hold."""
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(poll)
    return time.monotonic()


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(own, waited-for children) CPU seconds of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / TICKS
    children = (int(fields[13]) + int(fields[14])) / TICKS
    return own, children


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        process.wait(timeout=60)


def started_runners(made: Home, count: int, *args: str) -> list[subprocess.Popen[bytes]]:
    processes = [made.runner(*args) for _ in range(count)]
    wait_until(lambda: made.registered() >= count, "the runners to register", poll=0.05)
    return processes


def throughput(made: Home, runner_count: int, job_count: int, threads: int = 1) -> dict[str, float]:
    """Jobs per minute and CPU per job for `job_count` no-op jobs, submit to review."""
    processes = started_runners(made, runner_count, "--concurrency", str(threads))
    before = [cpu_seconds(p.pid) for p in processes]
    start = time.monotonic()
    ids = made.submit([NOOP_SCRIPT.format(n=n) for n in range(job_count)])

    end = wait_until(lambda: reviewed(made, ids), "the jobs to reach review", poll=0.05)
    after = [cpu_seconds(p.pid) for p in processes]
    stop(processes)
    own = sum(a[0] - b[0] for a, b in zip(after, before, strict=True))
    children = sum(a[1] - b[1] for a, b in zip(after, before, strict=True))
    reset(made, ids)
    return {
        "jobs_per_min": job_count / (end - start) * 60,
        "cpu_ms_per_job": own / job_count * 1000,
        "children_cpu_ms_per_job": children / job_count * 1000,
    }


def reviewed(made: Home, ids: list[int]) -> bool:
    """Whether every job of `ids` waits at review; a job that failed or blocked ends the run."""
    rows = made.job_rows(ids)
    bad = [r for r in rows if r.status in ("failed", "blocked")]
    if bad:
        raise SystemExit(f"a benchmark job did not reach review: {bad[0].diagnosis}")
    return all(r.stage == Stage.awaiting_review.value for r in rows)


def reset(made: Home, ids: list[int]) -> None:
    """End a round's reviewed jobs and tidy the installation for the next round.

    Each round starts from a tidied mirror: every fetch and worktree command looks at all the
    worktrees and refs it holds, so rounds run later would otherwise pay for the jobs of
    earlier ones (as an installation pays until `cairn gc` runs).
    """
    with made.store.begin() as conn:
        for job_id in ids:
            gates.reject(conn, job_id, "admin", "benchmark")
    made.cli("gc")


def apart(homes: list[Home], job_count: int) -> dict[str, float]:
    """Jobs per minute of one runner on each of `homes` (installations sharing nothing but
    the machine), `job_count` jobs in all: what the machine allows several runners, whatever
    a shared store costs them."""
    processes = [started_runners(made, 1)[0] for made in homes]
    shares = [job_count // len(homes) + (n < job_count % len(homes)) for n in range(len(homes))]
    start = time.monotonic()
    ids = [
        made.submit([NOOP_SCRIPT.format(n=f"apart-{n}") for n in range(share)])
        for made, share in zip(homes, shares, strict=True)
    ]

    end = wait_until(
        lambda: all(reviewed(made, made_ids) for made, made_ids in zip(homes, ids, strict=True)),
        "the jobs of every installation to reach review",
        poll=0.05,
    )
    stop(processes)
    for made, made_ids in zip(homes, ids, strict=True):
        reset(made, made_ids)
    return {"jobs_per_min": job_count / (end - start) * 60}


@dataclass(frozen=True)
class Setup:
    """One configuration the rounds measure: a short name for the round lines, its label,
    and the measurement (jobs per minute, and CPU per job where it is known)."""

    short: str
    label: str
    measure: Callable[[], dict[str, float]]


def in_rounds(
    setups: list[Setup], rounds: int
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Each setup once a round; the median of every figure over the rounds, and the median of
    each round's own ratio of a setup's jobs per minute to the first setup's, by label.

    The machine's speed drifts by a third within minutes here: the setups of a round run back
    to back, in the reverse order every other round, so a drift favours none.
    """
    figures: dict[str, dict[str, list[float]]] = {setup.label: {} for setup in setups}
    ratios: dict[str, list[float]] = {setup.label: [] for setup in setups}
    for n in range(rounds):
        measured = {
            setup.label: setup.measure() for setup in (setups if n % 2 == 0 else setups[::-1])
        }
        first = measured[setups[0].label]["jobs_per_min"]
        shown = ", ".join(f"{s.short} {measured[s.label]['jobs_per_min']:.0f}" for s in setups)
        print(f"  round {n + 1}, jobs/min: {shown}", flush=True)
        for label, row in measured.items():
            for name, value in row.items():
                figures[label].setdefault(name, []).append(value)
            ratios[label].append(row["jobs_per_min"] / first)
    medians = {
        label: {name: statistics.median(values) for name, values in row.items()}
        for label, row in figures.items()
    }
    return medians, {label: statistics.median(values) for label, values in ratios.items()}


def failover(made: Home) -> dict[str, float]:
    """Seconds from SIGKILL of the runner holding a job to another runner holding it."""
    processes = started_runners(made, 2)
    [job_id] = made.submit([SLOW_SCRIPT])
    wait_until(lambda: made.job_rows([job_id])[0].lease_owner is not None, "a claim")
    row = made.job_rows([job_id])[0]
    victim = next(p for p in processes if f":{p.pid}:" in row.lease_owner)
    killed_at_wall = time.time()
    os.killpg(victim.pid, signal.SIGKILL)
    killed = time.monotonic()
    victim.wait()

    def taken_over() -> bool:
        now = made.job_rows([job_id])[0]
        return now.fencing_token > row.fencing_token and now.lease_owner is not None

    resumed = wait_until(taken_over, "another runner to take the job over")
    expiry_wait = max(0.0, row.lease_expires_at.timestamp() - killed_at_wall)
    stop([p for p in processes if p is not victim])
    with made.store.begin() as conn:
        gates.cancel(conn, job_id, "alice")
    return {"total_s": resumed - killed, "lease_expiry_s": expiry_wait}


def pickup(made: Home, *, listen: bool, rounds: int = 5) -> float:
    """Median seconds from an approval at the review gate to a runner holding the job."""
    args = () if listen else ("--poll-only",)
    processes = started_runners(made, 2, *args)
    ids = made.submit([NOOP_SCRIPT.format(n=f"pickup-{listen}-{n}") for n in range(rounds)])
    wait_until(
        lambda: all(r.stage == Stage.awaiting_review.value for r in made.job_rows(ids)),
        "the pickup jobs to reach review",
        poll=0.05,
    )
    waits = []
    for job_id in ids:
        time.sleep(0.7)  # let the runners settle into their idle wait
        with made.store.begin() as conn:
            token = gates.approve(conn, job_id, "admin").fencing_token
        approved = time.monotonic()

        def held(job_id: int = job_id, token: int = token) -> bool:
            row = made.job_rows([job_id])[0]
            return row.fencing_token > token or row.status != Status.queued.value

        waits.append(
            wait_until(held, "a runner to pick the approved job up", poll=0.002) - approved
        )
    wait_until(
        lambda: all(r.status == Status.completed.value for r in made.job_rows(ids)),
        "the pickup jobs to be delivered",
        poll=0.05,
    )
    stop(processes)
    return statistics.median(waits)


def profile(made: Home, job_count: int) -> None:
    """One runner under cProfile over `job_count` no-op jobs: where cairn's own CPU goes."""
    out = made.folder / "runner.prof"
    made.submit([NOOP_SCRIPT.format(n=f"profile-{n}") for n in range(job_count)])
    # CPU time, not wall time: the runner mostly waits on git and the database.
    code = (
        "import cProfile, time; from cairn.cli import main\n"
        "profiler = cProfile.Profile(time.process_time)\n"
        "try:\n"
        "    profiler.runcall(main, ['work', '--until-idle'])\n"
        "finally:\n"
        f"    profiler.dump_stats({str(out)!r})\n"
    )
    subprocess.run([sys.executable, "-c", code], env=made.env, capture_output=True, check=False)
    stats = pstats.Stats(str(out))
    print(f"\ncProfile of one runner over {job_count} no-op jobs (CPU time, top 25 by cumulative):")
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(15)


def postgres_reachable() -> bool:
    engine = sa.create_engine(f"{POSTGRES_SERVER}/postgres", connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            return True
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--runners", default="1,2,4")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.runners.split(",")]
    if args.rounds < 1 or args.jobs < 1 or min(counts) < 1 or len(set(counts)) < len(counts):
        parser.error("--rounds, --jobs and --runners take numbers from 1, each count once")
    print(f"{os.cpu_count()} cores; {args.jobs} no-op jobs per round; lease {LEASE_SECONDS:g} s")
    for backend in args.backends.split(","):
        if backend == "postgres" and not postgres_reachable():
            print("postgres: unreachable at 127.0.0.1:5432, skipped")
            continue
        with home(backend) as made, home(backend) as other:
            for each in (made, other):  # each mirror is cloned once, here
                each.submit([NOOP_SCRIPT.format(n="warm-up")])
                stop(started_runners(each, 1, "--until-idle"))
            print(f"\n{backend}:")
            setups = [
                Setup(str(n), f"{n} runner{'s' * (n > 1)}", partial(throughput, made, n, args.jobs))
                for n in counts
            ]
            setups.append(
                Setup(
                    "apart",
                    "2 installations sharing nothing, 1 runner each (the machine's own limit)",
                    partial(apart, [made, other], args.jobs),
                )
            )
            setups += [
                Setup(
                    f"c{threads}",
                    f"1 runner, --concurrency {threads}",
                    partial(throughput, made, 1, args.jobs, threads=threads),
                )
                for threads in (2, 4)
            ]
            medians, ratios = in_rounds(setups, args.rounds)
            print(
                f"  median of {args.rounds} rounds (in parentheses, the median of each round's "
                f"own ratio to its {setups[0].label}):"
            )
            for label, row in medians.items():
                cpu = (
                    f", cairn CPU {row['cpu_ms_per_job']:6.1f} ms/job, subprocesses "
                    f"{row['children_cpu_ms_per_job']:6.1f} ms/job"
                    if "cpu_ms_per_job" in row
                    else ""
                )
                print(f"  {label}: {row['jobs_per_min']:7.1f} jobs/min ({ratios[label]:.2f}x){cpu}")
            lost = failover(made)
            print(
                f"  failover after SIGKILL: {lost['total_s']:.2f} s until another runner "
                f"holds the job, of which {lost['lease_expiry_s']:.2f} s waiting for the lease "
                f"to expire ({lost['total_s'] - lost['lease_expiry_s']:.2f} s beyond it)"
            )
            woken = pickup(made, listen=True)
            polled = pickup(made, listen=False)
            how = "LISTEN/NOTIFY" if backend == "postgres" else "data_version watcher"
            print(
                f"  decision to pickup: {woken * 1000:.0f} ms with {how}, "
                f"{polled * 1000:.0f} ms polling only ({polled / woken:.1f}x)"
            )
            if args.profile and backend == "sqlite":
                profile(made, args.jobs)


if __name__ == "__main__":
    main()
