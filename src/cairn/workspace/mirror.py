"""A room's bare mirror under cairn's home, and a read-only look at a person's checkout."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cairn.errors import WorkspaceError
from cairn.locks import ReentrantLock
from cairn.workspace import fetch_stamp
from cairn.workspace.askpass import NO_CREDENTIAL_HELPERS, GitCredential, credential_environment
from cairn.workspace.commands import MATERIALIZED_FOLDERS
from cairn.workspace.git import (
    GitError,
    GitTimeout,
    check_branch_name,
    local_path,
    run_git,
    transport_address,
    transport_settings,
    try_git,
)
from cairn.workspace.git_locks import DEAD_AFTER, clear_stale

_NO_DRIVERS = "* !filter !merge\n"
"""Attributes for every path: no filter driver and no merge driver (diffs are run with
`--no-ext-diff --no-textconv`, so no diff driver runs either)."""
_MATERIALIZED = "".join(f"/{name}/\n" for name in MATERIALIZED_FOLDERS)


def _keep(path: Path, wanted: str) -> None:
    """Make the file at `path` (in the mirror's own info folder) hold exactly `wanted`.

    Replaced whole (never truncated, then written): git calls of other runners may read it.
    """
    try:
        if path.read_bytes() == wanted.encode():  # before every git call: not in text mode
            return
    except OSError:
        pass
    path.parent.mkdir(exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}-", delete=False
    ) as written:
        written.write(wanted)
    os.replace(written.name, path)


class Mirror:
    """The bare mirror of one room's repository; job worktrees are added from it.

    `git_timeout` is how long (in seconds) a call that reaches the room's repository may go
    without an answer before it is stopped; None waits as long as git does. `credential`
    logs in to a forge's HTTPS git (through askpass, never in a URL).
    """

    def __init__(
        self,
        path: Path,
        repo: str,
        base_branch: str,
        *,
        git_timeout: float | None = None,
        credential: GitCredential | None = None,
    ) -> None:
        self.path = Path(path).absolute()
        self.repo = repo
        self.base_branch = base_branch
        self.git_timeout = git_timeout
        self.credential = credential

    def __repr__(self) -> str:
        return f"Mirror(base_branch={self.base_branch!r})"

    @property
    def base_ref(self) -> str:
        """Where the mirror keeps the last fetched tip of the base branch."""
        return f"refs/remotes/origin/{self.base_branch}"

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the mirror's host-wide lock; re-entrant within one process.

        For a job's commit, a merge into the base branch, and (through `reshaping`) what
        changes the mirror's worktrees. Fetching takes `fetch_lock` instead, so a job's fetch
        never waits on another job's commit (taken after this one where both are held, never
        before it).
        """
        with ReentrantLock.of(self.lock_path).held():
            yield

    @contextmanager
    def fetch_lock(self) -> Iterator[None]:
        """Hold the host-wide lock under which the mirror is cloned and fetched into: two
        fetches into one repository would both lock the base branch's ref."""
        with ReentrantLock.of(self.path.with_name(self.path.name + ".fetch.lock")).held():
            yield

    @contextmanager
    def reshaping(self) -> Iterator[None]:
        """Hold both locks while worktrees are added or removed, or the mirror is repacked.

        A fetch reads every worktree's HEAD (it leaves out what any ref or HEAD already has),
        and `worktree add` first writes a HEAD of zeros that git reads as a bad object: a
        fetch in that moment fails.
        """
        with self.lock(), self.fetch_lock():
            yield

    def delete_ref(self, ref: str, old: str, *, failure: str) -> None:
        """Delete one of cairn's refs from the mirror if it still points at `old`."""
        with self.lock():
            self.clear_dead_lock("packed-refs")
            self.git("update-ref", "-d", ref, old, failure=failure)

    def clear_dead_lock(self, name: str) -> None:
        """Remove git's lock on the mirror's file `name` once it is a dead git's.

        Only for files that cairn's gits write under the lock held now: `packed-refs`
        (locked by each ref deletion and by `git gc`, all under `lock`), the commit-graph and
        multi-pack index (`git gc`, under `reshaping`) and the base branch's ref (fetches,
        under `fetch_lock`). No git of cairn's can hold such a lock then, and any other git
        (an administrator's `git gc`) holds it for moments: one older than `DEAD_AFTER`
        seconds was left by a git that was killed, and would stop every later deletion,
        fetch or repack on this host.
        """
        clear_stale([self.path / f"{name}.lock"], DEAD_AFTER)

    def unlock_interrupted_adds(self) -> bool:
        """Unlock the worktree entries that a `git worktree add` killed midway left locked;
        whether there were any. Only while `reshaping`, when no add is running here.

        git locks a new entry ("initializing") before it writes the worktree's `.git` and
        unlocks it once the checkout is done. A runner SIGKILLed in between leaves the lock:
        `worktree prune` keeps locked entries, `worktree remove` refuses an entry without its
        `.git`, and every later add at that path fails as "missing but locked".
        """
        unlocked = False
        for lock in (self.path / "worktrees").glob("*/locked"):
            try:
                if lock.read_text(encoding="utf-8").strip() == "initializing":
                    lock.unlink()
                    unlocked = True
            except (OSError, UnicodeDecodeError):
                continue
        return unlocked

    def exists(self) -> bool:
        return (self.path / "HEAD").is_file() and (self.path / "objects").is_dir()

    def git(self, *args: str, **kwargs: Any) -> str:
        """Run a hardened git command inside the mirror."""
        return run_git(*args, cwd=self.path, own_repository=self.drivers_unset(), **kwargs)

    def drivers_unset(self) -> bool:
        """Whether no filter or merge driver can run for any path in the mirror or its worktrees.

        The mirror's info/attributes unsets both attributes for every path, and git ranks it
        above every `.gitattributes` (a job's own included) and the user's attributes, so
        whatever drivers a config names, none is ever chosen. Checked (and written again if
        changed) before each git call there; False before the mirror exists.
        """
        if not self.exists():
            return False
        _keep(self.path / "info" / "attributes", _NO_DRIVERS)
        return True

    def remote_git(self, *args: str, **kwargs: Any) -> str:
        """Run a git command that reaches the room's repository, logged in when it needs to."""
        if self.credential is None:
            return run_git(*args, **kwargs)
        with credential_environment(self.credential) as env:
            return run_git(*NO_CREDENTIAL_HELPERS, *args, env=env, **kwargs)

    def fetch_baseline(self) -> str:
        """Fetch the authoritative base branch (cloning first if needed); return its tip.

        A fetch that started after this call did, which it waited for under the fetch lock
        (another job's), serves as its own: see `fetch_stamp`.
        """
        check_branch_name(self.base_branch)
        asked = fetch_stamp.now()
        with self.fetch_lock():
            if not self.exists():
                self._clone()
            self._exclude_materialized()
            if not fetch_stamp.fetched_since(self.path, self.repo, self.base_branch, asked):
                fetch_stamp.forget(self.path)
                started = fetch_stamp.now()
                held = self._local_tip_held()
                if held is not None:
                    fetch_stamp.record(self.path, self.repo, self.base_branch, started)
                    return held
                self.clear_dead_lock(self.base_ref)
                self._fetch_base()
                fetch_stamp.record(self.path, self.repo, self.base_branch, started)
            return self.git("rev-parse", "--verify", f"{self.base_ref}^{{commit}}")

    def _local_tip_held(self) -> str | None:
        """The base branch's tip when the room's repository is on this host and the mirror
        already holds that tip as its base: a fetch would change nothing. None otherwise.

        Two lookups cost a fraction of a fetch, which starts an upload-pack and negotiates.
        The repository is looked for where a fetch finds it (the folder, or its `.git`), never
        in a folder above it; anything unexpected leaves the answer to the fetch.
        """
        path = local_path(self.repo)
        if path is None or not path.is_dir():
            return None
        # git compares the ceiling with the real folder, and splits it at colons.
        path = path.resolve()
        if ":" in str(path.parent):
            return None
        ceiling = {"GIT_CEILING_DIRECTORIES": str(path.parent)}
        tip = f"refs/heads/{self.base_branch}^{{commit}}"
        theirs = try_git(
            "rev-parse", "--verify", "--quiet", tip,
            cwd=path, env=ceiling, timeout=self.git_timeout,
        )  # fmt: skip
        if theirs.returncode != 0 or not theirs.stdout:
            return None
        ours = try_git(
            "rev-parse", "--verify", "--quiet", f"{self.base_ref}^{{commit}}", cwd=self.path
        )
        return ours.stdout if ours.returncode == 0 and ours.stdout == theirs.stdout else None

    def _clone(self) -> None:
        # Clone beside the final path and rename, so an interrupted clone never looks finished.
        staging = self.path.with_name(self.path.name + ".partial")
        if staging.exists():
            shutil.rmtree(staging)  # cairn's own leftover from an interrupted clone
        if self.path.exists():
            raise WorkspaceError(
                "the room's mirror folder exists but is not a git mirror; "
                "move it aside and run the job again"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        address = transport_address(self.repo)
        try:
            # --no-local: even a local source goes through git's transport, never a file copy
            # of its object folder (which a hostile repository could fill with symlinks).
            self.remote_git(
                *transport_settings(self.repo),
                "clone", "--bare", "--no-local", "--quiet", "--template=",
                "--", address, str(staging),
                timeout=self.git_timeout,
            )  # fmt: skip
        except GitTimeout:
            raise
        except GitError as exc:
            raise GitError(
                "git could not copy the room's repository; check that it exists and is reachable",
                detail=exc.detail,
                returncode=exc.returncode,
            ) from None
        # Job commits and merge commits are fetched from here by sha before any ref names them.
        run_git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=staging)
        self.no_automatic_gc(staging)
        # The repository's branches stay out: the mirror's `refs/heads` holds only the branches
        # cairn made for its jobs, so a job's branch found there is that job's own work. (The
        # base branch is fetched under `refs/remotes/origin/`.)
        copied = run_git("for-each-ref", "--format=delete %(refname)", "refs/heads/", cwd=staging)
        run_git("update-ref", "--stdin", cwd=staging, input=f"{copied}\n" if copied else "")
        staging.rename(self.path)

    def no_automatic_gc(self, path: Path | None = None) -> None:
        """Make every git that works in the mirror (or `path`), an agent's in a workspace
        included, leave repacking to cairn: cairn's own gits pass the same settings, but an
        agent running without a sandbox could otherwise start a gc there in the middle of a
        job (`cairn gc` repacks, under the mirror's lock)."""
        for key, value in (("gc.auto", "0"), ("maintenance.auto", "false")):
            run_git("config", key, value, cwd=path or self.path)

    def _exclude_materialized(self) -> None:
        """Keep dependencies cairn materializes into workspaces out of every job's content."""
        _keep(self.path / "info" / "exclude", _MATERIALIZED)

    def _fetch_base(self) -> None:
        refspec = f"+refs/heads/{self.base_branch}:{self.base_ref}"
        address = transport_address(self.repo)
        try:
            self.remote_git(
                *transport_settings(self.repo),
                "fetch", "--quiet", "--no-tags", "--no-prune", "--no-write-fetch-head",
                "--", address, refspec,
                cwd=self.path, timeout=self.git_timeout,
            )  # fmt: skip
        except GitTimeout:
            raise
        except GitError as exc:
            if "couldn't find remote ref" in exc.detail:
                message = (
                    f"the branch {self.base_branch!r} does not exist in the room's repository; "
                    "check the room's base branch"
                )
            else:
                message = (
                    f"git could not fetch branch {self.base_branch!r} from the room's repository"
                )
            raise GitError(message, detail=exc.detail, returncode=exc.returncode) from None


def checked_out_base(repo: str, base_branch: str) -> Path | None:
    """The checkout when `repo` is a local non-bare repository with `base_branch` checked out."""
    path = local_path(repo)
    if path is None or not path.is_dir():
        return None
    # One git call: a bare repository fails `--show-toplevel`, a detached HEAD is "HEAD".
    found = try_git(
        "rev-parse", "--is-bare-repository", "--show-toplevel", "--symbolic-full-name", "HEAD",
        cwd=path,
    )  # fmt: skip
    lines = found.stdout.split("\n")
    if found.returncode != 0 or len(lines) < 3 or lines[0] != "false":
        return None
    # The address must be the top of a checkout, not a folder inside some other repository.
    top = "\n".join(lines[1:-1])  # a folder's name may hold a newline
    if Path(top).resolve() != path.resolve():
        return None
    return path if lines[-1] == f"refs/heads/{base_branch}" else None


def checkout_changes(repo: str, base_branch: str) -> list[str]:
    """Paths with uncommitted changes in a checkout of the base branch; never modifies it."""
    checkout = checked_out_base(repo, base_branch)
    if checkout is None:
        return []
    # GIT_OPTIONAL_LOCKS=0 (set on every call) keeps status from refreshing the person's index.
    out = run_git(
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        cwd=checkout,
        failure="git could not read the state of the base branch's checkout",
    )
    return sorted({entry[3:] for entry in out.split("\0") if len(entry) > 3})
