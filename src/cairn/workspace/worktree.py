"""A job's own worktree on its own branch (see `Job.branch_in`), added from the room's mirror."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cairn.errors import WorkspaceError
from cairn.removal import remove_tree
from cairn.workspace.bundles import bundle
from cairn.workspace.git import IDENTITY, GitError, check_branch_name, run_git, try_git
from cairn.workspace.git_locks import clear_stale
from cairn.workspace.mirror import Mirror

_ONE_FILE_INDEX = ("-c", "core.splitIndex=false")
"""A measurement's index in one file whatever a user's config says: a split index would put
its shared part in the worktree's git folder, where the agent writes too."""
STAT_WIDTH = 10_000
"""Wide enough that git never shortens a path in a diffstat with `...`."""
_POINTER_LIMIT = 4096
"""The longest `.git` pointer read: git writes one line with a path."""


_MEASUREMENT = "cairn-index-"
"""How a measurement index is named, then the writing process's id and a random part (and
git's lock on it, while git writes it)."""


def _writer_alive(name: str) -> bool:
    """Whether the process that named a measurement index `name` is still running here."""
    pid = name.removeprefix(_MEASUREMENT).partition("-")[0]
    if not pid.isdigit() or int(pid) == 0:
        return False  # named before indexes carried their process's id, or not by cairn
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


class DiffStat(NamedTuple):
    text: str
    """What `git diff --stat` prints."""
    counted: frozenset[str]
    """The paths it counts, verbatim."""


class Worktree:
    """One job's workspace: a linked worktree of the mirror, checked out on the job's branch."""

    def __init__(self, mirror: Mirror, path: Path, branch: str) -> None:
        self.mirror = mirror
        self.path = Path(path).absolute()
        self.branch = branch
        self._entries_path: tuple[str, bool] | None = None
        self._changes: dict[tuple[str, str], list[str]] = {}
        """Paths changed between two trees, by (baseline, tree): trees never change."""
        self._commits: dict[tuple[str, str, str], str] = {}
        """Commits written here, by (tree, parent, message), for the job's life in this
        process (each a few bytes): written again, one would differ only in its date."""
        self._bundle: tuple[tuple[str, str, str], bytes] | None = None
        """The last bundle made, by (tip, baseline, ref): a commit is often bundled twice."""
        self._index_name = f"{_MEASUREMENT}{os.getpid()}-{uuid.uuid4().hex}"
        """This object's measurement index, in the worktree's entry in the mirror."""
        self._indexes: set[Path] = set()
        """Where it was written: removed when this object goes."""
        self._measured: tuple[Path, str] | None = None
        """The measurement index and the tree it holds, once a measurement wrote it whole."""

    def __repr__(self) -> str:
        return f"Worktree(branch={self.branch!r})"

    @property
    def branch_ref(self) -> str:
        return f"refs/heads/{self.branch}"

    def git(self, *args: str, **kwargs: Any) -> str:
        """Run a hardened git command inside the worktree, while it is still this job's own."""
        self._own_admin()
        return run_git(*args, cwd=self.path, own_repository=self.mirror.drivers_unset(), **kwargs)

    def _own_admin(self) -> Path:
        """The mirror's entry for this worktree, while the worktree is still this job's own."""
        admin = self._valid_admin()
        if admin is None or not self._entry_names_this_folder(admin):
            # The agent owns the worktree's files; a rewritten `.git` would aim cairn's git at
            # a repository of the agent's making (with its own config), or at another job's.
            raise WorkspaceError(
                "the job's workspace no longer points at cairn's copy of the repository (its "
                ".git was changed or removed); cairn will not run git there"
            )
        return admin

    def ensure(self, baseline: str) -> bool:
        """Create the worktree at `baseline`, or reuse the existing one untouched (resume).

        True when it was created now on a new branch: then it holds the baseline's checkout
        and nothing of the job's own.
        """
        check_branch_name(self.branch)
        with self.mirror.lock():
            if self._links_to_mirror():
                # Heals a crash inside `worktree move` (admin entry still naming the old path).
                try_git("worktree", "repair", str(self.path), cwd=self.mirror.path)
            if self.is_valid():
                return False
            if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
                raise WorkspaceError(
                    "the job's workspace folder exists but is not this job's worktree; "
                    "cairn will not overwrite it"
                )
            with self.mirror.reshaping():
                try:
                    return self._add(baseline)
                except GitError:
                    # An entry of a worktree deleted without git (its branch still "checked
                    # out" there, or its path still registered) stops `worktree add`: clear
                    # those, once.
                    self.mirror.git("worktree", "prune")
                    return self._add(baseline)

    def is_valid(self) -> bool:
        """True when the folder is a worktree of this mirror with the job's branch checked out."""
        return self._valid_admin() is not None

    def _valid_admin(self) -> Path | None:
        """The mirror's entry for this worktree, when the worktree is valid (see is_valid)."""
        # Read from the files git itself reads (no git process: this runs before every step):
        # `.git` names one of the mirror's worktree entries, whose `commondir` is the mirror
        # and whose HEAD names the job's branch.
        admin = self._admin()
        if admin is None:
            return None
        try:
            # As bytes, then decoded: this runs before every git call in the worktree, and a
            # text-mode read costs twice as much.
            common = (admin / "commondir").read_bytes().decode("utf-8").strip()
            head = (admin / "HEAD").read_bytes().decode("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        if head != f"ref: {self.branch_ref}":
            return None
        # What git writes ("../..", from an entry straight under the mirror's entries) is
        # known to be the mirror; anything else is resolved.
        entries, plain = self._entries()
        written = plain and common == "../.." and str(admin.parent) == entries
        if not written and (admin / common).resolve() != self.mirror.path.resolve():
            return None
        return admin

    def clear_stale_locks(
        self,
        older_than: float,
        refs: Sequence[str] = (),
        stop: Callable[[], bool] = lambda: False,
    ) -> list[str]:
        """Clear the lock files that a killed git left on this job's branch (and `refs`, more
        of the job's own refs in the mirror) and, when the worktree is this job's own, on its
        index and HEAD; the names of those removed.

        For the runner that holds the job's lease, before it uses the branch or worktree.
        cairn's git commands hold these locks for moments. A lock younger than `older_than`
        seconds (a lease) may belong to the git of a runner that is still stopping: it is
        waited for until it is gone or that old (`clear_stale`), or until `stop()`. Done
        under the mirror's lock, which cairn's commits and the mirror's `git gc` hold too.
        """
        candidates = [self.mirror.path / f"{ref}.lock" for ref in (self.branch_ref, *refs)]
        admin = self._valid_admin()
        if admin is not None and self._entry_names_this_folder(admin):
            candidates += [admin / "index.lock", admin / "HEAD.lock", admin / "ORIG_HEAD.lock"]
        return clear_stale(candidates, older_than, held=self.mirror.lock, stop=stop)

    def drop_dead_measurements(self) -> list[str]:
        """Remove the measurement indexes that processes no longer running left here; their
        names.

        Each is an index of the whole repository, removed when its object goes; a runner
        killed with SIGKILL leaves its own. For the runner that has just taken the job's
        lease, before it measures. One of a live process is left to it: a runner stopping
        gracefully hands its jobs back while its threads still drive them for a moment, and
        an index taken from under a measurement would make git measure a different tree.
        """
        admin = self._valid_admin()
        if admin is None or not self._entry_names_this_folder(admin):
            return []
        try:
            found = [e for e in os.scandir(admin) if e.name.startswith(_MEASUREMENT)]
        except OSError:
            return []  # the entry went meanwhile, and its files with it
        removed = []
        for entry in found:
            if _writer_alive(entry.name):
                continue  # its object removes it (this process's own included)
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(entry.name)
        return removed

    def _entry_names_this_folder(self, admin: Path) -> bool:
        """Whether the mirror's entry points back at this folder (not another job's entry)."""
        try:
            named = (admin / "gitdir").read_bytes().decode("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return False
        own = str(self.path / ".git")
        return named == own or (admin / named).resolve() == Path(own).resolve()

    def _links_to_mirror(self) -> bool:
        # `worktree repair` writes into whatever admin folder a .git file names; only let it
        # near folders whose .git file names one of this mirror's own worktree entries.
        return self._admin() is not None

    def _admin(self) -> Path | None:
        """The mirror's entry for this worktree, if the worktree's `.git` names one of them."""
        named = self._pointer()
        if named is None:
            return None
        entries, plain = self._entries()
        # The pointer git writes (an absolute, plain path straight into the mirror's entries)
        # is checked without resolving it, which this runs before every git call here.
        head, _, name = named.rpartition("/")
        if plain and head == entries and name not in ("", ".", "..") and not os.path.islink(named):
            return Path(named)
        admin = self.path / named  # relative to the folder
        return admin if admin.resolve().parent == Path(entries) else None

    def _pointer(self) -> str | None:
        """The folder the worktree's `.git` file names, read as git reads it; None when it is
        not a plain file of that form, or holds anything git would read differently."""
        try:
            fd = os.open(self.path / ".git", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None  # missing, a link, or no file at all
        with os.fdopen(fd, "rb") as pointer:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None  # a folder, a FIFO that would never answer, a device
            data = pointer.read(_POINTER_LIMIT + 1)
        # git takes everything after "gitdir: " up to trailing line ends as the path: spaces
        # around it, control characters (a NUL ends git's read) or a second line would make
        # it name another folder than the one this reading sees. cairn's git writes none.
        if len(data) > _POINTER_LIMIT or not data.startswith(b"gitdir: "):
            return None
        named = data[len(b"gitdir: ") :].rstrip(b"\r\n")
        if not named or named != named.strip() or any(c < 0x20 or c == 0x7F for c in named):
            return None
        try:
            return named.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def _entries(self) -> tuple[str, bool]:
        """The mirror's folder of worktree entries, resolved (once), and whether it is a plain
        folder right inside the mirror: only then is a pointer naming it taken as written."""
        if self._entries_path is None:
            mirror = self.mirror.path.resolve()
            entries = (mirror / "worktrees").resolve()
            self._entries_path = (str(entries), entries.parent == mirror)
        return self._entries_path

    def _add(self, baseline: str) -> bool:
        # Build the checkout beside the final path and move it in, so an interrupted checkout
        # never passes for a finished workspace on resume.
        staging = self.path.with_name(self.path.name + ".partial")
        if self.mirror.unlock_interrupted_adds() or staging.exists():
            shutil.rmtree(staging, ignore_errors=True)  # cairn's own half-made folder
            self.mirror.git("worktree", "prune")  # and the entries naming it
        failure = "git could not create the job's workspace"
        try:
            # Most workspaces are new, on a new branch: `-b` refuses a branch that exists
            # before it makes anything, and only then is the branch looked at.
            created = ("-b", self.branch, str(staging), baseline)
            self.mirror.git("worktree", "add", "--quiet", *created, failure=failure)
            new = True
        except GitError:
            known = try_git("rev-parse", "--verify", "-q", self.branch_ref, cwd=self.mirror.path)
            if known.returncode != 0:
                raise
            # The branch outlived its folder: check the job's own commits out again, but only
            # commits that build on the job's baseline; the workspace never starts elsewhere.
            if not self._builds_on(baseline, known.stdout):
                raise WorkspaceError(
                    "cairn's copy of the repository holds a branch of this job's name that does "
                    "not build on the job's baseline; cairn will not start the workspace from it"
                ) from None
            again = (str(staging), self.branch)
            self.mirror.git("worktree", "add", "--quiet", *again, failure=failure)
            new = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_dir():
            self.path.rmdir()  # empty (checked by ensure); `worktree move` would nest inside it
        self.mirror.git("worktree", "move", str(staging), str(self.path), failure=failure)
        return new

    def _builds_on(self, baseline: str, tip: str) -> bool:
        found = try_git("merge-base", "--is-ancestor", baseline, tip, cwd=self.mirror.path)
        return found.returncode == 0

    def head(self) -> str:
        """The commit the job's branch points at."""
        return self.git("rev-parse", "--verify", "HEAD^{commit}")

    def tip(self) -> tuple[str, str]:
        """The commit the job's branch points at, and that commit's tree (one git call)."""
        commit, tree = self.git("rev-parse", "HEAD^{commit}", "HEAD^{tree}").split("\n")
        return commit, tree

    def content_id(self) -> str:
        """The tree id of everything in the worktree, uncommitted and untracked files included."""
        # An index of cairn's own seeded from HEAD: the worktree's own index (which the agent
        # may be using) is never read or written, and no stat cache can hide an equal-size
        # edit. It lies beside the worktree's own index (read-only in the sandbox, removed
        # with the worktree), named for this object, and is kept until the next measurement:
        # a commit of what it measured makes it the worktree's index (`_take_measured_index`).
        index = self._own_admin() / self._index_name
        if index not in self._indexes:
            self._indexes.add(index)
            weakref.finalize(self, _remove_quietly, index)
        self._measured = None
        env = {"GIT_INDEX_FILE": str(index)}
        failure = "git could not measure the job's workspace"
        self.git(*_ONE_FILE_INDEX, "read-tree", "HEAD", env=env, failure=failure)
        self.git(*_ONE_FILE_INDEX, "add", "--all", env=env, failure=failure)
        tree = self.git(*_ONE_FILE_INDEX, "write-tree", env=env, failure=failure)
        self._measured = (index, tree)
        return tree

    def _take_measured_index(self, tree: str) -> bool:
        """Make the index of the last measurement, when it measured `tree`, the worktree's own;
        whether it was. That index holds exactly `tree` with every file's stat data as git
        wrote it, which is what `reset --mixed` to a commit of `tree` writes, without a git
        process. For `commit`, whose caller measured `tree` with nothing run since.

        As git replaces an index: its `index.lock` is taken only if no one holds it (a hard
        link, so the file and its times are the ones git wrote), then renamed over it.
        """
        if self._measured is None or self._measured[1] != tree:
            return False
        measured, admin = self._measured[0], self._own_admin()
        if measured.parent != admin:
            return False  # the worktree was made again since the measurement
        lock = admin / "index.lock"
        try:
            os.link(measured, lock)
        except OSError:
            return False  # a git's lock, or a stale one, or no index: `reset` reports it
        try:
            os.replace(lock, admin / "index")
        except OSError:
            _remove_quietly(lock)
            return False
        self._measured = None
        _remove_quietly(measured)
        return True

    def changed_files(self, baseline: str, tree: str | None = None) -> list[str]:
        """Paths that differ between the baseline commit and the worktree's content.

        A caller that already holds the content identity (`tree`) passes it: computing it
        hashes every file in the workspace.
        """
        tree = tree or self.content_id()
        known = self._changes.get((baseline, tree))
        if known is None:
            out = self.git(
                "diff-tree", "-r", "-z", "--name-only", "--no-renames",
                f"{baseline}^{{tree}}", tree,
            )  # fmt: skip
            known = self._changes[(baseline, tree)] = [path for path in out.split("\0") if path]
        return list(known)

    def diffstat(self, baseline: str, tree: str | None = None) -> DiffStat:
        """A `git diff --stat` of the worktree's content (or `tree`) against the baseline, and
        the paths its `--numstat` counts (one git call)."""
        # Every path in full and no rename pairs: a deleted file is always named as deleted.
        # The NUL-ended numstat records come first, verbatim; the stat text after the last NUL
        # is what `--stat` alone prints (it shortens long names and quotes unusual ones, so the
        # paths are read from the records).
        out = self.git(
            "diff", "--numstat", "-z", f"--stat={STAT_WIDTH},{STAT_WIDTH}", "--no-renames",
            "--no-color", "--no-ext-diff", "--no-textconv",
            f"{baseline}^{{tree}}", tree or self.content_id(),
        )  # fmt: skip
        records, _, text = out.rpartition("\0")
        # Each record is "added<TAB>deleted<TAB>path".
        counted = {r.split("\t", 2)[2] for r in records.split("\0") if r.count("\t") >= 2}
        return DiffStat(text, frozenset(counted))

    def commit(self, baseline: str, message: str, tree: str | None = None) -> str:
        """Commit the worktree's content on the job's branch; safe to repeat after a crash.

        A caller that measured the content a moment ago, with nothing run in the workspace
        since, passes it as `tree`.
        """
        if not self.is_valid():
            raise WorkspaceError("the job's workspace is missing or no longer on the job's branch")
        tree = tree or self.content_id()
        head, head_tree = self.tip()
        if head_tree != tree:
            key = (tree, head, message)
            written_before = key in self._commits
            new = self.commit_object(*key)
            # Compare-and-swap on the old head: a concurrent move of the branch fails loudly.
            moved = ("update-ref", "-m", "cairn: commit", self.branch_ref)
            failure = "git could not record the job's commit"
            try:
                self.git(*moved, new, head, failure=failure)
            except GitError:
                if not written_before:
                    raise
                del self._commits[key]  # pruned since, perhaps (`commit_object`): once more
                new = self.commit_object(*key)
                self.git(*moved, new, head, failure=failure)
            head = new
        elif head == baseline:
            raise WorkspaceError("the job's workspace has no changes to commit")
        # Also reached when a crash came between update-ref and here: the index catches up.
        if not self._take_measured_index(tree):
            failure = "git could not refresh the index"
            self.git("reset", "--quiet", "--mixed", "HEAD", failure=failure)
        return head

    def commit_object(self, tree: str, parent: str, message: str) -> str:
        """A commit of `tree` on `parent` with `message`, named by no ref: the one written
        here before for the same three, if any (a checkpoint writes the commit of the agent's
        result with the job's message, and summarizing puts that very commit on the branch).

        No ref names it until then: a `git gc` with a user's `gc.pruneExpire=now` may prune
        it meanwhile, and `commit` then writes it again.
        """
        key = (tree, parent, message)
        if key not in self._commits:
            self._commits[key] = self.git(
                *IDENTITY, "commit-tree", tree, "-p", parent, "-F", "-", input=message
            )
        return self._commits[key]

    def bundle(self, tip: str, baseline: str, ref: str, *, failure: str) -> bytes:
        """`bundles.bundle` of `tip` over `baseline` from the mirror; the last one is kept, so
        a commit checkpointed twice (as the agent's result, then on the branch) is packed once.
        """
        key = (tip, baseline, ref)
        if self._bundle is None or self._bundle[0] != key:
            self._bundle = (key, bundle(self.mirror, tip, baseline, ref, failure=failure))
        return self._bundle[1]

    def remove(self) -> bool:
        """Remove the worktree folder (and a half-made one); the branch stays. Whether one was."""
        staging = self.path.with_name(self.path.name + ".partial")
        if not (os.path.lexists(self.path) or os.path.lexists(staging)):
            return False
        with self.mirror.reshaping():
            remove_tree(staging)
            try:
                if self.path.exists():
                    failure = "git could not remove the job's workspace"
                    self.mirror.git(
                        "worktree", "remove", "--force", str(self.path), failure=failure
                    )
                self.mirror.git("worktree", "prune")
            except WorkspaceError:
                # git stops at read-only folders (materialized dependencies) and at folders it
                # no longer knows as worktrees (a changed .git, a missing mirror); the folder
                # under cairn's home is cairn's own to delete all the same.
                remove_tree(self.path)
                with contextlib.suppress(WorkspaceError):
                    self.mirror.git("worktree", "prune")
        return True
