"""INVARIANT: every file the toolkit reads goes through one reader (txl.files) that checks the
kind of the open file, then its size against the limit of its kind, then parses — a FIFO, a
device or a directory is refused for what it is without blocking or reading, a file above its
limit is refused before a byte is read, and every refusal is one line naming the file."""

import os
import threading

import pytest

from txl import files


def refused(call, *fragments):
    with pytest.raises(files.FileRefused) as e:
        call()
    msg = str(e.value)
    assert "\n" not in msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_a_fifo_is_refused_at_once_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "c.json"
    os.mkfifo(fifo)
    done = threading.Event()

    def read():
        refused(lambda: files.read_json(fifo, what="--config"), "--config", "is a FIFO")
        done.set()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    assert done.is_set(), "the read blocked on the FIFO"


@pytest.mark.parametrize("reader", [files.read_bytes, files.read_text, files.read_json])
def test_a_device_and_a_directory_are_named_for_what_they_are(tmp_path, reader):
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    refused(lambda: reader(link, "json"), "a character device", "give a regular file")
    refused(lambda: reader(tmp_path, "json"), "a directory")


def test_a_file_above_its_limit_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "run.json"
    with open(big, "wb") as f:
        f.truncate(3 * files.LIMITS["json"])  # sparse: reading it would allocate 192 MiB
    refused(lambda: files.read_json(big), f"{3 * files.LIMITS['json']:,} bytes", "above the limit")
    refused(lambda: files.check_file(big, "json"), "above the limit")


def test_the_read_stops_one_byte_past_the_limit_whatever_the_size_says(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"x" * 11)
    assert files.read_bytes(f, "json", limit=11) == b"x" * 11
    refused(lambda: files.read_bytes(f, "json", limit=10), "above the limit of 10")


def test_missing_loop_and_unparsable_files_are_one_line_each(tmp_path):
    refused(lambda: files.read_json(tmp_path / "nope.json"), "does not exist")
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    refused(lambda: files.read_json(loop), "symlink loop")
    nan = tmp_path / "nan.json"
    nan.write_text('{"min_effect": NaN}')
    refused(lambda: files.read_json(nan), "non-finite number NaN")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{}")
    refused(lambda: files.read_json(bad), "not valid JSON", "not UTF-8")


def test_a_haystack_fifo_is_refused_as_a_fifo_not_as_missing(tmp_path):
    from probes.api.probe_base import ProbeInputError
    from probes.texts.choose import load_world

    fifo = tmp_path / "hay.txt"
    os.mkfifo(fifo)
    with pytest.raises(ProbeInputError, match="is a FIFO") as e:
        load_world(None, [str(fifo)], None)
    assert "does not exist" not in str(e.value)
