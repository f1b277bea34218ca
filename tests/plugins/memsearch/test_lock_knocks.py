"""Knocks at a Milvus Lite database: other processes' opens of its lock file, seen by inotify."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pimem_plugins.memsearch.lock_knocks import LOCK_FILE, LockKnocks, watch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


def open_in_another_process(path: Path) -> None:
    subprocess.run(
        [sys.executable, "-c", f"open({str(path)!r}, 'a').close()"], check=True, timeout=30
    )


@pytest.fixture
def knocks(tmp_path: Path) -> LockKnocks:
    database = tmp_path / "milvus.db"
    database.mkdir()
    found = watch(database)
    assert found is not None
    return found


def test_another_process_opening_the_lock_file_knocks_once(
    knocks: LockKnocks, tmp_path: Path
) -> None:
    assert not knocks.knocked()
    open_in_another_process(tmp_path / "milvus.db" / LOCK_FILE)
    assert knocks.knocked()
    assert not knocks.knocked()  # seen once


def test_the_holders_own_open_is_forgotten(knocks: LockKnocks, tmp_path: Path) -> None:
    os.close(os.open(tmp_path / "milvus.db" / LOCK_FILE, os.O_CREAT | os.O_RDWR))
    knocks.forget()
    assert not knocks.knocked()


def test_other_files_of_the_database_are_no_knock(knocks: LockKnocks, tmp_path: Path) -> None:
    open_in_another_process(tmp_path / "milvus.db" / "manifest.json")
    assert not knocks.knocked()


def test_a_database_that_does_not_exist_cannot_be_watched(tmp_path: Path) -> None:
    assert watch(tmp_path / "missing.db") is None


def test_a_watch_no_longer_used_gives_its_descriptor_back(tmp_path: Path) -> None:
    def inotify(descriptor: int) -> bool:
        try:
            return "inotify" in os.readlink(f"/proc/self/fd/{descriptor}")
        except FileNotFoundError:
            return False

    database = tmp_path / "milvus.db"
    database.mkdir()
    knocks = watch(database)
    assert knocks is not None
    descriptor = knocks._descriptor
    assert inotify(descriptor)
    del knocks
    gc.collect()
    assert not inotify(descriptor)
