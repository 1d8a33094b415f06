"""cairn.no_follow: one file of a folder, never through a symlink, never hanging on a FIFO."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cairn.no_follow import read_no_follow


class Refused(Exception):
    pass


def regular(info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise Refused("not a regular file")


def read(folder: Path, name: str, limit: int = -1) -> bytes | None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return read_no_follow(name, dir_fd=fd, symlink_error=Refused, check=regular, limit=limit)
    finally:
        os.close(fd)


def test_a_file_is_read_bounded_and_a_missing_one_is_none(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"0123456789")
    assert read(tmp_path, "a.txt") == b"0123456789"
    assert read(tmp_path, "a.txt", limit=4) == b"0123"
    assert read(tmp_path, "missing") is None
    assert read_no_follow(tmp_path / "a.txt", symlink_error=Refused, check=regular) == b"0123456789"


def test_a_symlink_or_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"secret")
    (tmp_path / "link").symlink_to(tmp_path / "a.txt")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(Refused):
        read(tmp_path, "link")
    with pytest.raises(Refused, match="not a regular file"):
        read(tmp_path, "fifo")  # opened non-blocking: no writer needed to get here
