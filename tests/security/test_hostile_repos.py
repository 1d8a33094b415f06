"""A repository whose config, hooks or attributes name programs cannot run them through cairn.

Each test plants one setting that makes git run a marker program, drives every git operation
cairn performs on a job (baseline fetch, workspace, measuring, diffstat, commit, push, merge
into a checked-out base, reading the checkout's state), asserts the marker never ran, and then
shows, with plain git, that the same setting does run it: the trap was real.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from cairn.testing.repos import commit_file, make_sample_repo
from cairn.workspace.delivery import merge_into_base, push_branch
from cairn.workspace.git import GitError
from cairn.workspace.mirror import Mirror, checkout_changes
from cairn.workspace.worktree import Worktree


@pytest.fixture(autouse=True)
def isolated_git_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's global git config, empty unless a test plants something in it."""
    config = tmp_path / "global.gitconfig"
    config.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return config


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "marker"


@pytest.fixture
def evil(tmp_path: Path, marker: Path) -> Path:
    """A program that leaves a mark, then passes its input through (so filters still work)."""
    program = tmp_path / "evil.sh"
    program.write_text(f'#!/bin/sh\necho "ran $0 $*" >> "{marker}"\ncat\n')
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    return program


@pytest.fixture
def project(tmp_path: Path) -> Path:
    repo = make_sample_repo(tmp_path / "project")
    commit_file(repo, ".gitattributes", "* filter=evil diff=evil merge=evil\n", "Attributes")
    return repo


def plain_git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A person's git: no hardening, so planted settings take effect."""
    identity = ("-c", "user.name=P", "-c", "user.email=p@example.com")
    return subprocess.run(
        ["git", *identity, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def configure(repo_or_file: Path, *settings: tuple[str, str]) -> None:
    for key, value in settings:
        where = ["--file", str(repo_or_file)] if repo_or_file.is_file() else []
        cwd = repo_or_file.parent if repo_or_file.is_file() else repo_or_file
        assert plain_git(cwd, "config", *where, key, value).returncode == 0


def whole_job(project: Path, home: Path, name: str = "job-1") -> Worktree:
    """Every git operation cairn performs for one job, ending merged into the checked-out base."""
    mirror = Mirror(home / "mirrors" / "room.git", str(project), "main")
    baseline = mirror.fetch_baseline()
    tree = Worktree(mirror, home / "workspaces" / name, f"cairn/{name}")
    tree.ensure(baseline)
    (tree.path / "src" / "app.py").write_text("def greet(name):\n    return f'Hi {name}'\n")
    (tree.path / f"{name}.txt").write_text("new\n")
    tree.content_id()
    tree.changed_files(baseline)
    tree.diffstat(baseline)
    sha = tree.commit(baseline, "A job's change")
    push_branch(mirror, sha, f"cairn/{name}")
    assert checkout_changes(str(project), "main") == []
    assert merge_into_base(mirror, sha, "Merge").merged
    return tree


def assert_never_ran(marker: Path) -> None:
    assert not marker.exists(), marker.read_text()


def test_hooks_in_the_repository_and_a_hooks_path_never_run(
    project: Path, tmp_path: Path, evil: Path, marker: Path
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("pre-commit", "post-checkout", "post-merge", "reference-transaction",
                 "pre-push", "post-update", "pre-receive", "update", "post-rewrite"):  # fmt: skip
        (hooks / name).symlink_to(evil)
        (project / ".git" / "hooks").mkdir(exist_ok=True)
        (project / ".git" / "hooks" / name).symlink_to(evil)
    configure(project, ("core.hooksPath", str(hooks)))
    whole_job(project, tmp_path / "home")
    assert_never_ran(marker)
    plain_git(project, "commit", "--allow-empty", "-qm", "by a person")
    assert "pre-commit" in marker.read_text()


def test_fsmonitor_never_runs(project: Path, tmp_path: Path, evil: Path, marker: Path) -> None:
    configure(project, ("core.fsmonitor", str(evil)))
    whole_job(project, tmp_path / "home")
    assert_never_ran(marker)
    plain_git(project, "status")
    assert marker.exists()


def test_filter_drivers_of_the_checkout_never_run(
    project: Path, tmp_path: Path, evil: Path, marker: Path
) -> None:
    configure(
        project,
        ("filter.evil.clean", str(evil)),
        ("filter.evil.smudge", str(evil)),
        ("filter.evil.required", "true"),
    )
    (project / "README.md").touch()  # a stat change makes status read (and clean) the file
    whole_job(project, tmp_path / "home")
    assert_never_ran(marker)
    (project / "README.md").write_text("edited\n")
    plain_git(project, "status")
    assert "ran" in marker.read_text()


def test_a_process_filter_never_starts(
    project: Path, tmp_path: Path, evil: Path, marker: Path
) -> None:
    configure(project, ("filter.evil.process", str(evil)))
    (project / "README.md").touch()
    whole_job(project, tmp_path / "home")
    assert_never_ran(marker)
    (project / "README.md").write_text("edited\n")
    plain_git(project, "add", "README.md")
    assert marker.exists()


def test_drivers_from_the_users_own_config_never_run_on_a_jobs_workspace(
    project: Path, tmp_path: Path, evil: Path, marker: Path, isolated_git_config: Path
) -> None:
    # Attributes committed in the repository name drivers the user's config defines: the agent
    # controls `.gitattributes` in its workspace, so no driver may run on cairn's git calls.
    configure(
        isolated_git_config,
        ("filter.evil.clean", str(evil)),
        ("filter.evil.smudge", str(evil)),
        ("diff.evil.command", str(evil)),
        ("diff.evil.textconv", str(evil)),
        ("merge.evil.driver", f"{evil} %O %A %B"),
        ("diff.external", str(evil)),
        ("core.pager", str(evil)),
        ("pager.diff", str(evil)),
    )
    commit_file(project, "src/app.py", "# base change\n", "Change the base")  # smudged on checkout
    tree = whole_job(project, tmp_path / "home")
    assert_never_ran(marker)
    plain_git(tree.path, "diff", "HEAD~1")
    assert marker.exists()


@pytest.mark.parametrize(
    "form",
    [
        "plain",
        "included",  # through an include git finds however it is written
        "included-after-a-bom",
        "included-from-a-second-header",
        "linked-into-the-workspace",  # the user's config a link into the agent's worktree
    ],
)
def test_no_driver_a_config_names_runs_in_cairns_own_repositories(
    project: Path,
    tmp_path: Path,
    evil: Path,
    marker: Path,
    isolated_git_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
) -> None:
    # The mirror's info/attributes unsets every filter and merge driver for every path, and
    # outranks the job's own .gitattributes: whatever the config says (or comes to say while
    # cairn runs), no driver is chosen, so cairn's git there never asks the config first.
    drivers = (
        f'[filter "evil"]\n\tclean = {evil}\n\tsmudge = {evil}\n'
        f'[merge "evil"]\n\tdriver = {evil} %O %A %B\n'
    )
    tree = whole_job(project, tmp_path / "home")
    included = tmp_path / "included.gitconfig"
    included.write_text(drivers)
    monkeypatch.chdir(tree.path)  # where /proc/self/cwd leads for git and for cairn
    config = {
        "plain": drivers,
        "included": f"[include]\n\tpath = {included}\n",
        "included-after-a-bom": f"\ufeff[include]\n\tpath = {included}\n",
        "included-from-a-second-header": f"[core][include]\n\tpath = {included}\n",
    }
    if form == "linked-into-the-workspace":
        isolated_git_config.unlink()
        isolated_git_config.symlink_to("/proc/self/cwd/.agent-config")
        (tree.path / ".agent-config").write_text(drivers)
        (project / ".agent-config").write_text(drivers)  # for the control below
    else:
        isolated_git_config.write_text(config[form])
    (tree.path / "src" / "app.py").write_text("print('edited again')\n")
    tree.content_id()
    tree.diffstat(tree.head())
    second = Worktree(tree.mirror, tree.path.with_name("job-2"), "cairn/job-2")
    second.ensure(tree.head())  # a checkout: smudge filters would run here
    (second.path / "job-2.txt").write_text("two\n")
    second.commit(tree.head(), "Job 2")
    assert_never_ran(marker)
    # The control: the same config makes a person's git run the filter in their checkout,
    # whose attributes name it (in cairn's worktrees the mirror's attributes unset it).
    (project / "README.md").write_text("edited by a person\n")
    plain_git(project, "add", "README.md")
    assert marker.exists()


def test_cairn_puts_back_the_mirrors_attributes_before_its_next_git_call(
    project: Path, tmp_path: Path, evil: Path, marker: Path, isolated_git_config: Path
) -> None:
    configure(isolated_git_config, ("filter.evil.clean", str(evil)))
    tree = whole_job(project, tmp_path / "home")
    attributes = tree.mirror.path / "info" / "attributes"
    attributes.write_text("* filter=evil\n")  # someone with access to cairn's home
    (tree.path / "src" / "app.py").write_text("print('edited again')\n")
    tree.content_id()
    assert_never_ran(marker)
    assert attributes.read_text() == "* !filter !merge\n"


def test_an_ssh_command_behind_a_url_rewrite_never_runs(
    project: Path, tmp_path: Path, evil: Path, marker: Path
) -> None:
    # The person's repository rewrites every local path into an ssh URL with its own ssh
    # command: cairn fetches from its mirror into that repository to merge.
    ssh = tmp_path / "ssh.sh"  # marks, then hangs up at once (no `cat` waiting on git's pipe)
    ssh.write_text(f'#!/bin/sh\necho "ran ssh $*" >> "{marker}"\nexit 1\n')
    ssh.chmod(0o755)
    configure(project, ("url.ssh://evil.example/.insteadOf", "/"), ("core.sshCommand", str(ssh)))
    home = tmp_path / "home"
    with pytest.raises(GitError, match="could not push"):
        whole_job(project, home)  # refused: only the file protocol may reach a local path
    assert_never_ran(marker)
    plain_git(project, "fetch", str(home / "mirrors" / "room.git"))
    assert marker.exists()


def test_a_pack_objects_hook_in_the_repository_is_ignored(
    project: Path, tmp_path: Path, evil: Path, marker: Path, isolated_git_config: Path
) -> None:
    configure(project, ("uploadpack.packObjectsHook", str(evil)))
    whole_job(project, tmp_path / "home")
    assert_never_ran(marker)
    # The control: the same hook in the user's own config (git honours it only there) runs.
    configure(isolated_git_config, ("uploadpack.packObjectsHook", str(evil)))
    plain_git(tmp_path, "clone", "--no-local", "-q", str(project), str(tmp_path / "control"))
    assert marker.exists()


def test_an_alternate_refs_command_never_runs(
    project: Path, tmp_path: Path, evil: Path, marker: Path
) -> None:
    borrowed = tmp_path / "borrowed.git"
    assert plain_git(tmp_path, "clone", "-q", "--bare", str(project), str(borrowed)).returncode == 0
    (project / ".git" / "objects" / "info" / "alternates").write_text(f"{borrowed}/objects\n")
    configure(project, ("core.alternateRefsCommand", str(evil)))
    home = tmp_path / "home"
    whole_job(project, home)
    assert_never_ran(marker)
    plain_git(project, "fetch", "-q", str(home / "mirrors" / "room.git"), "refs/heads/*:refs/x/*")
    assert marker.exists()


def test_a_rewritten_git_pointer_stops_cairns_git(
    project: Path, tmp_path: Path, evil: Path, marker: Path
) -> None:
    # An agent running unsandboxed could point its workspace at a repository of its making.
    tree = whole_job(project, tmp_path / "home")
    crafted = tmp_path / "crafted"
    assert plain_git(tmp_path, "init", "-q", str(crafted)).returncode == 0
    configure(crafted, ("filter.evil.clean", str(evil)), ("core.fsmonitor", str(evil)))
    (tree.path / ".git").write_text(f"gitdir: {crafted / '.git'}\n")
    with pytest.raises(Exception, match="no longer points at cairn's copy"):
        tree.content_id()
    assert_never_ran(marker)


@pytest.mark.parametrize(
    "pointer",
    [
        "gitdir:  {admin}\n",  # git reads " {admin}": a folder inside the worktree
        "gitdir:\t{admin}\n",
        "gitdir: {admin} \n",
        "gitdir: {admin}\x00\n",  # git stops reading at the NUL
        "gitdir: {admin}\nmore\n",
        " gitdir: {admin}\n",
    ],
    ids=["two-spaces", "tab", "trailing-space", "nul", "second-line", "leading-space"],
)
def test_a_pointer_git_would_read_otherwise_than_cairn_stops_cairns_git(
    project: Path, tmp_path: Path, evil: Path, marker: Path, pointer: str
) -> None:
    # What a sandboxed agent can write: its own `.git` names cairn's entry for the job to a
    # reader that trims spaces, while git takes the spaces as part of the path, here a folder
    # of the agent's making inside its worktree, holding a repository with its own config.
    tree = whole_job(project, tmp_path / "home")
    admin = plain_git(tree.path, "rev-parse", "--path-format=absolute", "--git-dir").stdout.strip()
    crafted = Path(f"{tree.path}/ {admin}")
    assert plain_git(tmp_path, "init", "-q", "--bare", str(crafted)).returncode == 0
    configure(crafted, ("filter.evil.clean", str(evil)), ("core.fsmonitor", str(evil)))
    (tree.path / ".git").write_text(pointer.format(admin=admin))
    assert not tree.is_valid()
    with pytest.raises(Exception, match="no longer points at cairn's copy"):
        tree.content_id()
    assert_never_ran(marker)


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_git_pointer_that_is_no_plain_file_is_refused_at_once(
    project: Path, tmp_path: Path, kind: str
) -> None:
    tree = whole_job(project, tmp_path / "home")
    pointer = tree.path / ".git"
    copy = tmp_path / "pointer"
    copy.write_bytes(pointer.read_bytes())
    pointer.unlink()
    if kind == "fifo":
        os.mkfifo(pointer)  # read as a file, it would never answer
    else:
        pointer.symlink_to(copy)
    assert not tree.is_valid()
    with pytest.raises(Exception, match="no longer points at cairn's copy"):
        tree.content_id()
