"""The npm installer: npm packages for projects with `package.json` and `package-lock.json`.

npm runs with `--ignore-scripts` (no preinstall/install/postinstall/prepare script of the
project or of any package), no user or global npmrc (a private HOME, empty config files), the
approved registry only, and no audit or funding calls. An entry is the `node_modules` folder
that `npm ci` builds from a temporary copy of the inputs.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from cairn.deps.fingerprint import Environment, without_credentials
from cairn.deps.installer import (
    InstallError,
    Package,
    ToolInstaller,
    ToolOptions,
    failure,
    host_platform,
    tool_environment,
)

if TYPE_CHECKING:
    from cairn.config import Config

NPMJS = "https://registry.npmjs.org/"
_KNOWN_FAILURES = (
    (r"No matching version found for ((?:@[\w.~-]+/)?[\w.~-]+)@([\w.+-]+)",
     "npm {}@{} does not exist on the approved registry; check the name and version"),
    (r"404 Not Found - GET \S+/((?:@[\w.~-]+(?:/|%2f))?[\w.~-]+) - Not found",
     "npm {} does not exist on the approved registry; check the name"),
    (r"(ERESOLVE[^\n]*)",
     "npm could not fit the approved version with the project's other requirements ({})"),
    (r"`npm ci` can only install packages when your package.json and package-lock.json",
     "package.json and package-lock.json disagree; run `npm install` and commit the lockfile"),
)  # fmt: skip
_SHOWN_NAME = re.compile(r"(?:@[a-z0-9~-][a-z0-9._~-]*/)?[a-z0-9~-][a-z0-9._~-]{0,100}")
_SHOWN_PIN = re.compile(r"[\w.@+-]{1,60}")
_DEPENDENCY_FIELDS = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies")
# A version range, a tag or `npm:alias@range` is fine; these name a path, URL or repository.
_NOT_REGISTRY = re.compile(
    r"\s*(?:file:|link:|portal:|git|github:|gitlab:|bitbucket:|gist:|https?:|\.|/|~/|"
    r"[\w.-]+/[\w.-]+(?:#.*)?\s*$)"
)


class NpmInstaller(ToolInstaller):
    """Prepares npm dependencies with npm (see the module docstring for the rules)."""

    name = "npm"
    ecosystem = "npm"
    declarations = "package.json"
    lockfile = "package-lock.json"
    config = (".npmrc",)
    target = "node_modules"
    no_lockfile = "the project has no package-lock.json; run `npm install`"

    def __init__(
        self,
        *,
        npm: str | Path | None = None,
        node: str | Path | None = None,
        registry: str = NPMJS,
        **options: Unpack[ToolOptions],
    ) -> None:
        super().__init__(**options)
        self.npm = str(npm or _which("npm"))
        self.node = str(node or _which("node"))
        self.registry = registry.rstrip("/") + "/"

    @classmethod
    def _configured(cls, config: Config) -> dict[str, Any]:
        return {"npm": config.npm_command, "registry": config.npm_registry}

    def environment(self) -> Environment:
        return Environment(
            tool=f"npm {npm_version(self.npm, self.node)}",
            runtime=f"node {node_version(self.node)}",
            platform=host_platform(),
            source=without_credentials(self.registry),
        )

    def _add(self, inputs_dir: Path, name: str, version: str, home: Path) -> None:
        args = ["install", "--package-lock-only", "--save-exact", f"{name}@{version}"]
        self._run(args, inputs_dir, home, "npm install")

    def _prepare(self, work: Path, entry_dir: Path, home: Path) -> None:
        self._run(["ci"], work, home, "npm ci")
        built = work / self.target
        if not built.is_dir():  # a project without dependencies
            built.mkdir()
        shutil.move(built, entry_dir / self.target)

    def resolved(self, root: Path) -> list[Package]:
        hidden = root / self.target / ".package-lock.json"
        try:
            packages = json.loads(hidden.read_text(encoding="utf-8")).get("packages", {})
        except FileNotFoundError:
            return []
        found = []
        for key, entry in sorted(packages.items()):
            if entry.get("link") or not (root / key / "package.json").is_file():
                continue
            name = entry.get("name") or key.rsplit("node_modules/", 1)[-1]
            found.append(Package(str(name), str(entry.get("version", ""))))
        return found

    def _run(self, args: list[str], cwd: Path, home: Path, what: str) -> None:
        for config in ("user-npmrc", "global-npmrc"):
            (home / config).touch()
        env = tool_environment(home, _npm_config(home, self.download_cache, self.registry))
        # npm starts with `#!/usr/bin/env node`: the node it finds must be the one probed.
        env["PATH"] = f"{Path(self.node).parent}{os.pathsep}{env['PATH']}"
        flags = ["--ignore-scripts", "--no-audit", "--no-fund", "--registry", self.registry]
        run = self.runner([self.npm, *args, *flags], cwd, env, self.timeout)
        if run.exit_code != 0:
            raise failure(what, run, _KNOWN_FAILURES, {"home": home, "project": cwd})

    def _check_pin(self, inputs_dir: Path) -> None:
        try:
            declared = json.loads((inputs_dir / self.declarations).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise InstallError("the project's package.json is missing or not valid JSON") from None
        pin = declared.get("packageManager") if isinstance(declared, dict) else None
        if not isinstance(pin, str):
            return
        tool, _, version = pin.partition("@")
        shown = pin if _SHOWN_PIN.fullmatch(pin) else "another package manager"
        if tool != "npm":
            raise InstallError(
                f"the repository pins {shown} (packageManager); cairn's installer for "
                "package.json projects is npm, so pin npm or prepare this project another way"
            )
        current = npm_version(self.npm, self.node)
        if version.split("+", 1)[0] != current:
            raise InstallError(
                f"the repository pins {shown} (packageManager), but cairn's npm is {current}; "
                "install the pinned npm, or change the pin"
            )

    def _declared_problem(self, declarations: Path) -> str | None:
        return declared_problem(declarations)

    def _locked_problem(self, lockfile: Path) -> str | None:
        return source_problem(lockfile, self.registry)


def declared_problem(package_json: Path) -> str | None:
    """Why package.json asks for a package from a path, URL or git, or None."""
    try:
        declared = json.loads(package_json.read_text(encoding="utf-8"))
        specs = [str(v) for f in _DEPENDENCY_FIELDS for v in declared.get(f, {}).values()]
    except (OSError, ValueError, AttributeError):
        return "the project's package.json is missing or not valid JSON; fix it and try again"
    if any(_NOT_REGISTRY.match(spec.removeprefix("npm:")) for spec in specs):
        return (
            "package.json takes a package from a path, URL or git source; cairn installs "
            "packages from the approved registry only"
        )
    return None


def source_problem(lockfile: Path, registry: str) -> str | None:
    """Why a package-lock.json takes a package from anywhere but the approved registry, or None."""
    try:
        lock = json.loads(lockfile.read_text(encoding="utf-8"))
        packages: dict[str, Any] = lock["packages"]
    except (OSError, ValueError, KeyError, TypeError):
        return (
            "the project's package-lock.json is missing, unreadable or older than lockfile "
            "version 2; run `npm install` with npm 7 or newer and commit it"
        )
    approved = without_credentials(registry)
    for key, entry in packages.items():
        if not key or entry.get("inBundle"):
            continue  # the project itself; files shipped inside an approved package
        name = key.rsplit("node_modules/", 1)[-1]
        shown = name if _SHOWN_NAME.fullmatch(name) else "a package"
        resolved = without_credentials(str(entry.get("resolved", "")))
        if entry.get("link") or not resolved.startswith(approved):
            return (
                f"package-lock.json takes {shown} from outside the approved registry (a link, "
                "path, URL or git source); cairn installs from the approved registry only"
            )
        if not entry.get("integrity"):
            return f"package-lock.json gives no integrity hash for {shown}; run `npm install`"
    return None


def _npm_config(home: Path, cache: Path | None, registry: str) -> dict[str, str]:
    # Two empty files: npm refuses to load one file as both user and global configuration.
    return {
        "npm_config_userconfig": str(home / "user-npmrc"),
        "npm_config_globalconfig": str(home / "global-npmrc"),
        "npm_config_cache": str(cache or home / "npm-cache"),
        "npm_config_registry": registry,
        "npm_config_ignore_scripts": "true",
        "npm_config_update_notifier": "false",
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "npm_config_progress": "false",
    }


def _which(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise InstallError(
            f"{tool} is not installed; install Node.js and npm to prepare npm projects"
        )
    return found


@functools.lru_cache(maxsize=16)
def npm_version(npm: str, node: str) -> str:
    """`npm --version` of this npm run by this node."""
    path = f"{Path(node).parent}{os.pathsep}/usr/bin:/bin"
    return _probe([npm, "--version"], {"PATH": path, "npm_config_update_notifier": "false"})


@functools.lru_cache(maxsize=16)
def node_version(node: str) -> str:
    """`node --version`, e.g. `v20.20.2`."""
    return _probe([node, "--version"], {})


def _probe(argv: list[str], env: dict[str, str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True, env=env)
    except (OSError, subprocess.SubprocessError):
        raise InstallError(
            "npm or node could not be run; check that Node.js is installed"
        ) from None
    return done.stdout.strip()
