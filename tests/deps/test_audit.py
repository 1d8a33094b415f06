"""The OSV auditor: which versions an advisory affects, how severe it is, what blocks."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cairn.deps import OsvDirectory, OsvService, Package, bundled_advisories
from cairn.deps import audit as audit_module
from cairn.deps.audit import (
    cvss3_score,
    matching,
    pep440_key,
    quarantine_reason,
    severity,
    version_key,
)
from cairn.deps.uv import satisfies


def advisory(ranges: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    affected = {"package": {"ecosystem": "PyPI", "name": "Demo_Pkg"}, "ranges": ranges or []}
    affected |= fields.pop("affected_extra", {})
    return {"id": "OSV-TEST-1", "affected": [affected], **fields}


def affects(version: str, ecosystem: str = "pypi", **kwargs: Any) -> bool:
    return bool(matching(ecosystem, Package("demo-pkg", version), [advisory(**kwargs)]))


def test_the_bundled_advisories_block_the_vulnerable_versions_only() -> None:
    osv = OsvDirectory(bundled_advisories())
    [certifi] = osv.audit("pypi", [Package("certifi", "2023.5.7")])
    assert (certifi.advisory, certifi.severity, certifi.blocking) == (
        "GHSA-xqr8-7jwr-rhp7",
        "HIGH",
        True,
    )
    assert osv.audit("pypi", [Package("certifi", "2023.7.22")]) == []
    [minimist] = osv.audit("npm", [Package("minimist", "1.2.5")])
    assert (minimist.advisory, minimist.severity) == ("GHSA-xvch-5gv4-984h", "CRITICAL")
    assert osv.audit("npm", [Package("minimist", "0.2.3")])  # the second affected range
    assert osv.audit("npm", [Package("minimist", "1.2.6"), Package("minimist", "0.2.4")]) == []
    assert osv.audit("pypi", [Package("minimist", "1.2.5")]) == []  # another ecosystem


def test_an_advisory_folder_is_parsed_once_and_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "advisories"
    folder.mkdir()
    ranges = [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}]}]
    first = advisory(ranges, database_specific={"severity": "LOW"})
    (folder / "one.json").write_text(json.dumps(first))
    parsed = []
    real_loads = audit_module.json.loads
    monkeypatch.setattr(audit_module.json, "loads", lambda t: parsed.append(1) or real_loads(t))
    demo = [Package("demo-pkg", "1.0")]

    [low] = OsvDirectory(folder).audit("pypi", demo)
    assert OsvDirectory(folder).audit("pypi", demo) == [low]  # a new auditor, the same parse
    assert low.severity == "LOW" and len(parsed) == 1
    rewritten = advisory(ranges, database_specific={"severity": "HIGH"})
    (folder / "one.json").write_text(json.dumps(rewritten) + " " * 8)  # rewritten in place
    [high] = OsvDirectory(folder).audit("pypi", demo)
    assert high.severity == "HIGH" and len(parsed) == 2
    (folder / "two.json").write_text(json.dumps(advisory(ranges, id="OSV-TEST-2")))
    assert {f.advisory for f in OsvDirectory(folder).audit("pypi", demo)} == {
        "OSV-TEST-1",
        "OSV-TEST-2",
    }
    (folder / "one.json").unlink()
    assert [f.advisory for f in OsvDirectory(folder).audit("pypi", demo)] == ["OSV-TEST-2"]


def test_range_events_fixed_last_affected_and_explicit_versions() -> None:
    fixed = [{"type": "ECOSYSTEM", "events": [{"introduced": "1.0"}, {"fixed": "1.4.2"}]}]
    assert not affects("0.9", ranges=fixed)
    assert affects("1.0", ranges=fixed) and affects("1.4.2rc1", ranges=fixed)
    assert not affects("1.4.2", ranges=fixed) and not affects("2.0", ranges=fixed)
    last = [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"last_affected": "2.1"}]}]
    assert affects("2.1", ranges=last) and not affects("2.1.post1", ranges=last)
    assert affects("7.7", affected_extra={"versions": ["7.7"]})
    events = [{"introduced": "1.0"}, {"fixed": "1.1"}, {"introduced": "2.0"}, {"fixed": "2.2"}]
    reopened = [{"type": "ECOSYSTEM", "events": events}]
    assert [affects(v, ranges=reopened) for v in ("1.0.5", "1.5", "2.1", "2.2")] == [
        True,
        False,
        True,
        False,
    ]
    git_only = [{"type": "GIT", "events": [{"introduced": "0"}]}]
    assert not affects("1.0", ranges=git_only)


def test_version_ordering_pep440_and_semver() -> None:
    ordered = ["1.0.dev1", "1.0a1", "1.0b2", "1.0rc1", "1.0", "1.0.post1", "1.1", "2!0.1"]
    keys = [pep440_key(v) for v in ordered]
    assert keys == sorted(keys) and pep440_key("1.0.0") == pep440_key("1.0")
    assert pep440_key("2015.04.28") < pep440_key("2023.5.7") < pep440_key("2023.07.22")
    semver = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-rc.1", "1.0.0"]
    assert [version_key("npm", v) for v in semver] == sorted(version_key("npm", v) for v in semver)
    assert version_key("npm", "not-a-version") is None


def test_a_local_version_sorts_after_its_public_version_as_pep440_says() -> None:
    # PEP 440: `1.0+local` is newer than `1.0` (a hand-written key once made them equal).
    assert pep440_key("1.0") < pep440_key("1.0+ubuntu1") < pep440_key("1.0.post1")
    assert pep440_key("1.0+local") != pep440_key("1.0")
    fixed = [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.0+patched"}]}]
    assert affects("1.0", ranges=fixed) and not affects("1.0+patched", ranges=fixed)
    last = [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"last_affected": "1.0"}]}]
    assert affects("1.0", ranges=last) and not affects("1.0+ubuntu1", ranges=last)


def test_npm_versions_order_as_semver_with_a_v_prefix_and_build_metadata() -> None:
    assert version_key("npm", "v1.2.3") == version_key("npm", "1.2.3+build.7")
    assert version_key("npm", "1.2") is None and version_key("npm", "") is None
    ranges = [{"type": "SEMVER", "events": [{"introduced": "1.0.0-rc.1"}, {"fixed": "1.2.0"}]}]
    npm = {"package": {"ecosystem": "npm", "name": "demo-pkg"}}
    found = [
        affects(v, "npm", ranges=ranges, affected_extra=npm)
        for v in ("1.0.0-beta", "1.0.0", "1.2.0")
    ]
    assert found == [
        False,
        True,
        False,
    ]


def test_severity_comes_from_the_database_else_from_cvss() -> None:
    assert severity({"database_specific": {"severity": "medium"}}) == "MODERATE"
    assert cvss3_score("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H") == 9.8
    assert cvss3_score("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:H/A:N") == 7.5
    assert cvss3_score("CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N") == 6.1
    assert cvss3_score("CVSS:3.0/AV:L/AC:L/PR:L/UI:N/S:U/C:N/I:N/A:N") == 0.0
    high = {
        "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:H/A:N"}]
    }
    assert severity(high) == "HIGH"
    assert severity({"severity": [{"type": "CVSS_V4", "score": "CVSS:4.0/AV:N"}]}) == "UNKNOWN"
    assert cvss3_score("CVSS:3.1/AV:N") is None and cvss3_score("not a vector") is None


def test_only_high_and_critical_findings_quarantine() -> None:
    ranges = [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}]}]
    moderate = advisory(ranges, database_specific={"severity": "MODERATE"})
    found = matching("pypi", Package("demo-pkg", "1.0"), [moderate])
    assert found and quarantine_reason("pypi", found) is None
    critical = advisory(ranges, id="GHSA-test-crit", database_specific={"severity": "CRITICAL"})
    found = matching("pypi", Package("demo-pkg", "1.0"), [critical])
    reason = quarantine_reason("pypi", found)
    assert reason is not None and "demo-pkg==1.0" in reason and "GHSA-test-crit" in reason


@pytest.mark.parametrize(
    ("spec", "version", "ok"),
    [
        (">=0.5", "0.13.9", True),
        ("==0.13.9", "0.13.9", True),
        ("==0.4.0", "0.13.9", False),
        ("==0.13.*", "0.13.9", True),
        ("~=0.13.0", "0.13.9", True),
        ("~=0.12.0", "0.13.9", False),
        (">=0.5,<0.13", "0.13.9", False),
        ("0.13.9", "0.13.9", True),
    ],
)
def test_uv_pins_are_pep440_specifiers(spec: str, version: str, ok: bool) -> None:
    assert satisfies(spec, version) is ok


@pytest.fixture
def osv_server() -> Iterator[str]:
    """An OSV-compatible service on loopback, answering from the bundled advisories."""
    advisories = {p.stem: json.loads(p.read_text()) for p in bundled_advisories().glob("*.json")}
    local = OsvDirectory(bundled_advisories())

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            results = []
            for query in body["queries"]:
                ecosystem = "pypi" if query["package"]["ecosystem"] == "PyPI" else "npm"
                package = Package(query["package"]["name"], query["version"])
                found = local.audit(ecosystem, [package])
                results.append({"vulns": [{"id": f.advisory} for f in found]})
            self._send({"results": results})

        def do_GET(self) -> None:
            self._send(advisories[self.path.rsplit("/", 1)[-1]])

        def _send(self, answer: dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_osv_compatible_service_is_asked_over_http(osv_server: str) -> None:
    service = OsvService(osv_server)
    packages = [Package("is-number", "7.0.0"), Package("minimist", "1.2.5")]
    [finding] = service.audit("npm", packages)
    assert (finding.package, finding.advisory, finding.severity) == (
        "minimist",
        "GHSA-xvch-5gv4-984h",
        "CRITICAL",
    )


def test_an_unreachable_service_refuses_rather_than_passing(tmp_path: Path) -> None:
    from cairn.deps import InstallError

    with pytest.raises(InstallError, match="could not be reached"):
        OsvService("http://127.0.0.1:9", timeout=2).audit("npm", [Package("a", "1.0.0")])
    with pytest.raises(InstallError, match="folder does not exist"):
        OsvDirectory(tmp_path / "missing").audit("npm", [Package("a", "1.0.0")])
