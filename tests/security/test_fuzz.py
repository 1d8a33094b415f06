"""Fuzzing hostile input: the script parser, dependency requests, the configuration loader and
the path boundary answer anything with a CairnError (or a result), never another exception.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.agents import ScriptAgent, parse_script, script_from_data
from cairn.agents.base import DependencyAsk
from cairn.config import Config
from cairn.deps.requests import dependency_problem, normalized_name
from cairn.errors import BoundaryError, CairnError, ScriptError, UsageError
from cairn.workspace.boundary import resolve_inside

FUZZ = settings(max_examples=400, deadline=None)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary()
    | st.dates()
    | st.sampled_from(["write", "run", "fail", "steps", "path", "../x", ".git/config", "\0"])
)
DATA = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(max_size=12) | st.integers(), inner, max_size=5)
    ),
    max_leaves=30,
)
STEP_NAMES = st.sampled_from(
    ["write", "append", "delete", "run", "request_dependency", "lose_stream", "fail", "finish"]
)
STEPS = st.lists(st.dictionaries(STEP_NAMES, DATA, min_size=1, max_size=2), max_size=6)


@FUZZ
@given(text=st.text())
def test_any_text_parses_or_is_a_script_error(text: str) -> None:
    with contextlib.suppress(ScriptError):
        parse_script(text)


@FUZZ
@given(text=st.sampled_from(["steps:", "steps: [", "- write:", "{", "&a [*a]", "!!python/x"]))
def test_broken_yaml_is_a_script_error(text: str) -> None:
    with pytest.raises(ScriptError):
        parse_script(text + "\n  : : -")


@FUZZ
@given(steps=STEPS, extra=st.dictionaries(st.text(max_size=5), DATA, max_size=1))
def test_any_yaml_document_parses_or_is_a_script_error(steps: list[Any], extra: dict) -> None:
    try:
        text = yaml.safe_dump({"steps": steps, **extra}, allow_unicode=True)
    except yaml.YAMLError:
        return  # not every generated value is representable (bytes, odd keys)
    with contextlib.suppress(ScriptError):
        parse_script(text)


@FUZZ
@given(data=DATA | st.fixed_dictionaries({"steps": STEPS}))
def test_any_stored_data_rebuilds_or_is_a_script_error(data: Any) -> None:
    with contextlib.suppress(ScriptError):
        script_from_data(data)


@FUZZ
@given(spec=st.dictionaries(st.sampled_from(["adapter", "script", "command_timeout"]), DATA))
def test_any_agent_spec_builds_or_is_a_cairn_error(spec: dict[str, Any]) -> None:
    with contextlib.suppress(CairnError):
        ScriptAgent.from_spec(spec)


@FUZZ
@given(fields=st.tuples(DATA, DATA, DATA, DATA))
def test_dependency_problem_answers_anything(fields: tuple[Any, Any, Any, Any]) -> None:
    problem = dependency_problem(DependencyAsk(*fields))
    assert problem is None or isinstance(problem, str)


ENV_KEYS = st.sampled_from(
    ["CAIRN_HOME", "CAIRN_DATABASE_URL", "CAIRN_LEASE_SECONDS", "CAIRN_USER", "XDG_DATA_HOME"]
)
ENV_VALUES = (
    st.text()
    | st.sampled_from(["nan", "inf", "-1", "0", "1e999", "~nobody-here/x", "~", "sqlite:", " "])
    | st.from_regex(r"postgresql\+psycopg://[^\s]*", fullmatch=True)
)


@FUZZ
@given(environ=st.dictionaries(ENV_KEYS | st.text(max_size=8), ENV_VALUES, max_size=6))
def test_any_environment_configures_or_is_a_usage_error(environ: dict[str, str]) -> None:
    try:
        config = Config.from_env(environ)
    except UsageError:
        return
    assert config.home.is_absolute() and config.lease_seconds > 0
    assert "\0" not in str(config.home)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(relative=st.text(st.sampled_from("ab./\\\0~-_ .gitGIT"), max_size=20) | st.text())
def test_any_path_resolves_inside_or_is_refused(tmp_path: Path, relative: str) -> None:
    root = tmp_path / "workspace"
    (root / ".git").mkdir(parents=True, exist_ok=True)
    try:
        resolved = resolve_inside(root, relative)
    except BoundaryError:
        return
    inside = resolved.relative_to(root.resolve()).parts
    assert inside and inside[0].casefold() != ".git"


VALID = {
    "pypi": [("rich", "13.7.1"), ("PyYAML", "6.0.1"), ("zope.interface", "6.0"),
             ("a", "1!2.0.post1.dev3"), ("typing_extensions", "4.9.0rc1")],
    "npm": [("left-pad", "1.3.0"), ("@types/node", "20.11.5"), ("react", "18.3.0-canary.1")],
}  # fmt: skip
REFUSED_VERSIONS = [
    ">=1.0", "~=1.4", "^1.2.3", "1.*", "*", "latest", "1.0,<2", "1.0 || 2.0",
    "1.0.0+local.1", "https://example.com/x.tar.gz", "git+https://github.com/a/b",
    "file:../x", "../x", "/tmp/x", "1.0\n", " 1.0", "v1.2.3", "",
]  # fmt: skip
REFUSED_NAMES = {
    "pypi": ["", "-rich", "rich-", "ri ch", "rich[extra]", "rich>=1", "../x", "a/b", "ri\0ch"],
    "npm": ["", "Left-Pad", ".hidden", "_private", "a b", "@myscope", "@/x", "node_modules",
            "x/y", "../x", "http://x", "é"],
}  # fmt: skip


@pytest.mark.parametrize(("ecosystem", "name", "version"),
                         [(e, n, v) for e, pairs in VALID.items() for n, v in pairs])  # fmt: skip
def test_valid_requests_reach_a_person(ecosystem: str, name: str, version: str) -> None:
    assert dependency_problem(DependencyAsk(ecosystem, name, version, "needed")) is None


@pytest.mark.parametrize("version", REFUSED_VERSIONS)
@pytest.mark.parametrize("ecosystem", ["pypi", "npm"])
def test_anything_but_one_exact_version_is_refused(ecosystem: str, version: str) -> None:
    name = "rich" if ecosystem == "pypi" else "left-pad"
    problem = dependency_problem(DependencyAsk(ecosystem, name, version, "needed")) or ""
    assert "not one exact version" in problem
    assert len(version.strip()) < 6 or version.strip() not in problem


@pytest.mark.parametrize(("ecosystem", "name"),
                         [(e, n) for e, names in REFUSED_NAMES.items() for n in names])  # fmt: skip
def test_invalid_names_are_refused_without_echoing_them(ecosystem: str, name: str) -> None:
    problem = dependency_problem(DependencyAsk(ecosystem, name, "1.0.0", "needed")) or ""
    assert "name" in problem
    assert len(name) < 6 or name not in problem


def test_npm_needs_all_three_version_numbers() -> None:
    assert dependency_problem(DependencyAsk("npm", "left-pad", "1.2", "needed"))


def test_unknown_ecosystems_are_refused_and_a_secret_in_a_name_too() -> None:
    assert "unknown ecosystem" in (dependency_problem(DependencyAsk("PyPI", "x", "1", "r")) or "")
    ask = DependencyAsk("pypi", "abcdef0123456789", "1.0", "r")
    problem = dependency_problem(ask, mask=lambda text: text.replace("abcdef0123456789", "[s]"))
    assert problem is not None and "secret" in problem
    assert dependency_problem(DependencyAsk("pypi", "Typing_Extensions", "4.9.0", " r ")) is None
    assert normalized_name("pypi", "Typing_Extensions") == "typing-extensions"
