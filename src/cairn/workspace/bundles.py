"""Git bundles of a job's commits, written with one git process.

`git bundle create` takes its commits from refs, so bundling a commit no ref names costs a ref
made and deleted around it, and the bundle command itself only starts `pack-objects`. Here
the header (gitformat-bundle(5)) is written directly and `pack-objects` adds the pack, exactly
the pack `git bundle create` asks it for: thin, with offset deltas, against the prerequisite.
`git bundle unbundle` (and fetch, and clone) read the result like any other bundle.
"""

from __future__ import annotations

import tempfile

from cairn.workspace.mirror import Mirror

_SHA1_HEX = 40


def bundle(mirror: Mirror, tip: str, baseline: str, ref: str, *, failure: str) -> bytes:
    """A bundle of the commit `tip` (named `ref` in it) with everything it holds that the
    commit `baseline` (its prerequisite) does not.

    The reader must hold `baseline`; every object it reaches may be left out or used as a
    delta base. `tip` and `baseline` are full object ids.
    """
    if len(tip) == _SHA1_HEX:
        signature = b"# v2 git bundle\n"
    else:  # v2 knows SHA-1 only
        signature = b"# v3 git bundle\n@object-format=sha256\n"
    header = signature + f"-{baseline} baseline\n{tip} {ref}\n\n".encode()
    with tempfile.TemporaryFile(prefix="cairn-bundle-") as out:
        out.write(header)
        out.flush()  # git writes the pack after it, at the file's offset
        mirror.git(
            "pack-objects", "--stdout", "--thin", "--delta-base-offset", "--quiet",
            input=f"{tip}\n^{baseline}\n", stdout=out, failure=failure,
        )  # fmt: skip
        out.seek(0)
        return out.read()
