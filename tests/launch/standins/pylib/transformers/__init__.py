"""Stand-in for the `transformers` package of an image's Python (the harness's python wrappers put
it on PYTHONPATH): AutoTokenizer.from_pretrained as transformers 4.44.0 reads a Hub id (its
tokenizer config, config.json when that names no tokenizer class, then its vocabulary files,
through the stand-ins' Hub client: offline, the cache only) or a directory, and save_pretrained
writing what it read into a folder."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the stand-ins' _hub, _common

import _hub
from _common import job

VOCABULARY = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model", "vocab.txt", "special_tokens_map.json")


DEFAULT_SPECIAL = {"gpt2": ("<|endoftext|>", "<|endoftext|>"), "llama": ("<s>", "</s>")}
"""The bos and eos tokens a tokenizer class sets when its config names none (GPT2Tokenizer and
LlamaTokenizer __init__ defaults, transformers 4.44.0)."""


class _Tokenizer:
    def __init__(self, files: dict[str, Path], kind: str = "") -> None:
        self.files = files
        config = json.loads(files["tokenizer_config.json"].read_text()) if "tokenizer_config.json" in files else {}
        default = DEFAULT_SPECIAL.get(kind, (None, None))
        self.bos_token, self.eos_token = (
            _content(config.get("bos_token")) or default[0],
            (_content(config.get("eos_token")) or default[1]),
        )
        self.config = config

    def _ids(self) -> dict[str, int]:
        ids: dict[str, int] = {}
        for name in ("vocab.json", "tokenizer.json"):
            doc = json.loads(self.files[name].read_text()) if name in self.files else {}
            vocab = doc.get("model", {}).get("vocab") if name == "tokenizer.json" else doc
            ids.update(vocab if isinstance(vocab, dict) else {})
        return ids

    @property
    def bos_token_id(self) -> int | None:
        return self._ids().get(self.bos_token or "")

    @property
    def eos_token_id(self) -> int | None:
        return self._ids().get(self.eos_token or "")

    def save_pretrained(self, folder: str) -> tuple[str, ...]:
        """The files read, and a tokenizer_config.json naming the special tokens and their ids, as
        transformers writes it (added_tokens_decoder)."""
        Path(folder).mkdir(parents=True, exist_ok=True)
        for name, path in self.files.items():
            shutil.copyfile(path, Path(folder) / name)
        config = {**self.config, "bos_token": self.bos_token, "eos_token": self.eos_token}
        ids = self._ids()
        config["added_tokens_decoder"] = {
            str(ids[t]): {"content": t, "special": True} for t in (self.bos_token, self.eos_token) if t in ids
        }
        (Path(folder) / "tokenizer_config.json").write_text(json.dumps(config))
        return tuple(str(Path(folder) / n) for n in {*self.files, "tokenizer_config.json"})


class LlamaTokenizer(_Tokenizer):
    """A sentencepiece model as Llama's tokenizer: `<unk>`, `<s>`, `</s>` at ids 0, 1, 2."""

    def __init__(self, vocab_file: str, **_: object) -> None:
        super().__init__({"tokenizer.model": Path(vocab_file)}, "llama")

    def _ids(self) -> dict[str, int]:
        return {"<unk>": 0, "<s>": 1, "</s>": 2}


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
        return _Tokenizer(files, _model_type(name, revision))


def _model_type(name: str, revision: str) -> str:
    """The model type of config.json (a directory's or the Hub's): which class defaults apply."""
    path = (
        Path(name) / "config.json"
        if Path(name).is_dir()
        else _hub.cached_file(name, "config.json", required=False, revision=revision)
    )
    return str(json.loads(path.read_text()).get("model_type", "")) if path and path.is_file() else ""


def _content(token: object) -> str | None:
    """A special token as a tokenizer config gives it: a string, or an AddedToken's dict."""
    return str(token["content"]) if isinstance(token, dict) else (str(token) if token else None)
