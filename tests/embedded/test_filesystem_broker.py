"""The embedded broker under concurrent writers: real processes put messages while this
one reads them the way a worker does; every message read is whole (kombu's own
filesystem transport hands the reader files still being written, and the worker dies)."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from kombu import Connection

from config.celery import app

TRANSPORT = "config.filesystem_broker:Transport"
WRITERS, MESSAGES = 2, 300
PAD = "x" * 200_000  # a long write: a wide window for a reader to see half a file


def _options(root: Path) -> dict:
    return {
        "data_folder_in": str(root / "in"),
        "data_folder_out": str(root / "in"),
        "processed_folder": str(root / "processed"),
        "store_processed": False,
        "control_folder": str(root / "control"),
        "staging_folder": str(root / "staging"),
    }


def _write(root: Path, writer: int) -> None:
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(root)) as c:
        queue = c.SimpleQueue("doorbell")
        for index in range(MESSAGES):
            queue.put({"writer": writer, "index": index, "pad": PAD})


def test_the_celery_app_uses_the_whole_file_transport():
    with app.connection_for_write() as connection:
        assert type(connection.transport).__module__ == "config.filesystem_broker"


def test_a_reader_racing_writer_processes_only_ever_reads_whole_messages(tmp_path):
    for folder in ("in", "processed", "control", "staging"):
        (tmp_path / folder).mkdir()
    writers = [
        multiprocessing.get_context("spawn").Process(target=_write, args=(tmp_path, i))
        for i in range(WRITERS)
    ]
    for process in writers:
        process.start()
    seen: set[tuple[int, int]] = set()
    with Connection(
        "filesystem://", transport=TRANSPORT, transport_options=_options(tmp_path)
    ) as connection:
        queue = connection.SimpleQueue("doorbell")
        while len(seen) < WRITERS * MESSAGES:
            try:
                # A half-written file fails to decode here, as it kills a worker.
                message = queue.get(block=True, timeout=0.05)
            except queue.Empty:
                if any(process.is_alive() for process in writers):
                    continue
                if not os.listdir(tmp_path / "in"):
                    break
                continue
            seen.add((message.payload["writer"], message.payload["index"]))
            message.ack()
    for process in writers:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert len(seen) == WRITERS * MESSAGES
    assert not os.listdir(tmp_path / "staging")
