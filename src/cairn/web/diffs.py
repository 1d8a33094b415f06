"""A job's result as a diff against its baseline, split into files and highlighted by Pygments.

The diff is read from cairn's own mirror of the room's repository (where the job's branch
lives), masked by the room's sanitizer and bounded before it is shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from cairn.api.deps import Served
from cairn.errors import CairnError
from cairn.sanitize import bound, user_sanitizer
from cairn.store.records import Job, Room
from cairn.workspace.git import run_git

DIFF_LIMIT = 400_000
"""Characters of diff shown; a longer one is cut, and says so."""
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_FORMATTER = HtmlFormatter(nowrap=True)
Pending = list[tuple[str, int | None, int | None, str]]
"""Diff lines before highlighting: kind (hunk, add, del, context), old and new number, text."""


@dataclass(frozen=True)
class DiffLine:
    kind: str  # add, del or context
    old: int | None
    new: int | None
    html: Markup


@dataclass
class DiffFile:
    path: str
    lines: list[DiffLine] = field(default_factory=list)
    hunks: list[str] = field(default_factory=list)


def result_diff(served: Served, job: Job, room: Room, installation: str) -> str | None:
    """The job's committed result against its baseline (None when there is none to show)."""
    if not job.baseline:
        return None
    mirror = served.config.mirror_path(installation, room.id)
    if not mirror.exists():
        return None
    branch = f"refs/heads/{job.branch_in(installation)}"
    try:
        text = run_git(
            "diff", "--no-color", "--no-renames", "--no-ext-diff", "--no-textconv",
            f"{job.baseline}^{{tree}}", branch, "--",
            cwd=mirror, timeout=served.config.git_timeout,
        )  # fmt: skip
    except CairnError:
        return None
    return bound(user_sanitizer(served.config, room.repo).mask(text), DIFF_LIMIT)


def split_files(diff: str) -> list[DiffFile]:
    """The diff's files, each line numbered on both sides and highlighted for its language."""
    files: list[DiffFile] = []
    for block in re.split(r"(?m)^(?=diff --git )", diff):
        if block.startswith("diff --git "):
            files.append(_file(block))
    return files


def _file(block: str) -> DiffFile:
    lines = block.split("\n")
    path = next(
        (line[6:] for line in lines if line.startswith("+++ b/")),
        next((line[6:] for line in lines if line.startswith("--- a/")), lines[0][11:]),
    )
    found = DiffFile(path=path)
    old = new = 0
    pending: Pending = []
    in_hunk = False
    for line in lines[1:]:
        match = _HUNK.match(line)
        if match:
            old, new, in_hunk = int(match[1]), int(match[2]), True
            found.hunks.append(line)
            pending.append(("hunk", None, None, line))
        elif in_hunk and line.startswith("+"):
            pending.append(("add", None, new, line[1:]))
            new += 1
        elif in_hunk and line.startswith("-"):
            pending.append(("del", old, None, line[1:]))
            old += 1
        elif in_hunk and line.startswith(" "):
            pending.append(("context", old, new, line[1:]))
            old, new = old + 1, new + 1
    found.lines = _highlighted(path, pending)
    return found


def _highlighted(path: str, pending: Pending) -> list[DiffLine]:
    try:
        lexer = get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False, ensurenl=False)
    code = [text for kind, _, _, text in pending if kind != "hunk"]
    rendered = highlight("\n".join(code), lexer, _FORMATTER).split("\n") if code else []
    rendered += [""] * (len(code) - len(rendered))
    out: list[DiffLine] = []
    at = 0
    for kind, old, new, text in pending:
        if kind == "hunk":
            out.append(DiffLine("hunk", None, None, Markup.escape(text)))
            continue
        out.append(DiffLine(kind, old, new, Markup(rendered[at])))  # Pygments escaped it
        at += 1
    return out


def stylesheet() -> str:
    """The highlighting's CSS (served as a static file, so the CSP needs no inline style)."""
    return str(_FORMATTER.get_style_defs(".code"))  # type: ignore[no-untyped-call]
