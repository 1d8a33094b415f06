"""GitLab (gitlab.com or self-managed) through its REST API v4: merge requests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import quote

import httpx

from cairn.errors import ForgeAccessDenied, ForgeError
from cairn.forges.base import (
    Access,
    Check,
    PullAction,
    PullRequest,
    PullState,
    Review,
    carries_line,
)
from cairn.forges.transport import DEFAULT_TIMEOUT, ForgeHTTP

READ = "the read_api scope and at least the Reporter role on the project"
WRITE = "the api scope and at least the Developer role on the project"
_DEVELOPER = 30
_STATES = {"opened": PullState.open, "closed": PullState.closed, "merged": PullState.merged}
_CHECK_STATES = {"success": "success", "failed": "failure", "canceled": "failure"}
_DRAFT = "Draft: "


class GitLabForge:
    """One project (`namespace/name`) on GitLab, reached at `api` with `token`."""

    def __init__(
        self,
        repo: str,
        token: str,
        *,
        api: str,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.repo = repo
        self._http = ForgeHTTP(
            "GitLab", api, headers={"PRIVATE-TOKEN": token}, secret=token, timeout=timeout,
            transport=transport,
        )  # fmt: skip
        self._path = f"/projects/{quote(repo, safe='')}"

    def check_access(self) -> Access:
        found = self._http.call("GET", self._path, permission=READ, missing_ok=True)
        if found is None:
            return Access(False, False, None, (f"{READ} ({self.repo})",))
        permissions = found.get("permissions") or {}
        levels = [
            (permissions.get(kind) or {}).get("access_level") or 0
            for kind in ("project_access", "group_access")
        ]
        push = max(levels) >= _DEVELOPER
        missing = () if push else (f"{WRITE} ({self.repo})",)
        return Access(True, push, found.get("default_branch"), missing)

    def find_pull_requests(self, head: str, key: str | None = None) -> list[PullRequest]:
        by_head = self._list({"state": "all", "source_branch": head, "per_page": "100"})
        found = {p.number: p for p in by_head}
        if key is not None:
            recent = self._list({"state": "all", "per_page": "100"})
            found |= {p.number: p for p in recent if carries_line(p.body, key)}
        return sorted(found.values(), key=lambda p: p.number)

    def open_pull_request(
        self, head: str, base: str, title: str, body: str, *, draft: bool
    ) -> PullRequest:
        payload = {
            "source_branch": head,
            "target_branch": base,
            "title": (_DRAFT if draft else "") + title,
            "description": body,
        }
        created = self._http.call(
            "POST", f"{self._path}/merge_requests", permission=WRITE, body=payload
        )
        return _pull(created)

    def get_pull_request(self, number: int) -> PullRequest:
        where = f"{self._path}/merge_requests/{number}"
        pull = _pull(self._http.call("GET", where, permission=READ))
        approvals = self._http.call("GET", f"{where}/approvals", permission=READ)
        reviews = tuple(
            Review(str(a["user"]["username"]), "approved") for a in approvals.get("approved_by", [])
        )
        checks = self._checks(pull.head_sha) if pull.head_sha else ()
        return replace(pull, checks=checks, reviews=reviews)

    def update(
        self, number: int, action: PullAction, text: str | None = None, *, sha: str | None = None
    ) -> PullRequest:
        where = f"{self._path}/merge_requests/{number}"
        if text is not None and action in (PullAction.comment, PullAction.close):
            self._http.call("POST", f"{where}/notes", permission=WRITE, body={"body": text})
        if action == PullAction.close:
            self._http.call("PUT", where, permission=WRITE, body={"state_event": "close"})
        elif action == PullAction.ready:
            title = self._http.call("GET", where, permission=READ)["title"]
            ready = {"title": str(title).removeprefix(_DRAFT)}
            self._http.call("PUT", where, permission=WRITE, body=ready)
        elif action == PullAction.merge:
            self._merge(number, where, sha)
        return self.get_pull_request(number)

    def _merge(self, number: int, where: str, sha: str | None) -> None:
        try:
            self._http.call(
                "PUT", f"{where}/merge", permission=WRITE, body={"sha": sha} if sha else None
            )
        except ForgeAccessDenied:
            raise
        except ForgeError as exc:
            raise ForgeError(
                f"GitLab did not merge merge request !{number}: {exc}. Approval rules or the "
                "pipeline may require more; merge it on GitLab, or resume once they pass"
            ) from None

    def _list(self, params: dict[str, str]) -> list[PullRequest]:
        answer = self._http.call(
            "GET", f"{self._path}/merge_requests", permission=READ, params=params
        )
        return [_pull(p) for p in answer]

    def _checks(self, sha: str) -> tuple[Check, ...]:
        statuses = self._http.call(
            "GET", f"{self._path}/repository/commits/{sha}/statuses", permission=READ
        )
        return tuple(
            Check(str(s["name"]), _CHECK_STATES.get(str(s["status"]), "pending")) for s in statuses
        )


def _pull(data: dict[str, Any]) -> PullRequest:
    return PullRequest(
        number=int(data["iid"]),
        url=str(data["web_url"]),
        state=_STATES.get(str(data["state"]), PullState.closed),
        head=str(data["source_branch"]),
        base=str(data["target_branch"]),
        body=str(data.get("description") or ""),
        draft=bool(data.get("draft")) or str(data.get("title", "")).startswith(_DRAFT),
        author=(data.get("author") or {}).get("username"),
        head_sha=data.get("sha"),
    )
