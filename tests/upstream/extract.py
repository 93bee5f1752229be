"""Extract facts from an upstream file into the shape tests/upstream/*.yaml keeps.

Used to write and refresh the fact files; the tests never run it on upstream text (they only
read the recorded facts). Example, from a bare mirror made by the `fetch` tool:

    git -C <mirror> show <commit>:<path to conf>.yaml | python -m tests.upstream.extract hydra
    git -C <mirror> show <commit>:nemo/utils/exp_manager.py | python -m tests.upstream.extract fields ExpManagerConfig
    git -C <mirror> show <commit>:<script>.py | python -m tests.upstream.extract argparse
    git -C <mirror> show <commit>:./CHANGELOG.md | python -m tests.upstream.extract eks-ami 1.34 1.35 1.36

`hydra`: every leaf key of a Hydra config as a dotted path, which of them are mandatory
(`???`) and which are null. A leaf is a scalar, a list or an empty mapping. `fields`: the field names of a
dataclass (a structured-config schema such as NeMo's ExpManagerConfig). `argparse`: the
long options a script's argparse parser accepts. `cli-fields`: the fields of a dataclass tyro makes
command-line options of (not `tyro.conf.Suppress`), e.g. `cli-fields Trainer.Config`. `assignments FUNCTION`:
what a Megatron Bridge recipe function sets (`cfg.<path> = <literal>`), the base it starts from
(`_pretrain_common()`), and the Hugging Face repository it builds the model from
(`AutoBridge.from_hf_pretrained(...)`). `eks-ami`: from awslabs/amazon-eks-ami's
awslabs/amazon-eks-ami/CHANGELOG.md, per AMI release and Kubernetes minor, the release version a node group names
(`releaseVersion`) and the Neuron and NVIDIA kernel drivers of the AL2023 x86_64 accelerated AMIs.
`chart DIR`: a Helm chart's value keys, free-form maps and template reads, from the chart's folder
at the pinned tag (`git archive <tag> charts/<chart> | tar -x -C /tmp/chart`; no stdin).
"""

from __future__ import annotations

import ast
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import yaml

MANDATORY = "???"


def hydra_keys(text: str) -> dict[str, list[str]]:
    """`{"keys": [...], "mandatory": [...], "null": [...]}` of a Hydra YAML config.

    Values are not kept, only whether a leaf is `???` or null: Hydra lets `+key=value` add
    to a null leaf but refuses it on a leaf that has a value.
    """
    doc = yaml.safe_load(text)
    keys: list[str] = []
    mandatory: list[str] = []
    null: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
            return
        keys.append(prefix)
        if node == MANDATORY:
            mandatory.append(prefix)
        elif node is None:
            null.append(prefix)

    walk(doc, "")
    return {"keys": sorted(keys), "mandatory": sorted(mandatory), "null": sorted(null)}


def _class(tree: ast.Module, path: str) -> ast.ClassDef:
    """The class at a dotted path (`Trainer.Config`: the class Config defined in class Trainer)."""
    body: list[ast.stmt] = tree.body
    found: ast.ClassDef | None = None
    for name in path.split("."):
        found = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == name), None)
        if found is None:
            raise KeyError(path)
        body = found.body
    assert found is not None
    return found


def dataclass_fields(text: str, class_name: str) -> list[str]:
    """The annotated fields of one class in a Python module (`Outer.Inner` for a nested class;
    a plain name is looked for anywhere in the module)."""
    tree = ast.parse(text)
    if "." in class_name:
        node = _class(tree, class_name)
    else:
        node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name), None)
        if node is None:
            raise KeyError(class_name)
    return [
        stmt.target.id for stmt in node.body if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    ]


def cli_fields(text: str, class_name: str) -> list[str]:
    """The fields of a dataclass that tyro turns into command-line options: every annotated
    field but those annotated `tyro.conf.Suppress` (a config tree taken off the command line)."""
    tree = ast.parse(text)
    node = (
        _class(tree, class_name)
        if "." in class_name
        else next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    )
    return [
        stmt.target.id
        for stmt in node.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and "Suppress" not in ast.unparse(stmt.annotation)
    ]


def argparse_options(text: str) -> list[str]:
    """Every `--long-option` passed to an `add_argument` call."""
    tree = ast.parse(text)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    found.add(arg.value)
    return sorted(found)


def _literal(node: ast.AST, names: dict[str, Any]) -> tuple[bool, Any]:
    """(known, value) of a literal, a name bound to one, or `-x`."""
    if isinstance(node, ast.Constant):
        return True, node.value
    if isinstance(node, ast.Name) and node.id in names:
        return True, names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        known, value = _literal(node.operand, names)
        return known, -value if known else None
    return False, None


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def recipe_assignments(text: str, function: str) -> dict[str, Any]:
    """`{"base": ..., "hf_repo": ..., "sets": {path: value}}` of one recipe function: the
    statements at its top level, in order (a later assignment wins, as at run time)."""
    tree = ast.parse(text)
    names: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
            known, value = _literal(stmt.value, names) if stmt.value is not None else (False, None)
            if isinstance(target, ast.Name) and known:
                names[target.id] = value
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    out: dict[str, Any] = {"base": None, "hf_repo": None, "sets": {}}
    local = dict(names)
    for stmt in func.body:
        if isinstance(stmt, ast.Return):
            break  # statements after a return never run
        if not isinstance(stmt, ast.Assign):
            continue
        target = _dotted(stmt.targets[0])
        for call in (n for n in ast.walk(stmt.value) if isinstance(n, ast.Call)):
            callee = _dotted(call.func) or ""
            if callee.endswith("from_hf_pretrained") and call.args:
                out["hf_repo"] = _literal(call.args[0], local)[1]
            elif target == "cfg" and callee.startswith("_") and callee.endswith("_common"):
                out["base"] = callee
        known, value = _literal(stmt.value, local)
        if target and "." not in target and known:
            local[target] = value
        elif target and target.startswith("cfg.") and known:
            out["sets"][target.removeprefix("cfg.")] = value
    return out


class _Tables(HTMLParser):
    """The HTML tables of one changelog entry, each under the <summary> before it; a cell is
    (text, colspan)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[tuple[str, int]]]]] = []
        self.summary, self._in_summary, self._cell = "", False, None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "summary":
            self._in_summary, self.summary = True, ""
        elif tag == "table":
            self.tables.append((self.summary.strip(), []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th") and self.tables and self.tables[-1][1]:
            self._cell = ["", int(dict(attrs).get("colspan") or 1)]
            self.tables[-1][1][-1].append(self._cell)  # type: ignore[arg-type]

    def handle_endtag(self, tag: str) -> None:
        if tag == "summary":
            self._in_summary = False
        elif tag in ("td", "th"):
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._in_summary:
            self.summary += data
        if self._cell is not None:
            self._cell[0] += data


AMI_DRIVERS = {
    "aws-neuronx-dkms": ("AL2023_x86_64_NEURON", "neuron"),
    "kmod-nvidia-latest-dkms": ("AL2023_x86_64_NVIDIA", "nvidia"),
}


def eks_ami_releases(text: str, minors: list[str]) -> list[dict[str, str]]:
    """Per release (newest first) and Kubernetes minor: the release version and the AMIs' drivers."""
    out = []
    parts = re.split(r"^# AMI Release (v\d+)\s*$", text, flags=re.M)
    for tag, body in zip(parts[1::2], parts[2::2], strict=True):
        parser = _Tables()
        parser.feed(body)
        # A release can list several builds per minor (v20260318: -20260318 and -20260311), each an
        # "AMI Names" table followed by its "Package" table: one entry per build.
        found: dict[str, list[dict[str, str]]] = {}
        for summary, rows in parser.tables:
            m = re.fullmatch(r"Kubernetes (\d+\.\d+)", summary)
            if not m or m.group(1) not in minors or not rows:
                continue
            builds = found.setdefault(m.group(1), [])
            if rows[0][0][0].strip() == "AMI Names" or not builds:
                builds.append({"ami": tag, "kubernetes": m.group(1)})
            entry = builds[-1]
            if rows[0][0][0].strip() == "AMI Names":
                entry["releaseVersion"] = rows[1][1][0].strip()
                continue
            columns = [c[0].strip() for c in rows[0][1:]]
            for row in rows[1:]:
                cells = [text.strip() for text, span in row[1:] for _ in range(span)]
                if row[0][0].strip() in AMI_DRIVERS:
                    ami_type, key = AMI_DRIVERS[row[0][0].strip()]
                    entry[key] = dict(zip(columns, cells, strict=True))[ami_type]
        for i in range(max((len(b) for b in found.values()), default=0)):
            out += [found[k][i] for k in minors if k in found and i < len(found[k])]
    return out


_VALUES_READ = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def chart_keys(chart_dir: Path) -> dict[str, list[str]]:
    """A Helm chart's `value_keys` (every key path of values.yaml, parents included, not into
    lists), `open_maps` (keys whose default is an empty map: free-form, any child allowed) and
    `template_reads` (every `.Values.<path>` its templates name), as tests/plan/test_charts.py reads
    them. Helpers that read `$.Values` or `index .Values` are not seen: check `_helpers.tpl` by eye."""
    values = yaml.safe_load((chart_dir / "values.yaml").read_text()) or {}
    keys: list[str] = []
    open_maps: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for k, v in node.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            keys.append(path)
            if isinstance(v, dict) and v:
                walk(v, path)
            elif isinstance(v, dict):
                open_maps.append(path)

    walk(values, "")
    reads = {
        m.group(1)[1:]
        for t in sorted((chart_dir / "templates").glob("*"))
        for m in _VALUES_READ.finditer(t.read_text())
    }
    return {"value_keys": sorted(keys), "open_maps": sorted(open_maps), "template_reads": sorted(reads)}


def main(argv: list[str]) -> int:
    kind = argv[0] if argv else ""
    if kind == "chart" and len(argv) == 2:
        sys.stdout.write(yaml.safe_dump(chart_keys(Path(argv[1])), sort_keys=False))
        return 0
    text = sys.stdin.read()
    if kind == "hydra":
        out: Any = hydra_keys(text)
    elif kind == "fields" and len(argv) == 2:
        out = dataclass_fields(text, argv[1])
    elif kind == "cli-fields" and len(argv) == 2:
        out = cli_fields(text, argv[1])
    elif kind == "argparse":
        out = argparse_options(text)
    elif kind == "assignments" and len(argv) == 2:
        out = recipe_assignments(text, argv[1])
    elif kind == "eks-ami" and len(argv) > 1:
        out = eks_ami_releases(text, argv[1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump(out, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
