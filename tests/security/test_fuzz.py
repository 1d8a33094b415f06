"""Fuzzing hostile input: the script parser, agent specs, dependency requests, the
configuration loader and the path boundary. Each property says what must hold of the answer:
valid input comes back whole (a script round-trips, a path stays inside), and a refusal is the
documented error with a one-line message that names what is wrong and echoes no path, URL or
long value it was given.

These are the only fuzz tests of these parsers; the command line as a whole is fuzzed in
test_cli_fuzz.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cairn.agents import Script, ScriptAgent, parse_script, script_from_data, script_to_data
from cairn.agents.base import DependencyAsk
from cairn.config import Config
from cairn.deps.requests import dependency_problem, normalized_name
from cairn.errors import BoundaryError, CairnError, ScriptError, UsageError
from cairn.workspace.boundary import resolve_inside

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SECRET_PATH = "/home/alice/secret/notes.txt"
"""An absolute path no refusal may repeat (it would show a private layout)."""
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary()
    | st.dates()
    | st.sampled_from(
        ["write", "run", "fail", "steps", "path", "../x", ".git/config", "a.txt", "\0", SECRET_PATH]
    )
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
STEP_FIELDS = st.sampled_from(
    ["path", "content", "command", "summary", "message", "ecosystem", "name", "version", "reason"]
)
STEP_ARGS = DATA | st.dictionaries(STEP_FIELDS, DATA, max_size=3)
STEPS = st.lists(st.dictionaries(STEP_NAMES, STEP_ARGS, min_size=1, max_size=2), max_size=6)


def _assert_refusal(exc: CairnError, *, names: str, one_line: bool = True) -> str:
    """The refusal's message: non-empty, one line, naming `names`, repeating no private path."""
    message = str(exc)
    assert message.strip(), "a refusal says why"
    # PyYAML's reader errors span two lines ("...\n  in <unicode string>, position 0").
    assert not one_line or "\n" not in message, message
    assert names in message.lower(), message
    assert SECRET_PATH not in message, message
    return message


def _assert_parsed_or_refused(parse: Any, value: Any) -> None:
    """A parse gives a Script that round-trips through JSON, or a ScriptError that says why."""
    try:
        script = parse(value)
    except ScriptError as exc:
        message = _assert_refusal(exc, names="", one_line=False)
        assert not message.startswith("step 0"), "steps are counted from 1"
        return
    assert isinstance(script, Script)
    assert script_from_data(json.loads(json.dumps(script_to_data(script)))) == script


YAML_PUNCTUATION = "{}[]:- \n'\"!&*#|>%@`,?\\0123456789abcdefgswriteunpathcontent"


@FUZZ
@given(text=st.text() | st.text(alphabet=YAML_PUNCTUATION))
def test_any_text_is_a_script_or_a_script_error(text: str) -> None:
    _assert_parsed_or_refused(parse_script, text)


@FUZZ
@given(text=st.sampled_from(["steps:", "steps: [", "- write:", "{", "&a [*a]", "!!python/x"]))
def test_broken_yaml_is_a_script_error_that_says_so(text: str) -> None:
    with pytest.raises(ScriptError) as refused:
        parse_script(text + "\n  : : -")
    _assert_refusal(refused.value, names="yaml", one_line=False)


@FUZZ
@given(steps=STEPS, extra=st.dictionaries(st.text(max_size=5), DATA, max_size=1))
def test_any_yaml_document_is_a_script_or_a_script_error(steps: list[Any], extra: dict) -> None:
    try:
        text = yaml.safe_dump({"steps": steps, **extra}, allow_unicode=True)
    except yaml.YAMLError:
        return  # not every generated value is representable (bytes, odd keys)
    _assert_parsed_or_refused(parse_script, text)


@FUZZ
@given(data=DATA | st.fixed_dictionaries({"steps": STEPS}))
def test_any_stored_data_is_a_script_or_a_script_error(data: Any) -> None:
    _assert_parsed_or_refused(script_from_data, data)


@FUZZ
@given(spec=st.dictionaries(st.sampled_from(["adapter", "script", "command_timeout"]), DATA))
def test_any_agent_spec_builds_a_working_agent_or_is_refused(spec: dict[str, Any]) -> None:
    try:
        agent = ScriptAgent.from_spec(spec)
    except ScriptError as exc:  # the stored script itself is wrong
        _assert_refusal(exc, names="", one_line=False)
        return
    except UsageError as exc:  # the spec around it is
        _assert_refusal(exc, names="script")
        return
    assert isinstance(agent.script, Script) and agent.command_timeout > 0
    assert ScriptAgent.from_spec({**spec, "script": script_to_data(agent.script)}).script == (
        agent.script
    )


@FUZZ
@given(fields=st.tuples(DATA, DATA, DATA, DATA))
def test_dependency_problem_refuses_without_echoing_or_passes_only_text(
    fields: tuple[Any, Any, Any, Any],
) -> None:
    problem = dependency_problem(DependencyAsk(*fields))
    if problem is None:
        assert all(isinstance(field, str) for field in fields)
        assert fields[0] in ("pypi", "npm") and fields[3].strip()
        return
    assert problem.strip() and "\n" not in problem
    echoed = [f for f in fields if isinstance(f, str) and len(f.strip()) >= 6 and f in problem]
    assert not echoed, f"{problem!r} repeats {echoed!r}"


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
def test_any_environment_configures_or_names_the_variable_to_fix(environ: dict[str, str]) -> None:
    try:
        config = Config.from_env(environ)
    except UsageError as exc:
        message = _assert_refusal(exc, names="cairn_")
        assert any(name in message for name in environ if name.startswith("CAIRN_")), message
        shown = [v for v in environ.values() if len(v) >= 8 and ("/" in v or ":" in v)]
        assert not [v for v in shown if v in message], f"{message!r} repeats a path or URL"
        return
    assert config.home.is_absolute() and config.lease_seconds > 0
    assert "\0" not in str(config.home)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(relative=st.text(st.sampled_from("ab./\\\0~-_ .gitGIT"), max_size=20) | st.text())
# Found by this test: a path's shown name kept its line end (and would keep an escape).
@example(relative="/\n")
@example(relative="a\n/../b")
@example(relative="\x1b[2J/../x")
def test_any_path_resolves_inside_or_is_refused_without_the_root(
    tmp_path: Path, relative: str
) -> None:
    root = tmp_path / "workspace"
    (root / ".git").mkdir(parents=True, exist_ok=True)
    try:
        resolved = resolve_inside(root, relative)
    except BoundaryError as exc:
        message = _assert_refusal(exc, names="")
        assert str(root) not in message and str(root.resolve()) not in message
        assert message.isprintable(), message  # no control character reaches a terminal
        return
    inside = resolved.relative_to(root.resolve()).parts
    assert inside and inside[0].casefold() != ".git"
    assert resolved == (root / relative).resolve()


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
