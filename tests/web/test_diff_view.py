"""The diff as the job page shows it, and line comments gathered into one review."""

from __future__ import annotations

from cairn.web.diffs import split_files
from cairn.web.review import review_message

DIFF = """diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,3 +1,3 @@
 import os
-x = "<b>"
+x = '<i>'
 print(x)
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
"""


def test_lines_are_numbered_on_both_sides_escaped_and_highlighted() -> None:
    app, gone = split_files(DIFF)
    assert (app.path, gone.path) == ("app.py", "gone.txt")
    kinds = [(line.kind, line.old, line.new) for line in app.lines]
    assert kinds == [
        ("hunk", None, None),
        ("context", 1, 1),
        ("del", 2, None),
        ("add", None, 2),
        ("context", 3, 3),
    ]
    removed, added = app.lines[2].html, app.lines[3].html
    assert "<b>" not in removed and "&lt;b&gt;" in removed
    assert '<span class="s1">' in added, "a Python string, highlighted"
    assert '<span class="kn">import</span>' in app.lines[1].html
    assert [(line.kind, line.old) for line in gone.lines] == [("hunk", None), ("del", 1)]


def test_line_comments_become_one_review_in_order_with_the_message_last() -> None:
    message = review_message(
        {
            "csrf": "x",
            "comment:app.py:b2": " use double quotes ",
            "comment:app.py:a2": "why remove this?",
            "comment:app.py:b3": "   ",
            "comment:bad\nname:b1": "ignored",
            "message": "otherwise fine",
        }
    )
    assert message == (
        "Comments on the diff:\n- app.py line 2: use double quotes\n"
        "- app.py removed line 2: why remove this?\n\notherwise fine"
    )
    assert review_message({"message": "  "}) == ""
