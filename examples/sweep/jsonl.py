"""Durable JSONL: checked lines, fsynced on write; torn or corrupted lines read as absent.

Each line is canonical JSON carrying `check`, a digest of the rest of the line. A process
killed mid-write leaves a torn last line; a bad disk or a careless edit leaves a line whose
check fails. Both are skipped on reading, so whatever they recorded is simply not known (the
engine then runs that work again), and the next append starts on a fresh line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.engine import canonical_json, digest

CHECK = "check"


def _check(record: Mapping[str, Any]) -> str:
    return digest(dict(record))[:16]


def append(path: Path, record: Mapping[str, Any]) -> None:
    """Append one checked line and fsync it, closing off a torn last line first."""
    line = canonical_json({**record, CHECK: _check(record)}).encode() + b"\n"
    created = not path.exists()
    with path.open("a+b") as file:
        file.seek(0, os.SEEK_END)
        if file.tell() > 0:
            file.seek(-1, os.SEEK_END)
            if file.read(1) != b"\n":
                file.write(b"\n")  # a torn line from a killed process stays unreadable
        file.write(line)
        file.flush()
        os.fsync(file.fileno())
    if created:
        _fsync_directory(path.parent)


def read(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The readable records in order, and how many lines were unreadable."""
    if not path.exists():
        return [], 0
    records: list[dict[str, Any]] = []
    unreadable = 0
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        record = _parse(line)
        if record is None:
            unreadable += 1
        else:
            records.append(record)
    return records, unreadable


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    check = data.pop(CHECK, None)
    try:
        return data if check == _check(data) else None
    except TypeError:  # a float or another value canonical JSON refuses: not ours
        return None


def write_atomically(path: Path, data: Any) -> None:
    """Replace `path` with canonical JSON of `data`: readers see the old file or the new one."""
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as file:
        file.write(canonical_json(data).encode() + b"\n")
        file.flush()
        os.fsync(file.fileno())
    partial.replace(path)
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
