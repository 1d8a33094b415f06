"""Text from agents and people cannot drive the reviewer's terminal: control characters are
stripped when the text is written (with the secrets) and again wherever the CLI prints it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acceptance.conftest import Cli
from cairn.errors import UsageError
from cairn.jobs import gates
from cairn.sanitize import Sanitizer, strip_control
from cairn.store import Store

# Everything a terminal may obey rather than print: C0 but newline and tab, DEL, C1, and the
# bidi overrides and isolates.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SEQUENCES = [
    "\x1b[8m",  # conceal: what follows is invisible
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b[1A\x1b[2K",  # up one line, erase it
    "\x1b]0;owned\x07",  # OSC: window title, ended by BEL
    "\x1b]8;;https://evil.example\x1b\\",  # OSC 8 hyperlink, ended by ST
    "\x1bP+q\x1b\\",  # DCS
    "\x9b8m",  # C1 CSI
    "\x9d0;title\x9c",  # C1 OSC ended by C1 ST
    "\x1bc",  # full reset
    "\x1b(0",  # character set switch
    "\r",
    "\x08\x08\x08",
    "\u202e",  # right-to-left override
    "\u2066",
]


@settings(max_examples=500, deadline=None)
@given(text=st.lists(st.sampled_from(SEQUENCES) | st.text(max_size=8)).map("".join))
def test_stripped_text_holds_no_control_character(text: str) -> None:
    stripped = strip_control(text)
    assert not CONTROL.search(stripped)
    assert strip_control(stripped) == stripped


# The bidi overrides and isolates are format characters (Cf), not controls (Cc), but they
# reorder what a reader sees, so strip_control removes them too: not text to leave unchanged.
BIDI = "".join(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=["Cc", "Cs"], blacklist_characters=BIDI)))
def test_text_without_control_characters_is_unchanged(text: str) -> None:
    assert strip_control(text + "\n\tend") == text + "\n\tend"


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_a_sequence_goes_whole_leaving_no_visible_rest(sequence: str) -> None:
    assert strip_control(f"before{sequence}after") == "beforeafter"


def test_an_unended_string_control_costs_its_line_only() -> None:
    assert strip_control("one\x1b]0;no end\ntwo") == "one\ntwo"


def test_the_sanitizer_strips_before_it_masks() -> None:
    token = "ghp_" + "Q1w2E3r4" * 5
    split = f"{token[:10]}\x1b[0m{token[10:]}"
    cleaned = Sanitizer(environ={}).clean(f"key {split}\x1b[8m hidden\r\n")
    assert cleaned == "key [secret] hidden"


# A summary that conceals cairn's own diffstat (written after it) and prints a fake one.
HIDING = r"""
steps:
  - write: {path: real-change.txt, content: "real\n"}
  - finish:
      summary: "Docs only.\n docs/readme.md | 1 +\x9b8m\e]0;title\a\e]8;;https://x.example\e\\\e[8m"
"""
REQUEST = "Tidy the docs\x1b[2J\x1b[H\u202e\x9d0;t\x9c please"


def _visible(text: str) -> None:
    assert not CONTROL.search(text), repr(text)
    assert "\\u001b" not in text and "\\u009" not in text, repr(text)


@pytest.mark.acceptance
def test_show_and_jobs_print_no_control_character_and_the_real_diffstat(cli: Cli) -> None:
    cli.room()
    job = cli.submit(HIDING, REQUEST)
    cli.work()
    cli("reject", str(job), "--reason", "no\x1b[8m hidden \x1b]0;t\x07reason")
    printed = [
        cli("show", str(job)).stdout,
        cli("jobs").stdout,
        cli("show", str(job), "--json").stdout,
        cli("jobs", "--json").stdout,
        cli("audit", "log", "--json").stdout,
        cli("audit", "log").stdout,
    ]
    for text in printed:
        _visible(text)
    shown = printed[0]
    assert "real-change.txt" in shown and "Docs only." in shown
    assert "Tidy the docs please" in printed[1] and "no hidden reason" in shown
    detail = json.loads(printed[2])
    assert detail["request"] == "Tidy the docs please"
    assert "real-change.txt" in detail["review"]["summary"]

    # What the store holds was stripped when it was written, not only when it was printed.
    with closing(sqlite3.connect(cli.home / "cairn.db")) as db:
        stored = [
            *db.execute("SELECT text FROM requests").fetchall(),
            *db.execute("SELECT summary, diagnosis FROM jobs").fetchall(),
            *db.execute("SELECT reason FROM decisions").fetchall(),
        ]
    for row in stored:
        for value in row:
            assert value is None or not CONTROL.search(value), repr(value)


def test_a_rejection_reason_of_control_characters_only_is_refused(store_url: str) -> None:
    store = Store.open(store_url, create=True)
    try:
        with store.begin() as conn, pytest.raises(UsageError, match="needs a reason"):
            # Refused before the job is even looked up: an escape sequence says nothing.
            gates.reject(conn, 1, "admin", "\x1b[31m\x9b0m ")
    finally:
        store.close()
