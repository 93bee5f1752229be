"""Stand-in for the `transformers` package of an image's Python (the harness's python wrappers put
it on PYTHONPATH): AutoTokenizer.from_pretrained as transformers 4.44.0 reads a Hub id (its
tokenizer config, config.json when that names no tokenizer class, then its vocabulary files,
through the stand-ins' Hub client: offline, the cache only) or a directory, and save_pretrained
writing what it read into a folder."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the stand-ins' _hub, _common

import _hub
from _common import job

VOCABULARY = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model", "vocab.txt", "special_tokens_map.json")


class _Tokenizer:
    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def save_pretrained(self, folder: str) -> tuple[str, ...]:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for name, path in self.files.items():
            shutil.copyfile(path, Path(folder) / name)
        return tuple(str(Path(folder) / n) for n in self.files)


class AutoTokenizer:
    @staticmethod
    def from_pretrained(name: str, revision: str = "main", **_: object) -> _Tokenizer:
        if Path(name).is_dir():
            files = {f: Path(name) / f for f in ("tokenizer_config.json", *VOCABULARY) if (Path(name) / f).is_file()}
        else:
            auto = job()["autoTokenizer"]
            found = {f: _hub.cached_file(name, f, required=False, revision=revision) for f in auto["optional"]}
            if not any(p and "tokenizer_class" in p.read_text() for p in found.values()):
                for f in auto["required_without_tokenizer_class"]:
                    found[f] = _hub.cached_file(name, f, revision=revision)
            found.update({f: _hub.cached_file(name, f, required=False, revision=revision) for f in VOCABULARY})
            files = {f: p for f, p in found.items() if p is not None and f != "config.json"}
        if not any(f in files for f in ("tokenizer.json", "vocab.json", "tokenizer.model", "vocab.txt")):
            raise OSError(f"Can't load tokenizer for '{name}': no vocabulary files")
        return _Tokenizer(files)
