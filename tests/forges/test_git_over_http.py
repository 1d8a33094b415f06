"""git push and fetch over smart HTTP against FakeForge, the token handed over by GIT_ASKPASS."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cairn.forges import ForgeSettings
from cairn.forges.git_access import PROBE_BRANCH, probe_git
from cairn.testing.fake_forge import READ, FakeForge
from cairn.workspace.askpass import NO_CREDENTIAL_HELPERS, askpass_environment
from cairn.workspace.git import GitError, run_git

REPO = "acme/app"
KINDS = pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)


def _settings(forge: FakeForge) -> ForgeSettings:
    return ForgeSettings(forge.kind, REPO, forge.url, token_env="TOKEN")


def _clone(forge: FakeForge, token: str, into: Path) -> None:
    settings = _settings(forge)
    with askpass_environment(settings.git_username, token) as env:
        run_git(*NO_CREDENTIAL_HELPERS, "clone", "-q", settings.git_url, str(into), env=env)


def _push(forge: FakeForge, token: str, clone: Path, branch: str) -> None:
    settings = _settings(forge)
    with askpass_environment(settings.git_username, token) as env:
        run_git(
            *NO_CREDENTIAL_HELPERS, "push", "-q", settings.git_url, f"HEAD:refs/heads/{branch}",
            cwd=clone, env=env,
        )  # fmt: skip


def _commit(clone: Path) -> str:
    (clone / "NEW.txt").write_text("new\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@x"]
    subprocess.run([*git, "add", "NEW.txt"], cwd=clone, check=True)
    subprocess.run([*git, "commit", "-qm", "new"], cwd=clone, check=True)
    return run_git("rev-parse", "HEAD", cwd=clone)


@KINDS
def test_fetch_and_push_with_the_token_through_askpass(
    fake_forge: FakeForge, tmp_path: Path
) -> None:
    assert fake_forge.test_token is not None
    _clone(fake_forge, fake_forge.test_token, tmp_path / "clone")
    sha = _commit(tmp_path / "clone")
    _push(fake_forge, fake_forge.test_token, tmp_path / "clone", "cairn/job-1")
    assert fake_forge.branch_sha(REPO, "cairn/job-1") == sha
    pushes = [c for c in fake_forge.calls if c.path.endswith("git-receive-pack")]
    assert pushes and all(c.user == "cairn-bot" for c in pushes)


def test_a_wrong_token_cannot_fetch(fake_forge: FakeForge, tmp_path: Path) -> None:
    with pytest.raises(GitError) as refused:
        _clone(fake_forge, "not-the-token", tmp_path / "clone")
    assert "not-the-token" not in str(refused.value) + refused.value.detail
    assert not (tmp_path / "clone" / ".git").exists()


def test_a_read_only_token_fetches_but_cannot_push(fake_forge: FakeForge, tmp_path: Path) -> None:
    reader = fake_forge.add_token(scopes={READ})
    _clone(fake_forge, reader, tmp_path / "clone")
    _commit(tmp_path / "clone")
    with pytest.raises(GitError):
        _push(fake_forge, reader, tmp_path / "clone", "cairn/job-2")
    assert fake_forge.branch_sha(REPO, "cairn/job-2") is None


def test_the_token_is_never_written_to_disk_or_a_url(fake_forge: FakeForge) -> None:
    token = fake_forge.test_token
    assert token is not None
    with askpass_environment("x-access-token", token) as env:
        script = Path(env["GIT_ASKPASS"])
        assert token not in script.read_text()
        assert script.stat().st_mode & 0o777 == 0o700
        assert script.parent.stat().st_mode & 0o077 == 0
        assert all(
            token not in value for name, value in env.items() if name != "CAIRN_GIT_CREDENTIAL"
        )
    assert not script.exists()


@KINDS
def test_probe_pushes_nothing_and_names_what_is_missing(fake_forge: FakeForge) -> None:
    settings = _settings(fake_forge)
    main = fake_forge.branch_sha(REPO, "main")
    assert fake_forge.test_token is not None
    full = probe_git(settings, fake_forge.test_token, "main", timeout=20)
    assert (full.base_tip, full.problems) == (main, ())
    assert fake_forge.branch_sha(REPO, PROBE_BRANCH) is None
    assert fake_forge.branch_sha(REPO, "main") == main
    reader = probe_git(settings, fake_forge.add_token(scopes={READ}), "main", timeout=20)
    assert reader.base_tip == main
    assert len(reader.problems) == 1 and "may not push" in reader.problems[0]
    wrong = probe_git(settings, "wrong-token", "main", timeout=20)
    assert wrong.base_tip is None and "401" in wrong.problems[0]
    missing = probe_git(settings, fake_forge.test_token, "trunk", timeout=20)
    assert "no branch 'trunk'" in missing.problems[0]


@KINDS
def test_a_refusal_is_read_from_git_s_status_line_not_from_any_number(
    fake_forge: FakeForge,
) -> None:
    """The forge's port or a commit id may contain "401"; only git's status line counts."""
    from cairn.forges.git_access import _refusal

    settings = _settings(fake_forge)
    stderr = (
        "remote: Permission to acme/app denied.\n"
        "fatal: unable to access 'http://127.0.0.1:40123/acme/app.git/': "
        "The requested URL returned error: 403\n"
    )
    assert "may not push" in _refusal(settings, stderr, pushing=True)
    assert "401" in _refusal(settings, stderr.replace("error: 403", "error: 401"), pushing=True)
