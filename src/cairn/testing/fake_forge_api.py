"""The fake forge's REST routes: the GitHub v3 and GitLab v4 subsets cairn uses.

Each route reads and changes a `ForgeWorld` and answers (status, JSON) in that forge's own
shapes and error conventions, so cairn's clients parse exactly what they would from the real
services.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from cairn.testing.fake_forge_state import READ, WRITE, ForgeWorld, Pull, Token


@dataclass(frozen=True)
class Call:
    """One API request, parsed: what a route needs."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    token: Token | None
    base_url: str


Answer = tuple[int, Any]
Route = Callable[[ForgeWorld, Call, re.Match[str]], Answer]


def answer(world: ForgeWorld, kind: str, call: Call) -> Answer:
    """Route `call` (a path below /api/v3 or /api/v4) to the forge's handler."""
    if call.token is None:
        return 401, _message(kind, "Requires authentication", "401 Unauthorized")
    if kind == "github" and call.path == "/graphql" and call.method == "POST":
        return _gh_graphql(world, call)
    routes = _GITHUB if kind == "github" else _GITLAB
    for method, pattern, route, scope in routes:
        found = re.fullmatch(pattern, call.path)
        if found is None or method != call.method:
            continue
        repo = _repo(kind, found)
        if repo not in world.repos or READ not in call.token.scopes:
            return 404, _message(kind, "Not Found", "404 Project Not Found")
        if scope not in call.token.scopes:
            text = "Resource not accessible by personal access token"
            return 403, _message(kind, text, "403 Forbidden")
        return route(world, call, found)
    return 404, _message(kind, "Not Found", "404 Not Found")


def _repo(kind: str, found: re.Match[str]) -> str:
    return f"{found['owner']}/{found['name']}" if kind == "github" else unquote(found["id"])


def _message(kind: str, github: str, gitlab: str) -> dict[str, str]:
    return {"message": github} if kind == "github" else {"message": gitlab}


def _comments(kind: str) -> tuple[Route, Route]:
    """The add and list routes of a pull request's comments (GitHub's issue comments, GitLab's
    notes): one shape on both forges, `{id, body}`."""

    def pull_of(world: ForgeWorld, found: re.Match[str]) -> Pull | None:
        number = found["number"] if kind == "github" else found["iid"]
        return world.find_pull(_repo(kind, found), int(number))

    def add(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
        pull = pull_of(world, found)
        if pull is None:
            return 404, _message(kind, "Not Found", "404 Not found")
        pull.comments.append(str((call.body or {}).get("body", "")))
        return 201, {"id": len(pull.comments), "body": pull.comments[-1]}

    def listed(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
        pull = pull_of(world, found)
        if pull is None:
            return 404, _message(kind, "Not Found", "404 Not found")
        return 200, [{"id": i + 1, "body": text} for i, text in enumerate(pull.comments)]

    return add, listed


_gh_comment, _gh_comments = _comments("github")
_gl_note, _gl_notes = _comments("gitlab")


# GitHub v3


def _gh_pull(world: ForgeWorld, pull: Pull, base_url: str) -> dict[str, Any]:
    web = base_url.removesuffix("/api/v3")
    return {
        "number": pull.number,
        "node_id": _node_id(pull),
        "html_url": f"{web}/{pull.repo}/pull/{pull.number}",
        "state": "open" if pull.state == "open" else "closed",
        "merged": pull.state == "merged",
        "merged_at": "2026-01-01T00:00:00Z" if pull.state == "merged" else None,
        "merge_commit_sha": pull.merge_sha,
        "draft": pull.draft,
        "title": pull.title,
        "body": pull.body,
        "user": {"login": pull.author},
        "head": {"ref": pull.head, "sha": world.branch_sha(pull.repo, pull.head)},
        "base": {"ref": pull.base},
    }


def _node_id(pull: Pull) -> str:
    return f"PR_{pull.repo.replace('/', '_')}_{pull.number}"


def _gh_graphql(world: ForgeWorld, call: Call) -> Answer:
    """The one GraphQL mutation cairn uses; GitHub answers 200 with `errors` for a refusal."""
    body = call.body if isinstance(call.body, dict) else {}
    query, node = str(body.get("query", "")), (body.get("variables") or {}).get("id")
    if "markPullRequestReadyForReview" not in query:
        return 200, {"errors": [{"message": "the fake forge serves one mutation only"}]}
    pulls = [p for repo in world.pulls.values() for p in repo if _node_id(p) == node]
    assert call.token is not None
    if not pulls or READ not in call.token.scopes:
        text = f"Could not resolve to a node with the global id of '{node}'"
        return 200, {"errors": [{"type": "NOT_FOUND", "message": text}]}
    if WRITE not in call.token.scopes:
        text = "Resource not accessible by personal access token"
        return 200, {"errors": [{"type": "FORBIDDEN", "message": text}]}
    pulls[0].draft = False
    return 200, {"data": {"markPullRequestReadyForReview": {"pullRequest": {"isDraft": False}}}}


def _gh_repo(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    repo = _repo("github", found)
    assert call.token is not None
    push = WRITE in call.token.scopes
    return 200, {
        "full_name": repo,
        "default_branch": world.repos[repo],
        "permissions": {"admin": False, "push": push, "pull": True},
        "clone_url": f"{call.base_url.removesuffix('/api/v3')}/{repo}.git",
    }


def _gh_pull_of(world: ForgeWorld, found: re.Match[str]) -> Pull | None:
    return world.find_pull(_repo("github", found), int(found["number"]))


def _gh_list(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    repo, state = _repo("github", found), call.query.get("state", "open")
    head = call.query.get("head", "")
    pulls = [
        p
        for p in world.pulls[repo]
        if (state == "all" or (p.state == "open") == (state == "open"))
        and (not head or head.split(":", 1)[-1] == p.head)
    ]
    return 200, [_gh_pull(world, p, call.base_url) for p in pulls]


def _gh_create(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    repo, body = _repo("github", found), call.body if isinstance(call.body, dict) else {}
    head, base = str(body.get("head", "")).split(":", 1)[-1], str(body.get("base", ""))
    if world.branch_sha(repo, head) is None or world.branch_sha(repo, base) is None:
        return 422, {"message": "Validation Failed", "errors": [{"field": "head"}]}
    if any(p.head == head and p.state == "open" for p in world.pulls[repo]):
        text = f"A pull request already exists for {repo.split('/')[0]}:{head}."
        return 422, {"message": "Validation Failed", "errors": [{"message": text}]}
    assert call.token is not None
    pull = world.open_pull(
        repo, head, base, str(body.get("title", "")), str(body.get("body") or ""),
        draft=bool(body.get("draft")), author=call.token.user,
    )  # fmt: skip
    return 201, _gh_pull(world, pull, call.base_url)


def _gh_get(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    pull = _gh_pull_of(world, found)
    return (200, _gh_pull(world, pull, call.base_url)) if pull else (404, {"message": "Not Found"})


def _gh_update(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    pull, body = _gh_pull_of(world, found), call.body if isinstance(call.body, dict) else {}
    if pull is None:
        return 404, {"message": "Not Found"}
    if body.get("state") == "closed" and pull.state == "open":
        pull.state = "closed"
    elif body.get("state") == "open" and pull.state == "closed":
        pull.state = "open"
    # As on GitHub, `draft` is not taken here: a draft is marked ready through GraphQL.
    pull.title = str(body.get("title", pull.title))
    pull.body = str(body.get("body", pull.body))
    return 200, _gh_pull(world, pull, call.base_url)


def _gh_merge(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    pull = _gh_pull_of(world, found)
    if pull is None:
        return 404, {"message": "Not Found"}
    if _moved(world, pull, call):
        return 409, {"message": "Head branch was modified. Review and try the merge again."}
    refusal = world.merge_refusal(pull)
    if refusal is not None:
        return 405, {"message": f"Pull Request is not mergeable: {refusal}"}
    sha = world.merge(pull)
    if sha is None:
        return 405, {"message": "Pull Request is not mergeable: merge conflict"}
    return 200, {"merged": True, "sha": sha, "message": "Pull Request successfully merged"}


def _gh_reviews(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    pull = _gh_pull_of(world, found)
    if pull is None:
        return 404, {"message": "Not Found"}
    states = {"approved": "APPROVED", "changes_requested": "CHANGES_REQUESTED"}
    reviews = [{"user": {"login": u}, "state": states.get(s, "COMMENTED")} for u, s in pull.reviews]
    return 200, reviews


def _gh_check_runs(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    repo = _repo("github", found)
    sha = world.branch_sha(repo, found["ref"]) or found["ref"]
    runs = [
        {
            "name": name,
            "status": "in_progress" if state == "pending" else "completed",
            "conclusion": None if state == "pending" else state,
        }
        for name, state in world.checks_of(repo, sha).items()
    ]
    return 200, {"total_count": len(runs), "check_runs": runs}


def _gh_status(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    repo = _repo("github", found)
    sha = world.branch_sha(repo, found["ref"]) or found["ref"]
    given = world.statuses.get((repo, sha), {})
    statuses = [{"context": name, "state": state} for name, state in given.items()]
    states = set(given.values())
    combined = "failure" if states & {"failure", "error"} else "pending" if states else "success"
    combined = "pending" if "pending" in states and combined == "success" else combined
    return 200, {"state": combined, "sha": sha, "total_count": len(statuses), "statuses": statuses}


_OWNER = r"/repos/(?P<owner>[\w.-]+)/(?P<name>[\w.-]+)"
_GITHUB: list[tuple[str, str, Route, str]] = [
    ("GET", _OWNER, _gh_repo, READ),
    ("GET", _OWNER + "/pulls", _gh_list, READ),
    ("POST", _OWNER + "/pulls", _gh_create, WRITE),
    ("GET", _OWNER + r"/pulls/(?P<number>\d+)", _gh_get, READ),
    ("PATCH", _OWNER + r"/pulls/(?P<number>\d+)", _gh_update, WRITE),
    ("PUT", _OWNER + r"/pulls/(?P<number>\d+)/merge", _gh_merge, WRITE),
    ("GET", _OWNER + r"/pulls/(?P<number>\d+)/reviews", _gh_reviews, READ),
    ("POST", _OWNER + r"/issues/(?P<number>\d+)/comments", _gh_comment, WRITE),
    ("GET", _OWNER + r"/issues/(?P<number>\d+)/comments", _gh_comments, READ),
    ("GET", _OWNER + r"/commits/(?P<ref>[^/]+)/check-runs", _gh_check_runs, READ),
    ("GET", _OWNER + r"/commits/(?P<ref>[^/]+)/status", _gh_status, READ),
]


# GitLab v4


def _gl_pull(world: ForgeWorld, pull: Pull, base_url: str) -> dict[str, Any]:
    web = base_url.removesuffix("/api/v4")
    states = {"open": "opened", "closed": "closed", "merged": "merged"}
    return {
        "iid": pull.number,
        "web_url": f"{web}/{pull.repo}/-/merge_requests/{pull.number}",
        "state": states[pull.state],
        "draft": pull.draft,
        "title": ("Draft: " if pull.draft else "") + pull.title,
        "description": pull.body,
        "author": {"username": pull.author},
        "source_branch": pull.head,
        "target_branch": pull.base,
        "sha": world.branch_sha(pull.repo, pull.head),
        "merge_commit_sha": pull.merge_sha,
    }


def _gl_project(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    repo = _repo("gitlab", found)
    assert call.token is not None
    level = 30 if WRITE in call.token.scopes else 20  # Developer, else Reporter
    return 200, {
        "id": sorted(world.repos).index(repo) + 1,
        "path_with_namespace": repo,
        "default_branch": world.repos[repo],
        "http_url_to_repo": f"{call.base_url.removesuffix('/api/v4')}/{repo}.git",
        "permissions": {"project_access": {"access_level": level}, "group_access": None},
    }


def _gl_pull_of(world: ForgeWorld, found: re.Match[str]) -> Pull | None:
    return world.find_pull(_repo("gitlab", found), int(found["iid"]))


def _gl_list(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    repo, state = _repo("gitlab", found), call.query.get("state", "all")
    states = {"opened": "open", "closed": "closed", "merged": "merged"}
    source = call.query.get("source_branch")
    pulls = [
        p
        for p in world.pulls[repo]
        if (state == "all" or states.get(state) == p.state) and source in (None, p.head)
    ]
    return 200, [_gl_pull(world, p, call.base_url) for p in pulls]


def _gl_create(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    repo, body = _repo("gitlab", found), call.body if isinstance(call.body, dict) else {}
    head, base = str(body.get("source_branch", "")), str(body.get("target_branch", ""))
    if world.branch_sha(repo, head) is None or world.branch_sha(repo, base) is None:
        return 400, {"message": {"source_branch": ["is invalid"]}}
    if any(p.head == head and p.state == "open" for p in world.pulls[repo]):
        text = f"Another open merge request already exists for this source branch: {head}"
        return 409, {"message": [text]}
    title = str(body.get("title", ""))
    draft = title.startswith("Draft:") or bool(body.get("draft"))
    assert call.token is not None
    pull = world.open_pull(
        repo, head, base, title.removeprefix("Draft:").strip(), str(body.get("description") or ""),
        draft=draft, author=call.token.user,
    )  # fmt: skip
    return 201, _gl_pull(world, pull, call.base_url)


def _gl_get(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    pull = _gl_pull_of(world, found)
    if pull is None:
        return 404, {"message": "404 Not found"}
    return 200, _gl_pull(world, pull, call.base_url)


def _gl_update(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    pull, body = _gl_pull_of(world, found), call.body if isinstance(call.body, dict) else {}
    if pull is None:
        return 404, {"message": "404 Not found"}
    event = body.get("state_event")
    if event == "close" and pull.state == "open":
        pull.state = "closed"
    elif event == "reopen" and pull.state == "closed":
        pull.state = "open"
    if "title" in body:
        title = str(body["title"])
        pull.draft = title.startswith("Draft:")
        pull.title = title.removeprefix("Draft:").strip()
    pull.body = str(body.get("description", pull.body))
    return 200, _gl_pull(world, pull, call.base_url)


def _gl_merge(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    pull = _gl_pull_of(world, found)
    if pull is None:
        return 404, {"message": "404 Not found"}
    if _moved(world, pull, call):
        return 409, {"message": "SHA does not match HEAD of source branch"}
    refusal = world.merge_refusal(pull)
    if refusal is not None:
        return 405, {"message": f"405 Method Not Allowed: {refusal}"}
    if world.merge(pull) is None:
        return 406, {"message": "Branch cannot be merged"}
    return 200, _gl_pull(world, pull, call.base_url)


def _gl_approvals(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    pull = _gl_pull_of(world, found)
    if pull is None:
        return 404, {"message": "404 Not found"}
    by = [{"user": {"username": u}} for u, s in pull.reviews if s == "approved"]
    return 200, {"approved": bool(by), "approved_by": by}


def _gl_statuses(world: ForgeWorld, call: Call, found: re.Match[str]) -> Answer:
    repo = _repo("gitlab", found)
    states = {"success": "success", "failure": "failed", "pending": "running"}
    checks = world.checks_of(repo, found["sha"])
    return 200, [{"name": name, "status": states[s]} for name, s in checks.items()]


_PROJECT = r"/projects/(?P<id>[^/]+)"
_MR = _PROJECT + r"/merge_requests/(?P<iid>\d+)"
_GITLAB: list[tuple[str, str, Route, str]] = [
    ("GET", _PROJECT, _gl_project, READ),
    ("GET", _PROJECT + "/merge_requests", _gl_list, READ),
    ("POST", _PROJECT + "/merge_requests", _gl_create, WRITE),
    ("GET", _MR, _gl_get, READ),
    ("PUT", _MR, _gl_update, WRITE),
    ("PUT", _MR + "/merge", _gl_merge, WRITE),
    ("POST", _MR + "/notes", _gl_note, WRITE),
    ("GET", _MR + "/notes", _gl_notes, READ),
    ("GET", _MR + "/approvals", _gl_approvals, READ),
    ("GET", _PROJECT + r"/repository/commits/(?P<sha>[0-9a-f]+)/statuses", _gl_statuses, READ),
]


def _moved(world: ForgeWorld, pull: Pull, call: Call) -> bool:
    """Whether a merge asked for head `sha` finds the pull request's branch elsewhere."""
    wanted = (call.body or {}).get("sha") if isinstance(call.body, dict) else None
    return bool(wanted) and world.branch_sha(pull.repo, pull.head) != wanted
