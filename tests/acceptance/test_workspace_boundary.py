"""An agent's file steps stay inside its workspace, however the path tries to leave it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import OWNER, Cli

pytestmark = pytest.mark.acceptance


def _write_step(path: str) -> str:
    return f'steps:\n  - write: {{path: "{path}", content: "pwned\\n"}}\n'


STATIC_ESCAPES = {
    "../outside.txt": "climbs out of the workspace",
    "{tmp}/absolute-outside.txt": "must be relative to the workspace, not absolute",
    ".git/config": "inside `.git`, which is off limits",
    ".GIT/hooks/post-checkout": "inside `.git`, which is off limits",
    "src/../../outside.txt": "climbs out of the workspace",
}


def test_a_script_naming_an_escaping_path_is_refused_before_any_job_exists(cli: Cli) -> None:
    """Refused at submit, from the script alone: no job, nothing written anywhere."""
    cli.room()
    scripts = {p: cli.script(_write_step(p.format(tmp=cli.tmp))) for p in STATIC_ESCAPES}
    before = _snapshot(cli.tmp, skip=cli.home)
    for path, explained in STATIC_ESCAPES.items():
        script = scripts[path]
        refused = cli("submit", "sample", "escape", "--agent", f"script:{script}", expect=2)
        assert refused.stdout == "", path
        assert refused.stderr.startswith("error:") and len(refused.stderr.splitlines()) == 1
        assert explained in refused.stderr and script.name in refused.stderr, refused.stderr
    assert cli.json("jobs") == []
    assert _snapshot(cli.tmp, skip=cli.home) == before, "no file appeared or changed anywhere"


def test_a_write_through_a_symlink_out_of_the_workspace_fails_the_job(cli: Cli) -> None:
    """Symlinks are only known once the workspace exists, so the job itself fails, safely."""
    outside = cli.tmp / "outside_dir"
    outside.mkdir()
    (outside / "target.txt").write_text("keep me\n")
    (cli.repo / "link").symlink_to(outside)
    (cli.repo / "file-link").symlink_to(outside / "target.txt")
    (cli.repo / "git-link").symlink_to(".git")
    cli.git("add", "link", "file-link", "git-link")
    cli.git(*OWNER, "commit", "--quiet", "-m", "Add links")
    cli.room()
    base = cli.git("rev-parse", "main")
    planted = cli.tmp / "planted_dir"
    planted.mkdir()

    escapes = {
        "committed dir link": "write: {path: link/pwned.txt, content: x}",
        "committed file link": "append: {path: file-link, content: x}",
        "link to .git": "write: {path: git-link/config, content: x}",
        "link the agent made": (
            f"run: \"ln -s '{planted}' made-link\"\n  - write: {{path: made-link/pwned.txt, "
            "content: x}"
        ),
    }
    jobs = {}
    for name, step in escapes.items():
        script = f'steps:\n  - write: {{path: ok.txt, content: "fine\\n"}}\n  - {step}\n'
        script += '  - finish: {summary: "should never get here"}\n'
        jobs[name] = cli.submit(script, f"escape via {name}")
    before = _snapshot(cli.tmp, skip=cli.home)
    cli.work()

    for name, job in jobs.items():
        detail = cli.show(job)
        assert (detail["status"], detail["stage"]) == ("failed", "failed"), name
        diagnosis = detail["diagnosis"]
        if name == "link to .git":
            assert ".git folder, which is off limits" in diagnosis, diagnosis
        else:
            assert "leads outside the workspace through a symlink" in diagnosis, diagnosis
        cli.assert_private(diagnosis)
        assert detail["effects"] == [] and detail["review"] is None, name
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]
    assert (outside / "target.txt").read_text() == "keep me\n"
    assert list(planted.iterdir()) == []
    assert _snapshot(cli.tmp, skip=cli.home) == before, "nothing changed outside cairn's home"
    assert cli.git("rev-parse", "main") == base
    assert cli.git("for-each-ref", "refs/heads/cairn") == ""


def _snapshot(root: Path, skip: Path | None = None) -> dict[str, bytes | str]:
    """Every file under `root` (symlinks as their target), except under `skip`."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        if path.is_symlink():
            found[str(path)] = f"-> {path.readlink()}"
        elif path.is_file():
            found[str(path)] = path.read_bytes()
    return found
