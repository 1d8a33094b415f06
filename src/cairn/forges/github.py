"""GitHub (github.com or GitHub Enterprise) through its REST API v3."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

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

# Worded so that no `name: value` shape follows the word "token": the output masker would
# take what follows for a secret.
READ = (
    "read access to the repository (Metadata and Contents read for a fine-grained token; "
    "the repo scope for a classic one)"
)
PUSH = "Contents: read and write (the repo scope for a classic token)"
PULLS = "Pull requests: read and write (the repo scope for a classic token)"
CHECKS = "Checks: read and Commit statuses: read"
_READY = (
    "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) "
    "{ pullRequest { isDraft } } }"
)
_STATUS_STATES = {"success": "success", "pending": "pending"}
_ALL = {"per_page": "100"}
_REVIEW_STATES = {"APPROVED": "approved", "CHANGES_REQUESTED": "changes_requested"}


class GitHubForge:
    """One repository (`owner/name`) on GitHub, reached at `api` with `token`."""

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
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        self._http = ForgeHTTP(
            "GitHub", api, headers=headers, secret=token, timeout=timeout, transport=transport
        )
        self._graphql = ForgeHTTP(
            "GitHub", graphql_url(api), headers=headers, secret=token, timeout=timeout,
            transport=transport,
        )  # fmt: skip
        self._path = f"/repos/{repo}"

    def check_access(self) -> Access:
        found = self._http.call("GET", self._path, permission=READ, missing_ok=True)
        if found is None:
            # GitHub answers 404, not 403, for a private repository the token cannot see.
            return Access(False, False, None, (f"{READ} on {self.repo}",))
        push = bool((found.get("permissions") or {}).get("push"))
        missing = () if push else (f"{PUSH} on {self.repo}",)
        return Access(True, push, found.get("default_branch"), missing)

    def find_pull_requests(self, head: str, key: str | None = None) -> list[PullRequest]:
        owner = self.repo.split("/", 1)[0]
        by_head = self._list({"state": "all", "head": f"{owner}:{head}", "per_page": "100"})
        found = {p.number: p for p in by_head}
        if key is not None:
            # A PR opened from another branch that carries the job's key is the job's too.
            recent = self._list({"state": "all", "per_page": "100"})
            found |= {p.number: p for p in recent if carries_line(p.body, key)}
        return sorted(found.values(), key=lambda p: p.number)

    def open_pull_request(
        self, head: str, base: str, title: str, body: str, *, draft: bool
    ) -> PullRequest:
        payload = {"head": head, "base": base, "title": title, "body": body, "draft": draft}
        created = self._http.call("POST", f"{self._path}/pulls", permission=PULLS, body=payload)
        return _pull(created)

    def get_pull_request(self, number: int) -> PullRequest:
        pull = _pull(self._http.call("GET", f"{self._path}/pulls/{number}", permission=PULLS))
        reviews = self._http.call("GET", f"{self._path}/pulls/{number}/reviews", permission=PULLS)
        checks = self._checks(pull.head_sha) if pull.head_sha else ()
        return replace(pull, checks=checks, reviews=tuple(_review(r) for r in reviews))

    def update(
        self, number: int, action: PullAction, text: str | None = None, *, sha: str | None = None
    ) -> PullRequest:
        where = f"{self._path}/pulls/{number}"
        if text is not None and action in (PullAction.comment, PullAction.close):
            self._http.call(
                "POST", f"{self._path}/issues/{number}/comments", permission=PULLS,
                body={"body": text},
            )  # fmt: skip
        if action == PullAction.close:
            self._http.call("PATCH", where, permission=PULLS, body={"state": "closed"})
        elif action == PullAction.ready:
            self._mark_ready(where)
        elif action == PullAction.merge:
            self._merge(number, sha)
        return self.get_pull_request(number)

    def _mark_ready(self, where: str) -> None:
        """GitHub's REST API cannot take a pull request out of draft; its GraphQL API can."""
        node = self._http.call("GET", where, permission=PULLS)["node_id"]
        answer = self._graphql.call(
            "POST", "", permission=PULLS, body={"query": _READY, "variables": {"id": node}}
        )
        errors = (answer or {}).get("errors") or []
        if errors:
            said = " ".join(str(e.get("message", "")) for e in errors if isinstance(e, dict))
            if "not accessible" in said.lower() or "forbidden" in said.lower():
                raise ForgeAccessDenied(f"the credential lacks {PULLS} (GitHub's GraphQL API)")
            raise ForgeError(f"GitHub did not mark the pull request ready for review: {said[:200]}")

    def _merge(self, number: int, sha: str | None) -> None:
        body = {"merge_method": "merge"} | ({"sha": sha} if sha else {})
        try:
            self._http.call("PUT", f"{self._path}/pulls/{number}/merge", permission=PUSH, body=body)
        except ForgeAccessDenied:
            raise
        except ForgeError as exc:
            raise ForgeError(
                f"GitHub did not merge pull request #{number}: {exc}. Branch protection or "
                "checks may require more; merge it on GitHub, or resume once they pass"
            ) from None

    def _list(self, params: dict[str, str]) -> list[PullRequest]:
        answer = self._http.call("GET", f"{self._path}/pulls", permission=PULLS, params=params)
        return [_pull(p) for p in answer]

    def _checks(self, sha: str) -> tuple[Check, ...]:
        where = f"{self._path}/commits/{sha}"
        runs = self._http.call("GET", f"{where}/check-runs", permission=CHECKS, params=_ALL)
        # Many CI systems report through the older Statuses API, not as check runs; branch
        # protection requires both alike, so the reviewer is shown both.
        status = self._http.call("GET", f"{where}/status", permission=CHECKS, params=_ALL)
        return tuple(
            Check(r["name"], "pending" if r.get("status") != "completed" else _conclusion(r))
            for r in runs.get("check_runs", [])
        ) + tuple(
            Check(str(s["context"]), _STATUS_STATES.get(str(s.get("state")), "failure"))
            for s in (status or {}).get("statuses", [])
        )


def graphql_url(api: str) -> str:
    """GitHub's GraphQL endpoint beside its REST API `api` (api.github.com, or an Enterprise
    server's /api/v3)."""
    api = api.rstrip("/")
    return api.removesuffix("/v3") + "/graphql" if api.endswith("/api/v3") else api + "/graphql"


def _conclusion(run: dict[str, Any]) -> str:
    return "success" if run.get("conclusion") in ("success", "neutral", "skipped") else "failure"


def _pull(data: dict[str, Any]) -> PullRequest:
    if data.get("merged") or data.get("merged_at"):
        state = PullState.merged
    else:
        state = PullState.open if data["state"] == "open" else PullState.closed
    return PullRequest(
        number=int(data["number"]),
        url=str(data["html_url"]),
        state=state,
        head=str(data["head"]["ref"]),
        base=str(data["base"]["ref"]),
        body=str(data.get("body") or ""),
        draft=bool(data.get("draft")),
        author=(data.get("user") or {}).get("login"),
        head_sha=data["head"].get("sha"),
    )


def _review(data: dict[str, Any]) -> Review:
    user = str((data.get("user") or {}).get("login", ""))
    return Review(user, _REVIEW_STATES.get(str(data.get("state")), "commented"))
