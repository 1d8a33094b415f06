"""The fingerprint: stable under formatting, sensitive to every input, blind to credentials."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from cairn.deps.fingerprint import (
    DependencyInputs,
    Environment,
    fingerprint,
    read_inputs,
    write_inputs,
)
from cairn.errors import UsageError

ENV = Environment(
    "uv 0.13.9", "CPython 3.11.7", "Linux x86_64 glibc 2.36", "https://pypi.org/simple"
)
NPM_ENV = dataclasses.replace(
    ENV, tool="npm 11.0.0", runtime="node v20.0.0", source="https://registry.npmjs.org/"
)
PYPROJECT = """\
[project]
name = "demo"
version = "0.1.0"
description = "A demo"
requires-python = ">=3.11"
dependencies = ["six==1.16.0"]

[tool.uv]
required-version = ">=0.5"
"""
UV_LOCK = """\
version = 1
requires-python = ">=3.11"

[[package]]
name = "six"
version = "1.16.0"
source = { registry = "https://pypi.org/simple" }
"""
PACKAGE_JSON = {
    "name": "demo",
    "version": "1.0.0",
    "scripts": {"test": "node test.js"},
    "dependencies": {"is-number": "7.0.0"},
    "packageManager": "npm@11.0.0",
}
PACKAGE_LOCK = {
    "lockfileVersion": 3,
    "packages": {"": {"name": "demo"}, "node_modules/is-number": {"version": "7.0.0"}},
}
UV_FILES = SimpleNamespace(
    ecosystem="pypi", declarations="pyproject.toml", lockfile="uv.lock", config=("uv.toml",)
)


def python(pyproject: str = PYPROJECT, lock: str = UV_LOCK, **more: str) -> DependencyInputs:
    files = {"pyproject.toml": pyproject.encode(), "uv.lock": lock.encode()}
    return DependencyInputs("pypi", files | {k: v.encode() for k, v in more.items()})


def node(package: dict | None = None, lock: dict | None = None, npmrc: str | None = None):
    files = {
        "package.json": json.dumps(package or PACKAGE_JSON).encode(),
        "package-lock.json": json.dumps(lock or PACKAGE_LOCK).encode(),
    }
    if npmrc is not None:
        files[".npmrc"] = npmrc.encode()
    return DependencyInputs("npm", files)


def test_the_same_inputs_always_give_the_same_fingerprint() -> None:
    assert fingerprint(python(), ENV) == fingerprint(python(), ENV)
    assert len(fingerprint(python(), ENV)) == 64


def test_formatting_comments_and_fields_that_install_nothing_do_not_change_it() -> None:
    reformatted = PYPROJECT.replace('name = "demo"', '# the project\nname    =    "demo"')
    described = PYPROJECT.replace("A demo", "Another description")
    assert fingerprint(python(reformatted), ENV) == fingerprint(python(), ENV)
    assert fingerprint(python(described), ENV) == fingerprint(python(), ENV)
    scripts = PACKAGE_JSON | {"scripts": {"test": "jest"}, "description": "x"}
    assert fingerprint(node(scripts), NPM_ENV) == fingerprint(node(), NPM_ENV)


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(python(PYPROJECT.replace("six==1.16.0", "six==1.17.0")), id="declaration"),
        pytest.param(python(lock=UV_LOCK.replace('"1.16.0"', '"1.17.0"')), id="lockfile"),
        pytest.param(python(PYPROJECT.replace(">=0.5", ">=0.6")), id="pinned-uv-version"),
        pytest.param(
            python(PYPROJECT + 'index-url = "https://mirror.example/simple"\n'), id="index-url"
        ),
        pytest.param(
            python(**{"uv.toml": 'index-url = "https://mirror.example/simple"'}), id="uv.toml-index"
        ),
    ],
)
def test_every_python_input_changes_it(changed: DependencyInputs) -> None:
    assert fingerprint(changed, ENV) != fingerprint(python(), ENV)


@pytest.mark.parametrize(
    "field", ["tool", "runtime", "platform", "source", "outside_links"], ids=str
)
def test_tool_interpreter_platform_and_source_change_it(field: str) -> None:
    value = ("/usr/bin/python3.12",) if field == "outside_links" else "something else"
    assert fingerprint(python(), dataclasses.replace(ENV, **{field: value})) != fingerprint(
        python(), ENV
    )


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(node(PACKAGE_JSON | {"dependencies": {"is-number": "7.0.1"}}), id="decl"),
        pytest.param(node(PACKAGE_JSON | {"packageManager": "npm@11.0.1"}), id="packageManager"),
        pytest.param(node(lock={"lockfileVersion": 3, "packages": {"": {}}}), id="lockfile"),
        pytest.param(node(npmrc="registry=https://mirror.example/\n"), id="npmrc-registry"),
    ],
)
def test_every_npm_input_changes_it(changed: DependencyInputs) -> None:
    assert fingerprint(changed, NPM_ENV) != fingerprint(node(), NPM_ENV)


def test_auth_tokens_in_configuration_do_not_change_it() -> None:
    plain = node(npmrc="registry=https://registry.npmjs.org/\n")
    with_tokens = node(
        npmrc="registry=https://registry.npmjs.org/\n"
        "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n"
        "_auth=dXNlcjpwYXNz\nalways-auth=true\n"
    )
    assert fingerprint(with_tokens, NPM_ENV) == fingerprint(plain, NPM_ENV)
    index = 'index-url = "https://{}mirror.example/simple"\n'
    assert fingerprint(python(PYPROJECT + index.format("alice:s3cret@")), ENV) == fingerprint(
        python(PYPROJECT + index.format("")), ENV
    )
    secret_source = dataclasses.replace(ENV, source="https://bob:tok@pypi.org/simple")
    assert fingerprint(python(), secret_source) == fingerprint(python(), ENV)


def test_inputs_are_read_only_from_regular_files(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert read_inputs(tmp_path, UV_FILES) is None  # no lockfile: nothing to prepare
    assert read_inputs(tmp_path, UV_FILES, require_lockfile=False) is not None
    (tmp_path / "elsewhere.lock").write_text(UV_LOCK)
    os.symlink(tmp_path / "elsewhere.lock", tmp_path / "uv.lock")
    with pytest.raises(UsageError, match="symlink") as refused:
        read_inputs(tmp_path, UV_FILES)
    assert str(tmp_path) not in str(refused.value)


def test_a_fifo_in_place_of_an_input_is_refused_without_waiting_for_a_writer(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    os.mkfifo(tmp_path / "uv.lock")
    with pytest.raises(UsageError, match="not a regular file"):
        read_inputs(tmp_path, UV_FILES)


def test_unparseable_inputs_are_refused_without_paths(tmp_path: Path) -> None:
    broken = python("[project\nname = 'x'")
    with pytest.raises(UsageError, match=r"pyproject\.toml cannot be parsed") as refused:
        fingerprint(broken, ENV)
    assert "/" not in str(refused.value)


def test_written_inputs_replace_a_planted_symlink_instead_of_following_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    project = tmp_path / "project"
    project.mkdir()
    os.symlink(outside, project / "uv.lock")
    write_inputs(project, python())
    assert outside.read_text() == "keep me"
    assert not (project / "uv.lock").is_symlink()
    assert (project / "uv.lock").read_text() == UV_LOCK
