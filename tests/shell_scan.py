"""Read what a rendered shell script relies on: the programs it runs, the absolute paths it
names and the environment variables it reads; and what a Dockerfile provides (its ENV lines
and the paths and programs its build-time checks assert).

A small reader for the scripts this project renders (bash, `bash -c '...'` nested under mpirun,
`ssh host "..."`), not a general shell parser: the tests that use it also run `bash -n` over
every script.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "in", "do", "done", "until", "while", "!", "{", "}", "exec"}
BUILTINS = {
    "echo", "printf", "test", "[", "[[", "]]", "true", "false", "cd", "exit", "export", "set", "read", "local",
    "shift", "trap", "wait", "ulimit", "compgen", "type", "command", "source", ".", ":", "break", "continue",
    "let", "return", "eval",
}  # fmt: skip
WRAPPERS = {"xargs", "neuron_parallel_compile", "time", "nohup", "env"}
"""Programs whose first non-option argument is itself a program to run."""
OPERATORS = {"&&", "||", "|", ";", "(", ")", "&", ";;", "|&"}
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_DEFAULTED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-")
_PATH = re.compile(r"(?:^|(?<=[\s='\"(:,\[]))(/[A-Za-z0-9_.][\w./+*-]*)")


@dataclass
class Uses:
    """What a script uses."""

    programs: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)
    variables: set[str] = field(default_factory=set)
    assigned: dict[str, str] = field(default_factory=dict)
    """Variables the script sets, with the value it gives them."""
    nested: list[tuple[str, str]] = field(default_factory=list)
    """(how, script) of the scripts it starts: `mpirun` for `$MPIRUN bash -c '...'` (ranks started
    over ssh), `ssh` for `ssh host '...'`, `ssh-expanded` for `ssh host "..."` (its variables
    expand here, before ssh), `bash` for a plain `bash -c '...'`."""


SSH_OPTIONS_WITH_VALUE = {"-o", "-i", "-p", "-l", "-F", "-J", "-E"}


def _without_arithmetic(script: str) -> str:
    """`$(( ... ))`, parentheses nested inside included, becomes the word 0."""
    out, i = [], 0
    while (start := script.find("$((", i)) != -1:
        out.append(script[i:start])
        depth, j = 0, start + 1
        while j < len(script):
            depth += {"(": 1, ")": -1}.get(script[j], 0)
            j += 1
            if depth == 0:
                break
        out.append("0")
        i = j
    out.append(script[i:])
    return "".join(out)


def _normalise(script: str) -> str:
    """Arithmetic expansions become plain words, stderr redirections go, and
    newlines outside quotes become `;`, so one token stream holds the whole script."""
    text = _without_arithmetic(script)
    text = re.sub(r"\d?>&\d", " ", text)
    out: list[str] = []
    quote: str | None = None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
            out.append(ch)
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        else:
            out.append(" ; " if ch == "\n" else ch)
    return "".join(out)


def _outside_single_quotes(script: str) -> str:
    """The script with single-quoted text blanked (a ' inside double quotes is literal)."""
    out: list[str] = []
    quote: str | None = None
    for ch in script:
        if quote == "'":
            quote = None if ch == "'" else quote
            out.append(" ")
            continue
        if quote == '"':
            quote = None if ch == '"' else quote
        elif ch in "'\"":
            quote = ch
        out.append(ch if quote != "'" else " ")
    return "".join(out)


def _tokens(script: str) -> list[str]:
    lex = shlex.shlex(_normalise(script), posix=True, punctuation_chars=";&|()")
    lex.whitespace_split = True
    lex.commenters = ""
    return list(lex)


_HEREDOC = re.compile(r"^([^\n]*<<-?\s*'(\w+)'[^\n]*)\n.*?^\2$\n?", re.S | re.M)
"""A quoted here-document (`<<'EOF'`: no expansion in its body), its first line kept."""


def scan(script: str) -> Uses:
    """Programs, absolute paths and variables of one script; the scripts it starts are listed
    in `nested`, for the caller to scan in their own environment."""
    uses = Uses()
    paths_from = script
    # A here-document is the input of its command (a `python3 - <<'EOF'` program), not shell:
    # only its paths count.
    script = _HEREDOC.sub(lambda m: m.group(1) + "\n", script)
    # Variables outside single quotes (a single-quoted `bash -c` script is scanned on its own;
    # awk programs are single-quoted and their $NF is awk's).
    # `${NAME:-default}` has a value whether or not NAME is set: not a need.
    uses.variables |= set(_VAR.findall(_DEFAULTED.sub("", _outside_single_quotes(script))))
    uses.paths |= {
        p for p in _PATH.findall(paths_from) if "\\" not in p and p.strip("/").count("/") >= 1 and "$" not in p
    }
    uses.programs |= set(re.findall(r"\$\(\s*([A-Za-z0-9_./-]+)", script)) - BUILTINS - KEYWORDS
    _scan_words(_tokens(script), uses)
    uses.nested = [
        ("ssh-expanded" if how == "ssh" and f'"{text}"' in script else how, text) for how, text in uses.nested
    ]
    return uses


def _ssh_remote(args: list[str]) -> str | None:
    """The command of `ssh [options] host command...`."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in SSH_OPTIONS_WITH_VALUE else 1
    rest = args[i + 1 :]
    end = next((j for j, a in enumerate(rest) if re.fullmatch(r"[;&|()]+", a)), len(rest))
    return " ".join(rest[:end]) or None


def _scan_words(words: list[str], uses: Uses) -> None:
    at_command, wrapper, launched = True, False, False
    i = 0
    while i < len(words):
        w = words[i]
        i += 1
        if re.fullmatch(r"[;&|()]+", w) or w == "$":
            at_command, wrapper, launched = True, False, False
        elif wrapper and not at_command:
            if not w.startswith("-"):
                at_command, wrapper = True, False
                i -= 1
        elif not at_command:
            continue
        elif w in KEYWORDS:
            if w == "for" and i < len(words):
                uses.assigned[words[i]] = ""
                i += 1
                if i < len(words) and words[i] == "in":  # its list is words, not a command
                    i += 1
                    at_command = False
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w):
            name, _, value = w.partition("=")
            uses.assigned[name] = value
            if name == "MPIRUN" and value:
                uses.programs.add(value.split()[0])
        elif w.startswith("$"):
            # $MPIRUN: the next word is the program it starts on every node
            at_command, wrapper, launched = False, True, w == "$MPIRUN"
        elif w == "export":
            continue
        elif w in BUILTINS:
            at_command = False
        elif not re.fullmatch(r"[A-Za-z0-9_./+-]+", w):
            at_command = False  # the rest of an expansion such as ${ips%% *}
        else:
            uses.programs.add(w)
            at_command = False
            if w in ("bash", "sh") and words[i : i + 1] == ["-c"] and i + 1 < len(words):
                uses.nested.append(("mpirun" if launched else "bash", words[i + 1]))
                i += 2
            elif w == "ssh":
                remote = _ssh_remote(words[i:])
                if remote:
                    uses.nested.append(("ssh", remote))
            wrapper, launched = w in WRAPPERS, False


@dataclass(frozen=True)
class Provides:
    """What a Dockerfile gives its image."""

    env: dict[str, str]
    paths: frozenset[str]
    programs: frozenset[str]
    workdir: str | None


def dockerfile(path: Path) -> Provides:
    """ENV lines, and the `test -e|-f|-x|-d <path>` and `command -v <program>` build checks."""
    text = path.read_text()
    joined = re.sub(r"\\\n", " ", text)
    env: dict[str, str] = {}
    for m in re.finditer(r"^ENV\s+(.+)$", joined, re.M):
        body = m.group(1).strip()
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s+[^=]", body):  # legacy `ENV KEY value`
            key, _, value = body.partition(" ")
            env[key] = value.strip()
            continue
        for item in shlex.split(body):
            key, _, value = item.partition("=")
            env[key] = value
    paths = frozenset(re.findall(r"\btest -[efxd] (\S+)", joined))
    programs = frozenset(re.findall(r"\bcommand -v (\S+)", joined))
    workdirs = re.findall(r"^WORKDIR\s+(\S+)", joined, re.M)
    return Provides(env, paths, programs, workdirs[-1] if workdirs else None)
