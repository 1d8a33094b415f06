"""The script format: every step kind parses, every malformed script says what to fix."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.agents import (
    AppendStep,
    DeleteStep,
    FailStep,
    FinishStep,
    LoseStreamStep,
    RequestDependencyStep,
    RunStep,
    Script,
    WriteStep,
    parse_script,
    script_from_data,
    script_to_data,
)
from cairn.agents.script_format import MAX_SCRIPT_BYTES, MAX_SCRIPT_CHARS
from cairn.errors import ScriptError

EVERY_STEP = """\
steps:
  - write: {path: src/app.py, content: "print('hi')\\n"}
  - append: {path: README.md, content: "\\nUsage: ...\\n"}
  - delete: {path: old.txt}
  - run: "python src/app.py"
  - request_dependency: {ecosystem: pypi, name: rich, version: "13.7.1", reason: "colour output"}
  - lose_stream: {}
  - lose_stream:
  - fail: "could not find the entry point"
  - finish: {summary: "Added src/app.py"}
  - finish: {}
"""


def test_every_step_kind_parses_into_its_record() -> None:
    assert parse_script(EVERY_STEP) == Script(
        (
            WriteStep("src/app.py", "print('hi')\n"),
            AppendStep("README.md", "\nUsage: ...\n"),
            DeleteStep("old.txt"),
            RunStep("python src/app.py"),
            RequestDependencyStep("pypi", "rich", "13.7.1", "colour output"),
            LoseStreamStep(),
            LoseStreamStep(),
            FailStep("could not find the entry point"),
            FinishStep("Added src/app.py"),
            FinishStep(None),
        )
    )


def test_an_empty_steps_list_is_a_script_that_does_nothing() -> None:
    assert parse_script("steps: []") == Script(())


def test_parsed_scripts_are_frozen() -> None:
    script = parse_script(EVERY_STEP)
    with pytest.raises(AttributeError):
        script.steps[0].path = "elsewhere"  # type: ignore[misc,union-attr]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "a script must be a mapping with a `steps:` list"),
        ("- write: {}", "a script must be a mapping"),
        ("steps: 3", "a script needs a `steps:` list"),
        ("steps: []\nname: demo", "unknown top-level key(s) 'name'"),
        ("steps: [", "not valid YAML"),
        ("steps: [{a: 1}, 2001-13-01]", "not valid YAML (month must be in 1..12)"),
        ("[" * 5000, "not valid YAML (it is nested too deeply)"),
        ("steps: [3]", "step 1: each step must be a mapping with exactly one key"),
        ("steps: [{write: {path: a, content: b}, run: x}]", "step 1: each step must be"),
        (
            "steps: [finish: {}, bogus: {}]",
            "step 2: unknown step 'bogus'; use one of write, append, delete, run, "
            "request_dependency, lose_stream, fail, finish",
        ),
        ("steps: [{1: x}]", "step 1: unknown step 1 (a number)"),
        ("steps: [write: {path: a}]", "step 1 (write): missing field(s) content"),
        ("steps: [delete: {path: a, force: true}]", "step 1 (delete): unexpected field(s) 'force'"),
        ("steps: [lose_stream: {why: x}]", "the fields are none"),
        ("steps: [write: {path: a, content: 3}]", "step 1 (write): `content` must be text, not a"),
        ("steps: [append: {path: a, content: [x]}]", "`content` must be text, not a list"),
        ("steps: [write: {path: a, content: null}]", "`content` must be text, not empty"),
        (
            "steps: [request_dependency: {ecosystem: pypi, name: rich, version: 13.7, reason: r}]",
            '`version` must be text, not a number; quote it (for example "13.7")',
        ),
        ("steps: [run: {cmd: ls}]", "step 1 (run): `command` must be text, not a mapping"),
        ("steps: [run: '']", "step 1 (run): `command` is empty"),
        ("steps: [fail: 7]", "step 1 (fail): `message` must be text"),
        ("steps: [finish: done]", "step 1 (finish): expected a mapping of fields"),
        ("steps: [finish: {summary: 1}]", "`summary` must be text"),
        ('steps: [write: {path: a, content: "\\ud800"}]', "unpaired surrogate"),
        ('steps: [write: {path: "a\\0b", content: x}]', "NUL character"),
        ("steps: [write: {path: /etc/passwd, content: x}]", "must be relative to the workspace"),
        ("steps: [append: {path: ../up.txt, content: x}]", "climbs out of the workspace"),
        ("steps: [delete: {path: src/../../up.txt}]", "climbs out of the workspace"),
        ("steps: [write: {path: .git/config, content: x}]", "inside `.git`, which is off limits"),
        ("steps: [write: {path: .GIT/hooks/x, content: x}]", "inside `.git`"),
        ("steps: [write: {path: ., content: x}]", "names no file"),
        ("steps: [write: {path: '', content: x}]", "`path` is empty"),
    ],
)
def test_malformed_scripts_say_which_step_and_what_to_fix(text: str, expected: str) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_script(text)
    assert expected in str(caught.value)


def test_a_path_error_names_the_step_it_is_in() -> None:
    text = "steps:\n  - finish: {}\n  - finish: {}\n  - write: {path: ../x, content: y}\n"
    with pytest.raises(ScriptError, match=r"^step 3 \(write\): the path '\.\./x' climbs"):
        parse_script(text)


def test_an_absolute_path_is_not_echoed_back() -> None:
    with pytest.raises(ScriptError) as caught:
        parse_script("steps: [write: {path: /home/someone/secret, content: x}]")
    assert "/home/someone" not in str(caught.value)


def test_a_script_carrying_too_much_text_is_refused() -> None:
    # One big string referenced twice, as a YAML alias would do.
    big = "x" * (MAX_SCRIPT_CHARS // 2 + 1)
    data = {"steps": [{"write": {"path": "a", "content": big}}] * 2}
    with pytest.raises(ScriptError, match="keep it under"):
        script_from_data(data)


def test_script_round_trips_through_stored_json() -> None:
    script = parse_script(EVERY_STEP)
    stored = json.dumps(script_to_data(script))
    assert script_from_data(json.loads(stored)) == script


def test_stored_data_is_checked_like_yaml() -> None:
    with pytest.raises(ScriptError, match=r"step 1 \(write\): the path must be relative"):
        script_from_data({"steps": [{"write": {"path": "/abs", "content": ""}}]})


# Fuzzing of the parser (any input: a script or a ScriptError) is in tests/security/test_fuzz.py.
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- round trips of valid scripts ---

texts = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"))
words = texts.filter(bool)
paths = st.lists(st.from_regex(r"[a-z_][a-z0-9_.-]{0,8}", fullmatch=True), min_size=1, max_size=3)
paths = paths.map("/".join).filter(lambda p: ".." not in p.split("/") and "." not in p.split("/"))
steps = st.one_of(
    st.builds(WriteStep, paths, texts),
    st.builds(AppendStep, paths, texts),
    st.builds(DeleteStep, paths),
    st.builds(RunStep, words),
    st.builds(RequestDependencyStep, words, words, words, words),
    st.builds(LoseStreamStep),
    st.builds(FailStep, words),
    st.builds(FinishStep, st.none() | texts),
)
scripts = st.lists(steps, max_size=8).map(lambda found: Script(tuple(found)))


@FUZZ
@given(scripts)
def test_valid_scripts_round_trip_through_json_and_yaml(script: Script) -> None:
    data = script_to_data(script)
    assert script_from_data(json.loads(json.dumps(data))) == script
    assert parse_script(yaml.safe_dump(data)) == script


def test_a_script_text_over_the_byte_limit_is_refused_before_parsing() -> None:
    # 3 bytes a character: under the limit in characters, over it in bytes.
    text = "steps: [fail: '" + "€" * (MAX_SCRIPT_BYTES // 3) + "']"
    assert len(text) < MAX_SCRIPT_BYTES < len(text.encode())
    with pytest.raises(ScriptError, match=r"larger than 256 KiB"):
        parse_script(text)
