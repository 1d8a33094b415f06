"""The GitHub and GitLab clients against FakeForge, over real HTTP."""

from __future__ import annotations

import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cairn.errors import ForgeAccessDenied, ForgeError, UsageError
from cairn.forges import Forge, ForgeSettings, PullAction, PullState, get_forge
from cairn.forges.github import GitHubForge, graphql_url
from cairn.testing.fake_forge import READ, FakeForge

KINDS = pytest.mark.parametrize("fake_forge", ["github", "gitlab"], indirect=True)
REPO = "acme/app"


def _client(forge: FakeForge, token: str | None = None) -> Forge:
    settings = ForgeSettings(forge.kind, REPO, forge.url, token_env="TOKEN")
    return get_forge(settings, token or forge.test_token or "", timeout=10)


def _branch(forge: FakeForge, name: str) -> str:
    """Create branch `name` on the forge, one commit past main; its sha."""
    path = forge.world.repo_path(REPO)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@x"]
    main = subprocess.run([*git, "rev-parse", "main"], cwd=path, capture_output=True, text=True)
    tree = f"{main.stdout.strip()}^{{tree}}"
    made = subprocess.run(
        [*git, "commit-tree", tree, "-p", "main", "-m", name],
        cwd=path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    sha = made.stdout.strip()
    subprocess.run([*git, "update-ref", f"refs/heads/{name}", sha], cwd=path, check=True)
    return sha


def test_api_urls_follow_the_forge_url() -> None:
    github = ForgeSettings("github", REPO, "https://github.com", token_env="T")
    enterprise = ForgeSettings("github", REPO, "https://git.example.com", token_env="T")
    gitlab = ForgeSettings("gitlab", REPO, "https://gitlab.com", token_env="T")
    assert github.api_url == "https://api.github.com"
    assert enterprise.api_url == "https://git.example.com/api/v3"
    assert gitlab.api_url == "https://gitlab.com/api/v4"
    assert enterprise.git_url == "https://git.example.com/acme/app.git"
    assert graphql_url(github.api_url) == "https://api.github.com/graphql"
    assert graphql_url(enterprise.api_url) == "https://git.example.com/api/graphql"


def test_github_marks_a_draft_ready_through_graphql_and_names_a_missing_permission(
    fake_forge: FakeForge,
) -> None:
    forge = _client(fake_forge)
    _branch(fake_forge, "cairn/job-3")
    number = forge.open_pull_request("cairn/job-3", "main", "Job 3", "b", draft=True).number
    reader = _client(fake_forge, fake_forge.add_token(scopes={READ}))
    with pytest.raises(ForgeAccessDenied, match="Pull requests: read and write"):
        reader.update(number, PullAction.ready)
    assert fake_forge.pulls(REPO)[0].draft
    assert not forge.update(number, PullAction.ready).draft
    assert [c.path for c in fake_forge.calls if c.method == "POST"][-1] == "/graphql"


@KINDS
def test_check_access_tells_read_and_push(fake_forge: FakeForge) -> None:
    full = _client(fake_forge).check_access()
    assert (full.read, full.push, full.default_branch, full.missing) == (True, True, "main", ())
    reader = _client(fake_forge, fake_forge.add_token(scopes={READ})).check_access()
    assert reader.read and not reader.push
    assert any("write" in need.lower() or "developer" in need.lower() for need in reader.missing)
    blind = _client(fake_forge, fake_forge.add_token(scopes=())).check_access()
    assert not blind.read and blind.missing


@KINDS
def test_a_wrong_token_is_refused_without_echoing_it(fake_forge: FakeForge) -> None:
    with pytest.raises(ForgeAccessDenied, match="401") as refused:
        _client(fake_forge, "wrong-token-value").check_access()
    assert "wrong-token-value" not in str(refused.value)


@KINDS
def test_open_find_get_comment_close(fake_forge: FakeForge) -> None:
    forge = _client(fake_forge)
    sha = _branch(fake_forge, "cairn/job-1")
    opened = forge.open_pull_request("cairn/job-1", "main", "Job 1", "Done.\n\nk-1\n", draft=True)
    assert (opened.state, opened.draft, opened.head, opened.head_sha) == (
        PullState.open, True, "cairn/job-1", sha,
    )  # fmt: skip
    assert [p.number for p in forge.find_pull_requests("cairn/job-1")] == [opened.number]
    assert [p.number for p in forge.find_pull_requests("other", key="k-1")] == [opened.number]
    assert forge.find_pull_requests("other", key="k-2") == []
    assert forge.find_pull_requests("other", key="k-") == [], "a key matches whole lines only"
    fake_forge.set_check(REPO, "cairn/job-1", "tests", "success")
    fake_forge.add_review(REPO, opened.number, "bob")
    seen = forge.get_pull_request(opened.number)
    assert [(c.name, c.state) for c in seen.checks] == [("tests", "success")]
    assert [(r.user, r.state) for r in seen.reviews] == [("bob", "approved")]
    assert not forge.update(opened.number, PullAction.ready).draft
    closed = forge.update(opened.number, PullAction.close, "rejected: too broad")
    assert closed.state == PullState.closed
    assert fake_forge.pulls(REPO)[0].comments == ["rejected: too broad"]


@KINDS
def test_merge_respects_branch_protection(fake_forge: FakeForge) -> None:
    forge = _client(fake_forge)
    _branch(fake_forge, "cairn/job-2")
    number = forge.open_pull_request("cairn/job-2", "main", "Job 2", "b", draft=False).number
    fake_forge.protect(REPO, "main", approvals=1, checks=["tests"])
    fake_forge.add_review(REPO, number, "cairn-bot")  # the author's own: does not count
    with pytest.raises(ForgeError, match="approving review"):
        forge.update(number, PullAction.merge)
    fake_forge.add_review(REPO, number, "bob")
    with pytest.raises(ForgeError, match="tests"):
        forge.update(number, PullAction.merge)
    fake_forge.set_check(REPO, "cairn/job-2", "tests", "success")
    merged = forge.update(number, PullAction.merge)
    assert merged.state == PullState.merged
    assert fake_forge.branch_sha(REPO, "main") == fake_forge.pulls(REPO)[0].merge_sha


@KINDS
def test_a_read_only_token_cannot_open_and_the_error_names_the_permission(
    fake_forge: FakeForge,
) -> None:
    _branch(fake_forge, "cairn/job-3")
    reader = _client(fake_forge, fake_forge.add_token(scopes={READ}))
    with pytest.raises(ForgeAccessDenied, match="403") as refused:
        reader.open_pull_request("cairn/job-3", "main", "t", "b", draft=False)
    assert "write" in str(refused.value).lower() or "developer" in str(refused.value).lower()
    assert fake_forge.pulls(REPO) == []


@KINDS
def test_a_lost_response_is_a_forge_error_after_the_forge_acted(fake_forge: FakeForge) -> None:
    forge = _client(fake_forge)
    _branch(fake_forge, "cairn/job-4")
    fake_forge.fail_after("POST", r"/(pulls|merge_requests)$")
    with pytest.raises(ForgeError, match="broke before it answered"):
        forge.open_pull_request("cairn/job-4", "main", "t", "k-4", draft=True)
    assert len(fake_forge.pulls(REPO)) == 1
    assert [c.dropped for c in fake_forge.calls if c.method == "POST"] == [True]
    assert len(forge.find_pull_requests("cairn/job-4", key="k-4")) == 1


@KINDS
def test_a_second_open_from_the_same_branch_is_refused(fake_forge: FakeForge) -> None:
    forge = _client(fake_forge)
    _branch(fake_forge, "cairn/job-5")
    forge.open_pull_request("cairn/job-5", "main", "t", "b", draft=False)
    with pytest.raises(ForgeError, match=r"refused the call \((422|409)\)"):
        forge.open_pull_request("cairn/job-5", "main", "t", "b", draft=False)
    assert len(fake_forge.pulls(REPO)) == 1


def test_unknown_forge_names_the_known_ones() -> None:
    from cairn.errors import UsageError

    with pytest.raises(UsageError, match="github, gitlab"):
        ForgeSettings.parse("bitbucket", REPO, token_env="T")


def test_calls_are_recorded_without_the_token(fake_forge: FakeForge) -> None:
    _client(fake_forge).check_access()
    assert fake_forge.test_token is not None
    assert fake_forge.calls[-1].user == "cairn-bot"
    assert fake_forge.test_token not in repr(fake_forge.calls)


def test_a_forge_answering_html_is_a_forge_error_not_a_crash() -> None:
    """A proxy's or captive portal's 200 HTML page (a wrong --forge-url) is a ForgeError
    naming what to check, not a JSONDecodeError out of room check, delivery or show."""

    class Html(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = b"<html><body>Sign in to the network</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Html)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        forge = GitHubForge(REPO, "fake_token", api=f"http://127.0.0.1:{port}/api/v3")
        with pytest.raises(ForgeError, match="did not answer JSON; check --forge-url"):
            forge.check_access()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:8080", True),
        ("http://127.5.5.5", True),
        ("http://[::1]:9000", True),
        ("http://localhost", True),
        ("https://forge.example.com", True),
        ("http://forge.example.com", False),
        ("http://10.0.0.1", False),
        ("http://localhost.example.com", False),
    ],
)
def test_plain_http_is_only_for_a_forge_on_this_machine(url: str, allowed: bool) -> None:
    if allowed:
        assert ForgeSettings.parse("github", REPO, url=url, token_env="T").url == url
    else:
        with pytest.raises(UsageError, match="must use https://"):
            ForgeSettings.parse("github", REPO, url=url, token_env="T")
