"""Forges by short name, where each one is, and a room's forge settings."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from cairn.errors import UsageError
from cairn.forges.base import Forge
from cairn.forges.github import GitHubForge
from cairn.forges.gitlab import GitLabForge
from cairn.forges.transport import DEFAULT_TIMEOUT

FORGES: dict[str, Callable[..., Forge]] = {"github": GitHubForge, "gitlab": GitLabForge}
DEFAULT_URLS = {"github": "https://github.com", "gitlab": "https://gitlab.com"}
SCOPE_KEY = "forge"
"""Where a room's scope keeps its forge settings."""
_REPO = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+")
_GITHUB_COM = ("github.com", "www.github.com")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Delivery(StrEnum):
    """How a room delivers an approved job."""

    push_and_merge = "push_and_merge"
    """Push the job's branch and merge it into the base branch with git (no forge needed)."""
    pull_request = "pull_request"
    """Push the job's branch and open one pull request; merging is left to the forge."""
    pull_request_and_merge = "pull_request_and_merge"
    """Also merge the pull request through the forge's API once the integration gate approves."""


@dataclass(frozen=True)
class ForgeSettings:
    """A room's forge: which one, which repository, and where its credential comes from.

    Never the credential itself: `token_env` names an environment variable of cairn's
    processes, `credential` names a credential stored encrypted in the store.
    """

    kind: str
    repo: str
    url: str
    token_env: str | None = None
    credential: str | None = None

    @classmethod
    def parse(
        cls,
        kind: str,
        repo: str | None,
        *,
        url: str | None = None,
        token_env: str | None = None,
        credential: str | None = None,
    ) -> ForgeSettings:
        """Settings from a person's input; a UsageError says what to fix."""
        check_kind(kind)
        # `owner/name.git` is what a clone URL shows; the forge's API knows it as owner/name.
        repo = repo.removesuffix(".git") if repo else repo
        if not repo or not _REPO.fullmatch(repo) or ".." in repo:
            raise UsageError("--forge-repo must name the repository as owner/name")
        if kind == "github" and repo.count("/") != 1:
            raise UsageError(
                "--forge-repo must name a GitHub repository as owner/name (one slash); "
                "groups within groups are GitLab's"
            )
        if (token_env is None) == (credential is None):
            raise UsageError(
                "name where the forge credential comes from: an environment variable "
                "(--forge-token-env), or a credential stored with `cairn credential set` "
                "(--forge-credential)"
            )
        if token_env is not None and not _ENV_NAME.fullmatch(token_env):
            raise UsageError(
                "the forge token's variable (--forge-token-env) must be an environment "
                "variable's name"
            )
        if token_env is not None and token_env.startswith("CAIRN_"):
            # CAIRN_SECRET_KEY decrypts every stored credential: it must never reach a forge.
            raise UsageError(
                "the forge token may not come from one of cairn's own CAIRN_* variables "
                "(--forge-token-env); put it in a variable of its own"
            )
        web = (url or DEFAULT_URLS[kind]).rstrip("/")
        parts = urlsplit(web)
        if parts.scheme not in ("https", "http") or not parts.netloc or "@" in parts.netloc:
            raise UsageError("--forge-url must be the forge's https:// address, without a login")
        if parts.query or parts.fragment or "?" in web or "#" in web:
            raise UsageError(
                "--forge-url must be the forge's address alone, without ?query or #part"
            )
        if kind == "github" and parts.path:
            # GitHub and GitHub Enterprise serve from a host's root; a path is a pasted page.
            raise UsageError(
                f"--forge-url must be the GitHub server's address alone, such as "
                f"{parts.scheme}://{parts.netloc}; name the repository with --forge-repo"
            )
        if parts.scheme == "http" and not _is_loopback(parts.hostname):
            # Over plain http the token would cross the network in clear (git's Basic auth,
            # the API's bearer header): only a forge on this machine may go without TLS.
            raise UsageError(
                "--forge-url must use https:// for a forge on another machine; plain http:// "
                "is only for a forge on this machine (localhost, 127.0.0.1, ::1)"
            )
        return cls(kind, repo, web, token_env, credential)

    @classmethod
    def from_scope(cls, scope: Mapping[str, Any]) -> ForgeSettings | None:
        """The settings a room's scope holds, or None for a room without a forge."""
        data = scope.get(SCOPE_KEY)
        if not isinstance(data, Mapping):
            return None
        return cls(
            str(data["kind"]), str(data["repo"]), str(data["url"]),
            data.get("token_env"), data.get("credential"),
        )  # fmt: skip

    def to_scope(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "repo": self.repo,
            "url": self.url,
            "token_env": self.token_env,
            "credential": self.credential,
        }

    @property
    def api_url(self) -> str:
        return api_url(self.kind, self.url)

    @property
    def git_url(self) -> str:
        return f"{self.url}/{self.repo}.git"

    @property
    def git_username(self) -> str:
        """The user name a token goes with over git's HTTPS (the token is the password)."""
        return "x-access-token" if self.kind == "github" else "oauth2"


def api_url(kind: str, url: str) -> str:
    """The REST API of the forge whose web base is `url`."""
    web = url.rstrip("/")
    if kind == "github":
        parts = urlsplit(web)
        dotcom = parts.netloc.lower() in _GITHUB_COM and not parts.path
        return "https://api.github.com" if dotcom else f"{web}/api/v3"
    return f"{web}/api/v4"


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_kind(kind: str) -> None:
    if kind not in FORGES:
        raise UsageError(f"no forge {kind!r}; the forges are: {', '.join(sorted(FORGES))}")


def get_forge(
    settings: ForgeSettings, token: str, *, timeout: float = DEFAULT_TIMEOUT, **options: Any
) -> Forge:
    """The forge client for a room's settings, authenticated with `token`."""
    check_kind(settings.kind)
    return FORGES[settings.kind](
        settings.repo, token, api=settings.api_url, timeout=timeout, **options
    )


def parse_delivery(value: str | None) -> Delivery:
    """A delivery mode by name (default push_and_merge); the names are listed when wrong."""
    try:
        return Delivery(value or Delivery.push_and_merge)
    except ValueError:
        names = ", ".join(d.value for d in Delivery)
        raise UsageError(f"no delivery {value!r}; the deliveries are: {names}") from None
