"""Runner "hosts" for the scale-out tests: homes of their own sharing one store.

Each host is a `cairn work` process with its own `CAIRN_HOME` (so its own mirrors, workspaces
and dependency cache) and the one store every host shares.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CAIRN = Path(sys.executable).parent / "cairn"
LEASE_SECONDS = "1"


@dataclass
class Host:
    """One runner host: a home of its own, the shared store, an optional command prefix."""

    home: Path
    store_url: str
    prefix: tuple[str, ...] = ()
    """Wraps the runner's command (for example `ip netns exec NAME`)."""

    def env(self, faults: str = "") -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "PYTEST_"))}
        return env | {
            "CAIRN_HOME": str(self.home),
            "CAIRN_DATABASE_URL": self.store_url,
            "CAIRN_LEASE_SECONDS": LEASE_SECONDS,
            "CAIRN_AFFINITY_SECONDS": "0.5",
            "CAIRN_FAULTS": faults,
        }

    def work(self, faults: str = "") -> subprocess.CompletedProcess[str]:
        """`cairn work --until-idle` on this host; exit 137 is a crash point firing."""
        done = subprocess.run(
            [*self.prefix, str(CAIRN), "work", "--until-idle"],
            env=self.env(faults),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode in (0, 137), done.stdout + done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def start(self, log: Path) -> subprocess.Popen[bytes]:
        """`cairn work` in the background, in a session of its own (killed with its group)."""
        with log.open("wb") as out:
            return subprocess.Popen(
                [*self.prefix, str(CAIRN), "work"],
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )


def expected_tree(repo: Path, baseline: str, files: dict[str, str]) -> str:
    """The tree of `baseline` with `files` written over it: what an uninterrupted job yields."""
    index = repo / ".git" / "scaleout-expected-index"
    env = os.environ | {"GIT_INDEX_FILE": str(index)}

    def git(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    try:
        git("read-tree", baseline)
        for path, content in files.items():
            blob = git("hash-object", "-w", "--stdin", stdin=content)
            git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
        return git("write-tree")
    finally:
        index.unlink(missing_ok=True)
