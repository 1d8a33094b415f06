"""The sanitizer alone: every secret kind masked in realistic text, bounds that never grow."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.agents.base import DependencyAsk, Outcome, OutcomeKind
from cairn.config import Config
from cairn.sanitize import (
    CUT_MARKER,
    INTERNAL_COMMAND,
    MASK,
    Sanitizer,
    bound,
    edge_sanitizer,
    is_secret_name,
    tail,
    user_sanitizer,
)

from .leaks import CARRIED, Planted, check_producer


def _sanitizer_for(planted: Planted) -> Sanitizer:
    return Sanitizer(environ=planted.environ, secrets=planted.configured)


def test_every_kind_is_masked_in_realistic_text() -> None:
    check_producer(lambda planted: _sanitizer_for(planted).mask(planted.text), max_examples=300)


@pytest.mark.parametrize("kind", sorted(CARRIED))
def test_each_kind_on_its_own(kind: str) -> None:
    check_producer(
        lambda planted: _sanitizer_for(planted).clean(planted.text, 100_000),
        kinds=(kind,),
        max_examples=25,
    )


@given(text=st.text(), limit=st.integers(min_value=0, max_value=600))
@settings(max_examples=300, deadline=None)
def test_clean_never_grows_past_the_bound(text: str, limit: int) -> None:
    env = {"SHORT_TOKEN": "abcd", "ANY": "value-of-six"}
    cleaned = Sanitizer(environ=env, secrets=["s3cr"]).clean(text, limit)
    assert len(cleaned) <= limit


@given(text=st.text(min_size=1), limit=st.integers(min_value=0, max_value=200))
def test_bound_cuts_on_a_character_boundary_with_a_marker(text: str, limit: int) -> None:
    cut = bound(text, limit)
    assert len(cut) <= limit
    if len(text) <= limit:
        assert cut == text
    elif limit > len(CUT_MARKER):
        assert cut.endswith(CUT_MARKER)
        assert text.startswith(cut.removesuffix(CUT_MARKER))


@given(st.lists(st.text("abc xyz", min_size=1, max_size=20), min_size=1), st.integers(1, 80))
def test_tail_never_starts_inside_a_word(words: list[str], limit: int) -> None:
    text = "\n".join(words)
    kept = tail(text, limit)
    assert len(kept) <= limit and text.endswith(kept)
    start = len(text) - len(kept)
    cut_inside_word = start > 0 and not (text[start - 1].isspace() or kept[:1].isspace())
    assert not cut_inside_word or (" " not in text[-limit:] and "\n" not in text[-limit:])


def test_a_secret_cut_by_a_tail_does_not_survive_as_a_half() -> None:
    token = "ghp_" + "A1b2C3d4" * 5
    output = f"line one\nexport T={token} && deploy\nfinal line"
    for limit in range(10, len(output)):
        shown = Sanitizer(environ={}).mask(tail(output, limit))
        assert token[6:18] not in shown, (limit, shown)


def test_local_paths_become_placeholders(tmp_path: Path) -> None:
    config = Config(home=tmp_path / "cairn-home")
    workspace = config.workspaces_dir / "abc" / "job-3"
    sanitizer = user_sanitizer(config, str(tmp_path / "repo"))
    text = f"error in {workspace}/src/app.py; see {config.home}/log and {tmp_path}/repo/.git"
    shown = sanitizer.mask(text)
    assert str(tmp_path) not in shown
    assert "<workspaces>/abc/job-3/src/app.py" in shown
    assert "<cairn-home>/log" in shown and "<repository>/.git" in shown


def test_a_path_placeholder_needs_a_path_boundary() -> None:
    sanitizer = Sanitizer(paths={"~": "/home/al"}, environ={})
    assert sanitizer.mask("/home/al/x and /home/alice/y") == "~/x and /home/alice/y"


def test_internal_command_lines_are_dropped() -> None:
    text = (
        "running\n"
        "git --no-pager -c core.hooksPath=/dev/null -c core.fsmonitor=false fetch origin\n"
        "bwrap --ro-bind / / --unshare-net -- /bin/sh -c make\n"
        "CalledProcessError: Command '['git', 'push']' returned non-zero exit status 1.\n"
        "done"
    )
    shown = Sanitizer(environ={}).mask(text)
    assert "hooksPath" not in shown and "--ro-bind" not in shown and "'push'" not in shown
    assert shown.count(INTERNAL_COMMAND) == 3
    assert shown.startswith("running\n") and shown.endswith("done")


def test_environment_values_are_masked_however_the_variable_is_named() -> None:
    env = {"ZZ_SETTING": "plain-looking-value", "DB_PASS": "abcd", "PWD": "/srv/app"}
    shown = Sanitizer(environ=env).mask("x plain-looking-value y abcd z /srv/app/main.py")
    assert shown == f"x [ZZ_SETTING] y {MASK} z [PWD]/main.py"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_TOKEN", True),
        ("api_key", True),
        ("clientSecret", True),
        ("x-api-key", True),
        ("DB_PASSWORD", True),
        ("aws_secret_access_key", True),
        ("KeyError", False),
        ("tokenizer", False),
        ("token_type", True),
        ("tokens_used", False),
        ("primary", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_prose_stays_readable() -> None:
    text = "KeyError: 'retries'\nthe token validation failed; Basic authentication is off"
    assert Sanitizer(environ={}).mask(text) == text


def test_the_edge_sanitizer_works_even_when_configuration_is_broken() -> None:
    broken = {"CAIRN_LEASE_SECONDS": "soon", "DEPLOY_TOKEN": "tok-123456"}
    assert edge_sanitizer(broken).mask("failed with tok-123456") == f"failed with {MASK}"


@pytest.mark.parametrize(
    "hostile",
    [
        "a://:" + "@" * 60_000,
        "a://:x" * 12_000,
        "-----BEGIN PRIVATE KEY-----" * 2_000,
        "QUFB\n" * 20_000 + "-----END PRIVATE KEY-----" * 2_000,
        "password: " * 6_000,
        "a=" * 30_000,
        '\\"' * 30_000,
        "Authorization: " * 4_000,
    ],
)
def test_masking_hostile_output_stays_fast(hostile: str) -> None:
    started = time.monotonic()
    Sanitizer(environ={}).clean(hostile)
    assert time.monotonic() - started < 2


def test_an_outcome_can_be_masked_before_it_is_stored() -> None:
    token = "ghp_" + "P0o9I8u7" * 5
    outcome = Outcome(
        OutcomeKind.dependency_request,
        summary=f"used {token}",
        diagnosis=f"saw {token}",
        dependency=DependencyAsk("pypi", "rich", "13.7.1", f"needs {token}"),
        isolation_unproven=True,
    )
    masked = outcome.masked(Sanitizer(environ={}).mask)
    assert token not in repr(masked.to_data())
    assert masked.dependency is not None and masked.dependency.name == "rich"
    assert Outcome.from_data(masked.to_data()) == masked and masked.isolation_unproven


def test_a_key_whose_begin_line_was_cut_off_is_still_masked() -> None:
    # The last lines of a command's output: the key's BEGIN line fell outside them.
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="
    text = f"the verify command failed:\n{body}\n-----END PRIVATE KEY-----\nusing it"
    cleaned = Sanitizer(environ={}).clean(text)
    assert "MIIE" not in cleaned and "AAAAAAAA" not in cleaned
    assert cleaned.startswith("the verify command failed:\n") and cleaned.endswith("\nusing it")
