"""Small, realistic git repositories for the demo and the tests.

`make_sample_repo` builds a tiny Python project whose own test suite passes under pytest;
`commit_file` adds one commit to it. Commits use a fixed identity and date, so the same
steps always produce the same commit ids. `python_project` and `npm_project` write just the
declarations file of a project without dependencies, for the dependency installers.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from cairn.workspace.base_checkout import merge_carrier
from cairn.workspace.git import run_git

SAMPLE_IDENTITY = {
    "GIT_AUTHOR_NAME": "Sample Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_AUTHOR_DATE": "2024-01-01T12:00:00+00:00",
    "GIT_COMMITTER_NAME": "Sample Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_COMMITTER_DATE": "2024-01-01T12:00:00+00:00",
}

SAMPLE_FILES = {
    "README.md": (
        "# greeter\n"
        "\n"
        "A tiny Python project used by cairn's demo and tests.\n"
        "\n"
        "Run the tests with `python -m pytest`.\n"
    ),
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n.venv/\n",
    "pyproject.toml": (
        "[project]\n"
        'name = "greeter"\n'
        'version = "0.1.0"\n'
        'requires-python = ">=3.11"\n'
        "\n"
        "[dependency-groups]\n"
        'dev = ["pytest==8.3.4"]\n'
        "\n"
        "[tool.pytest.ini_options]\n"
        'pythonpath = ["src"]\n'
        'testpaths = ["tests"]\n'
    ),
    "src/app.py": (
        '"""Greetings for people."""\n'
        "\n"
        "\n"
        "def greet(name: str) -> str:\n"
        '    """Return a friendly greeting for `name`."""\n'
        '    return f"Hello, {name}!"\n'
    ),
    "tests/test_app.py": (
        "from app import greet\n"
        "\n"
        "\n"
        "def test_greet_names_the_person():\n"
        '    assert greet("Ada") == "Hello, Ada!"\n'
    ),
}


def make_sample_repo(path: Path, *, branch: str = "main") -> Path:
    """Create a small Python project at `path` with one commit on `branch`; return `path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    run_git("init", "--quiet", "--template=", f"--initial-branch={branch}", cwd=path)
    for relpath, content in SAMPLE_FILES.items():
        _write(path / relpath, content)
    run_git("add", "--all", cwd=path)
    run_git("commit", "--quiet", "-m", "Start the greeter project", cwd=path, env=SAMPLE_IDENTITY)
    return path


def commit_file(repo: Path, relpath: str, content: str | bytes, message: str) -> str:
    """Write `content` to `relpath` in `repo`, commit just that file, and return the commit."""
    _write(Path(repo) / relpath, content)
    run_git("add", "--", relpath, cwd=repo)
    run_git("commit", "--quiet", "-m", message, "--", relpath, cwd=repo, env=SAMPLE_IDENTITY)
    return run_git("rev-parse", "HEAD", cwd=repo)


def kill_fast_forward_midway(repo: Path, source: Path | None, target: str) -> None:
    """Leave `repo`'s checkout as a runner SIGKILLed inside cairn's fast-forward to `target`
    does: the commit carried in under cairn's hidden ref, the index and files at `target`,
    the branch at its old tip, and the locks git held on HEAD and the branch.

    The real `git merge --ff-only` is killed, by a reference-transaction hook, at the moment
    it has locked the branch to move it. `source` holds `target` (None: `repo` already does).
    """
    if source is not None:
        fetch = ("fetch", "--quiet", "--no-tags", str(source), f"{target}:{merge_carrier(target)}")
        subprocess.run(["git", *fetch], cwd=repo, check=True, capture_output=True)
    else:
        run_git("update-ref", merge_carrier(target), target, cwd=repo)
    with tempfile.TemporaryDirectory(prefix="cairn-hooks-") as hooks:
        hook = Path(hooks) / "reference-transaction"
        # Called with the state ("prepared": every lock taken) and the updates on stdin.
        hook.write_text(
            '#!/bin/sh\nif [ "$1" = prepared ] && grep -q " refs/heads/"; then kill -9 $PPID; fi\n'
        )
        hook.chmod(0o755)
        merge = ("-c", f"core.hooksPath={hooks}", "merge", "--ff-only", "--quiet", target)
        killed = subprocess.run(["git", *merge], cwd=repo, capture_output=True, check=False)
    if killed.returncode != -9 and killed.returncode != 137:
        raise AssertionError(f"git merge was not killed midway: {killed.returncode}")


PYPROJECT = """\
[project]
name = "demo"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = []
"""
PACKAGE_JSON = {"name": "demo", "version": "1.0.0", "private": True}


def python_project(folder: Path, extra: str = "") -> Path:
    """A pyproject.toml-only project (no dependencies yet) in `folder`; `extra` is appended."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(PYPROJECT + extra)
    return folder


def npm_project(folder: Path, **fields: object) -> Path:
    """A package.json-only project in `folder`; `fields` add to or replace its fields."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps(PACKAGE_JSON | fields, indent=2) + "\n")
    return folder


def _write(file: Path, content: str | bytes) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        file.write_bytes(content)
    else:
        file.write_text(content, encoding="utf-8")
