"""Fakes and fixtures shipped with cairn, for its own tests, the demo, and users' tests.

- `harness`: `Cairn` / `make_cairn`, a whole installation in a temporary folder.
- `repos`: sample git repositories and bare Python and npm projects.
- `installers`: `FakeInstaller`, an installer without network; `fake_project` for it.
- `auditor`: `FakeAuditor`, an auditor that reports the advisories it was given.
- `stores`: throwaway SQLite and PostgreSQL stores.
- `silent_server`: a server that accepts connections and never answers.
- `plugin`: the pytest plugin (entry point `cairn`) offering all of the above as fixtures;
  the only module here that imports pytest.
"""
