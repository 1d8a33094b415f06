"""How cairn's own git calls get a forge credential: GIT_ASKPASS, never the URL.

The token travels in an environment variable given only to the git subprocess cairn starts
(and so to the askpass script git runs); the script, written by cairn with mode 0700 into a
private folder, holds no secret itself. Workspace commands never see either: their
environment is an allowlist without any CAIRN_* variable (`workspace.commands`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

TOKEN_VARIABLE = "CAIRN_GIT_CREDENTIAL"
USER_VARIABLE = "CAIRN_GIT_USERNAME"
NO_CREDENTIAL_HELPERS: tuple[str, ...] = ("-c", "credential.helper=")
"""Pass to a git call that uses askpass: no helper of the user's may store the token (a
`store` helper writes it in clear) or offer another credential first."""

_SCRIPT = f"""#!/bin/sh
case "$1" in
  Username*) printf '%s\\n' "${USER_VARIABLE}" ;;
  *) printf '%s\\n' "${TOKEN_VARIABLE}" ;;
esac
"""


@dataclass(frozen=True)
class GitCredential:
    """The login cairn's git calls answer a forge's HTTPS challenge with."""

    username: str
    token: str = field(repr=False)


@contextlib.contextmanager
def credential_environment(credential: GitCredential | None) -> Iterator[dict[str, str]]:
    """`askpass_environment` for `credential`; nothing at all without one."""
    if credential is None:
        yield {}
        return
    with askpass_environment(credential.username, credential.token) as env:
        yield env


@contextlib.contextmanager
def askpass_environment(username: str, token: str) -> Iterator[dict[str, str]]:
    """Variables for one git call that answer its HTTPS login with `username` and `token`."""
    folder = Path(tempfile.mkdtemp(prefix="cairn-askpass-"))  # mode 0700, cairn's alone
    try:
        script = folder / "askpass"
        script.write_text(_SCRIPT)
        script.chmod(0o700)
        yield {
            "GIT_ASKPASS": str(script),
            TOKEN_VARIABLE: token,
            USER_VARIABLE: username,
            "GIT_TERMINAL_PROMPT": "0",
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
