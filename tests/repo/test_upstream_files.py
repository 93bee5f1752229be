"""Every upstream fact file names where its facts came from."""

from __future__ import annotations

import datetime as dt

import pytest

from tests import upstream


@pytest.mark.parametrize("name", upstream.names())
def test_every_fact_file_names_its_source(name: str) -> None:
    source = upstream.load(name)["source"]
    assert isinstance(source, dict)
    if "url" in source:
        assert str(source["url"]).startswith("https://")
    else:
        assert "/" in str(source.get("repository", "")), "repository: owner/name"
        assert source.get("ref") or source.get("commit"), "ref or commit"
        assert source.get("path") or source.get("paths"), "path or paths"
    read = source.get("read")
    assert isinstance(read, dt.date), "read: the date the facts were read (YYYY-MM-DD)"
