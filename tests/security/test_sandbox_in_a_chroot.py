"""The sandbox works for root in a chroot (a bare build machine, a rescue system).

There the kernel refuses root a new user namespace although every other namespace works, and
bubblewrap took that refusal as fatal: every job blocked at its first command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = "from cairn.workspace.commands import sandbox_problem; print(sandbox_problem())"


@pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(p) for p in ("unshare", "chroot", "bwrap")),
    reason="needs root, unshare, chroot and bubblewrap",
)
def test_root_gets_a_sandbox_inside_a_chroot(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    # The whole host, mounted again and entered by chroot, in a mount namespace of its own
    # that vanishes with the command, so nothing stays mounted whatever happens.
    script = f'mount --rbind / "{root}" && exec chroot "{root}" "{sys.executable}" -c "{PROBE}"'
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None", done.stdout
