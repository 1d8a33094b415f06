"""How long the `cairn` command takes before it answers: `--help`, and `jobs` on a small store.

A CLI people type all day must answer at once. This measures, in one run and as medians of
repeated child processes:

- the floor: `python -c pass` with the same interpreter (nothing of cairn imported);
- a bare Typer app with two commands and plain help (`--help`): what any Typer CLI pays;
- `cairn --help`;
- `cairn jobs` and `cairn jobs --json` on a store with a few jobs;
- `cairn show 1`.

and prints each against the floor and against its target (`--help` 0.15 s, `jobs` 0.3 s on
the project's 2-core machine). It also lists the heaviest imports of `cairn --help`
(`python -X importtime`), so a regression names its cause.

    .venv/bin/python benchmarks/cli_startup.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
CAIRN = BIN / "cairn"
TARGETS = {"--help": 0.15, "jobs": 0.30}
SCRIPT = "steps:\n  - write: {path: notes.txt, content: 'hello'}\n"
BARE_TYPER = """
import typer
app = typer.Typer(rich_markup_mode=None, add_completion=False)
@app.command()
def one(x: int) -> None:
    \"\"\"One.\"\"\"
@app.command()
def two(x: int) -> None:
    \"\"\"Two.\"\"\"
app()
"""


def timed(argv: list[str], env: dict[str, str], rounds: int) -> float:
    """The median wall time of `argv` over `rounds` runs, after one warm-up run."""
    samples = []
    for i in range(rounds + 1):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        if i:
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def small_store(folder: Path, env: dict[str, str]) -> None:
    """A home with one room and three submitted jobs, made with the real CLI."""
    from cairn.testing.repos import make_sample_repo

    repo = make_sample_repo(folder / "repo")
    script = folder / "agent.yaml"
    script.write_text(SCRIPT)

    def cairn(*args: str) -> None:
        subprocess.run([str(CAIRN), *args], env=env, check=True, stdout=subprocess.DEVNULL)

    cairn("init")
    cairn("room", "create", "sample", "--repo", str(repo))
    for n in range(3):
        cairn("submit", "sample", f"change number {n}", "--agent", f"script:{script}")


def heaviest_imports(env: dict[str, str], count: int = 8) -> list[tuple[int, str]]:
    """The modules whose own import time is largest when `cairn --help` starts."""
    code = "import sys; sys.argv=['cairn','--help']; from cairn.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        env=env,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="cairn-cli-startup-") as tmp:
        folder = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        env |= {"CAIRN_HOME": str(folder / "home"), "NO_COLOR": "1"}
        small_store(folder, env)
        floor = timed([sys.executable, "-c", "pass"], env, rounds)
        bare = timed([sys.executable, "-c", BARE_TYPER, "--help"], env, rounds)
        print(f"floor (python -c pass): {floor * 1000:.0f} ms")
        print(f"a bare Typer app's --help: {bare * 1000:.0f} ms")
        print(f"{'command':<22} {'median':>8} {'x Typer':>8} {'target':>8} {'x target':>9}")
        for label, argv in (
            ("--help", ["--help"]),
            ("jobs", ["jobs"]),
            ("jobs --json", ["jobs", "--json"]),
            ("show 1", ["show", "1"]),
        ):
            took = timed([str(CAIRN), *argv], env, rounds)
            target = TARGETS.get(argv[0], TARGETS["jobs"])
            print(
                f"cairn {label:<16} {took * 1000:>6.0f}ms {took / bare:>8.1f} "
                f"{target * 1000:>6.0f}ms {took / target:>9.2f}"
            )
        print("heaviest imports of `cairn --help` (cumulative microseconds):")
        for micros, module in heaviest_imports(env):
            print(f"  {micros:>8}  {module}")


if __name__ == "__main__":
    main()
