"""Sessions, the sign-in limit and OAuth states, on their own (no server)."""

from __future__ import annotations

import pytest

from cairn.web import sessions
from cairn.web.sessions import OAuthStates, Sessions, SignInLimit


def test_a_session_is_random_and_forgotten_when_ended_or_idle() -> None:
    kept = Sessions()
    one, two = kept.start(user_id=1), kept.start(user_id=1)
    assert one.id != two.id and one.csrf != two.csrf and len(one.id) >= 40
    assert kept.get(one.id) is one and kept.get("x" * 101) is None and kept.get(None) is None
    kept.end(one.id)
    assert kept.get(one.id) is None
    expired = Sessions(idle_seconds=-1)
    assert expired.get(expired.start(user_id=2).id) is None


def test_the_csrf_token_must_match_exactly() -> None:
    session = Sessions().start()
    assert session.csrf_matches(session.csrf)
    for wrong in (None, "", session.csrf[:-1], session.csrf + "x"):
        assert not session.csrf_matches(wrong)


def test_anonymous_sessions_are_bounded_and_signed_in_ones_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sessions, "MAX_ANONYMOUS", 3)
    kept = Sessions()
    person = kept.start(user_id=7)
    anonymous = [kept.start() for _ in range(5)]
    assert kept.get(person.id) is person
    assert [kept.get(s.id) is not None for s in anonymous] == [False, False, True, True, True]


def test_sign_in_attempts_are_limited_per_address() -> None:
    limit = SignInLimit(limit=2, window=60)
    assert [limit.allow("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert limit.allow("10.0.0.2")
    assert SignInLimit(limit=1, window=-1).allow("a"), "attempts out of the window do not count"


def test_an_oauth_state_is_for_one_session_once() -> None:
    states = OAuthStates()
    state = states.begin("session-a", 4)
    assert states.finish(state, "session-b") is None
    again = states.begin("session-a", 4)
    assert states.finish(again, "session-a") == 4
    assert states.finish(again, "session-a") is None, "a state is used once"
    stale = OAuthStates(lifetime=-1)
    assert stale.finish(stale.begin("s", 1), "s") is None


def test_the_forge_oauth_app_is_read_from_what_cairn_serve_is_given() -> None:
    from cairn.errors import UsageError
    from cairn.web import ForgeApp

    assert ForgeApp.from_environ({}) is None
    app = ForgeApp.from_environ(
        {"CAIRN_FORGE_OAUTH_CLIENT_ID": "abc", "CAIRN_FORGE_OAUTH_CLIENT_SECRET": "s3cret"}
    )
    assert app is not None and app.url == "https://github.com" and app.client_id == "abc"
    assert app.authorize_url == "https://github.com/login/oauth/authorize"
    assert "s3cret" not in repr(app)
    with pytest.raises(UsageError, match="CAIRN_FORGE_OAUTH_CLIENT_SECRET"):
        ForgeApp.from_environ({"CAIRN_FORGE_OAUTH_CLIENT_ID": "abc"})
    with pytest.raises(UsageError, match="GitHub OAuth apps only"):
        ForgeApp.from_environ(
            {
                "CAIRN_FORGE_OAUTH_KIND": "gitlab",
                "CAIRN_FORGE_OAUTH_CLIENT_ID": "a",
                "CAIRN_FORGE_OAUTH_CLIENT_SECRET": "b",
            }
        )
