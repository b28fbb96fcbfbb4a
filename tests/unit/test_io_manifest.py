"""cfsim.io.manifest: a lab run's manifest, gzip-compressed (manifest.json.gz) or plain (manifest.json)."""
from __future__ import annotations

import gzip
import json
import re

import pytest

from cfsim.io import CfsimParseError
from cfsim.io.manifest import (has_manifest, manifest_folders, manifest_path, read_manifest, read_json_file,
                               write_manifest)

MANIFEST = {"run_id": "p000", "times": {"start_unix_s": 1.5}, "window_samples": {"workload": {"end": {"x": 3}}},
            "status": "ok"}


def test_round_trip_through_the_compressed_file(tmp_path):
    path = write_manifest(tmp_path, MANIFEST)
    assert path == tmp_path / "manifest.json.gz" and manifest_path(tmp_path) == path
    assert read_manifest(tmp_path) == MANIFEST
    # the text inside is what the lab always wrote: one-space indent, sorted keys, a final newline
    assert gzip.decompress(path.read_bytes()).decode() == json.dumps(MANIFEST, indent=1, sort_keys=True) + "\n"


def test_anything_json_cannot_encode_is_written_as_its_str(tmp_path):
    write_manifest(tmp_path, {"path": tmp_path})
    assert read_manifest(tmp_path) == {"path": str(tmp_path)}


def test_two_writes_give_the_same_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    data = write_manifest(a, MANIFEST).read_bytes()
    assert write_manifest(b, dict(reversed(list(MANIFEST.items())))).read_bytes() == data
    # no time stamp and no file name in the gzip header (RFC 1952: MTIME bytes 4-7, FLG bit 3 FNAME)
    assert data[4:8] == b"\0\0\0\0" and not data[3] & 0x08


def test_the_compressed_file_is_preferred_and_a_stale_plain_one_removed(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"run_id": "old"}))
    assert read_manifest(tmp_path) == {"run_id": "old"}
    write_manifest(tmp_path, MANIFEST)
    assert not (tmp_path / "manifest.json").exists()
    # both present (a copy made by hand): the compressed one is read
    (tmp_path / "manifest.json").write_text(json.dumps({"run_id": "old"}))
    assert manifest_path(tmp_path) == tmp_path / "manifest.json.gz" and read_manifest(tmp_path) == MANIFEST


def test_a_plain_manifest_is_read_as_before(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    assert manifest_path(tmp_path) == tmp_path / "manifest.json" and has_manifest(tmp_path)
    assert read_manifest(tmp_path) == MANIFEST


def test_a_folder_without_a_manifest_is_named(tmp_path):
    assert manifest_path(tmp_path) is None and not has_manifest(tmp_path)
    message = f"{tmp_path}: not a lab run folder (no manifest.json.gz or manifest.json)"
    with pytest.raises(FileNotFoundError, match=re.escape(message)):
        read_manifest(tmp_path)


@pytest.mark.parametrize("name, data, what", [
    ("manifest.json.gz", gzip.compress(b'{"run_id": '), "not valid JSON"),
    ("manifest.json.gz", gzip.compress(b'{"run_id": "p000"}')[:-12], "not a valid gzip file"),  # truncated
    ("manifest.json.gz", b'{"run_id": "p000"}', "not a valid gzip file"),                      # plain text
    ("manifest.json", b'{"run_id": ', "not valid JSON"),
])
def test_a_corrupt_manifest_names_its_file(tmp_path, name, data, what):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(CfsimParseError, match=re.escape(str(tmp_path / name)) + f".*: {what}"):
        read_manifest(tmp_path)
    with pytest.raises(ValueError):  # what callers that skip unreadable manifests catch
        read_json_file(tmp_path / name)


def test_manifest_folders_finds_either_form_once(tmp_path):
    grid = tmp_path / "grid"
    for name, form in (("a", "gz"), ("b", "json"), ("c", "both")):
        (grid / name).mkdir(parents=True)
        if form in ("gz", "both"):
            write_manifest(grid / name, MANIFEST)
        if form in ("json", "both"):
            (grid / name / "manifest.json").write_text("{}")
    (grid / "d").mkdir()  # no manifest: not a run folder
    (tmp_path / "manifest.json").write_text("{}")  # an index at the root is found too
    assert manifest_folders(tmp_path) == [tmp_path, grid / "a", grid / "b", grid / "c"]
    assert manifest_folders(tmp_path / "nowhere") == []
