"""A CLI's session is the job's: its id derived from the job, its file kept in the job's context.

The id is a UUID derived (uuid5) from the installation and the job (and a generation that
`cairn reply --fresh` moves on), so the same job always finds the same session and no two
jobs, in one installation or two, ever share one. The CLI's session file is saved into the
job's context after every turn, compressed and masked, and restored before a turn when it is
missing at the path the *current* workspace implies: a runner on another host, or a
workspace rebuilt at another path, resumes the same session.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

_NAMESPACE = uuid.UUID("6b1f3c64-2f43-5a0c-9d0e-63a1c0f2b7aa")
SESSION_FILE_LIMIT = 8 * 1024 * 1024
"""The most of a session file (compressed) a job's context keeps; a larger one is not kept
and the next turn on another host starts a fresh session (the workspace still holds the work)."""


def session_id(installation_id: str, job_id: int, generation: int = 0) -> str:
    """The job's own session id: the same for every turn of the job, unique to it."""
    name = f"cairn:{installation_id}:job:{job_id}:generation:{generation}"
    return str(uuid.uuid5(_NAMESPACE, name))


def saved_session(path: Path, mask: Callable[[str], str]) -> dict[str, Any] | None:
    """The session file at `path` as the job's context keeps it (masked, compressed), or None
    when there is none or it is too large to keep."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    packed = zlib.compress(mask(text).encode("utf-8"), 6)
    if len(packed) > SESSION_FILE_LIMIT:
        return None
    return {"zlib": base64.b64encode(packed).decode("ascii"), "bytes": len(text)}


def masked_lines(text: str, mask: Callable[[str], str]) -> str:
    """`text` masked line by line; a JSON line only inside its strings, so it stays JSON the
    CLI reads back (masked as text, `"time_to_first_token_ms":85` would lose its number and
    the CLI the rest of its history)."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        masked = mask(line)
        if masked == line:
            continue
        try:
            lines[index] = json.dumps(
                _masked_strings(json.loads(line), mask), ensure_ascii=False, separators=(",", ":")
            )
        except ValueError:
            lines[index] = masked
    return "\n".join(lines)


def _masked_strings(value: Any, mask: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, list):
        return [_masked_strings(item, mask) for item in value]
    if isinstance(value, dict):
        return {key: _masked_strings(item, mask) for key, item in value.items()}
    return value


def restore_session(path: Path, saved: object) -> bool:
    """Write the saved session file at `path` when it is missing there; True when it is there."""
    if path.is_file():
        return True
    if not isinstance(saved, dict) or not isinstance(saved.get("zlib"), str):
        return False
    try:
        text = zlib.decompress(base64.b64decode(saved["zlib"])).decode("utf-8")
    except (ValueError, zlib.error):
        return False  # an unreadable record: start a fresh session, the workspace decides
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".restoring")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return True


def forget_session(path: Path) -> None:
    """Remove a session file the job no longer continues (a fresh conversation)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
