"""Values checked against the AWS API's own model: botocore's service shapes.

botocore ships every service's API model: enums, integer ranges, string lengths and
patterns, list and map sizes. A config value that ends up in an AWS request is checked
against the shape of the member it fills, so AWS's rule (not a looser local one) decides,
and the error names the API member. `tests/plan/test_aws_inputs.py` holds every planned
input of the EKS, EC2, FSx, ECR, S3, KMS and IAM resources against the same shapes.

Shapes are addressed as `service:Operation:Member.Member` (`[]` steps into a list member,
`{}` into a map value, `<key>` into a map key), e.g.
`fsx:CreateFileSystem:LustreConfiguration.DailyAutomaticBackupStartTime`.
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, cast

import botocore.session
from botocore.model import Shape

from config.base import Refusal
from config.problems import problem
from facts.regions import PARTITION

# AWS publishes Java patterns. In Java `\d`, `\w` and `\s` are ASCII-only (Python's match any
# Unicode digit or letter), so they become explicit ASCII classes; the Unicode classes then
# become Python's, inside a character class: \p{L} and \p{N} are covered by \w (which adds
# `_`, already allowed where these occur), \p{Z} by a space and the other Unicode separators.
_JAVA_ASCII_CLASSES = {"d": "0-9", "w": "A-Za-z0-9_", "s": " \\t\\n\\x0b\\f\\r"}
_UNICODE_CLASSES = {
    r"\p{L}": r"\w",
    r"\p{N}": r"\w",
    r"\p{Z}": " \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000",
}


def _ascii_classes(java: str) -> str:
    """`\\d`, `\\w`, `\\s` of a Java pattern as the ASCII classes Java means by them."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(java):
        c = java[i]
        if c == "\\" and i + 1 < len(java):
            nxt = java[i + 1]
            if nxt in _JAVA_ASCII_CLASSES:
                ascii_class = _JAVA_ASCII_CLASSES[nxt]
                out.append(ascii_class if in_class else f"[{ascii_class}]")
            elif nxt.lower() in _JAVA_ASCII_CLASSES and not in_class:
                out.append(f"[^{_JAVA_ASCII_CLASSES[nxt.lower()]}]")
            else:
                out.append(java[i : i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


@cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


def region_problems(region: str) -> str | None:
    """Why the program cannot run in `region`, or None. The regions come from botocore's
    endpoint data (the regions of each partition where EKS has an endpoint); the program
    writes ARNs of the `aws` partition only, so regions of other partitions are refused too."""
    session = _session()
    ours = session.get_available_regions("eks", PARTITION)
    if region in ours:
        return None
    for partition in session.get_available_partitions():
        if region in session.get_available_regions("eks", partition):
            return (
                f"{region} is in the {partition} partition; this program writes ARNs, service principals and image"
                f" registry addresses of the {PARTITION} partition only"
            )
    close = difflib.get_close_matches(region, ours, n=1, cutoff=0.6)
    if close:
        return f"{region!r} is not an AWS region with EKS (did you mean {close[0]!r}?)"
    return f"{region!r} is not an AWS region with EKS; regions: {', '.join(ours)}"


@cache
def shape(address: str) -> Shape:
    """The botocore shape at `service:Operation:Member.Member`."""
    service, operation, path = address.split(":", 2)
    current: Any = _session().get_service_model(service).operation_model(operation).input_shape
    for step in path.split(".") if path else []:
        if step == "[]":
            current = current.member
        elif step == "{}":
            current = current.value
        elif step == "<key>":
            current = current.key
        else:
            current = current.members[step]
    return cast(Shape, current)


@cache
def named_shape(service: str, name: str) -> Shape:
    """A botocore shape by its name in the service model (one no operation member names)."""
    return cast(Shape, _session().get_service_model(service).shape_for(name))


@cache
def _pattern(raw: str) -> re.Pattern[str]:
    # A Java class range over a surrogate pair is, in Python, the supplementary planes.
    text = _ascii_classes(raw.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF"))
    for java, python in _UNICODE_CLASSES.items():
        text = text.replace(java, python)
    return re.compile(text)


@cache
def documented_rules(s: Shape) -> dict[str, Any]:
    """Rules some members state only in their API documentation, in AWS's fixed phrasing:
    "Valid values: `a` | `b`", "Integers from 1 to 64", "Up to 255 characters", "Valid
    characters: a-z, A-Z, 0-9, spaces, and ._-:/()#,@[]+=&;{}!$*", "Valid Range: Minimum value
    of 125. Maximum value of 2,000"."""
    doc = html.unescape(re.sub(r"<[^>]+>", "", s.documentation or ""))
    rules: dict[str, Any] = {}
    if m := re.search(r"Valid values: ((?:[\w.-]+ \| )+[\w.-]+)", doc):
        rules["enum"] = [v.strip() for v in m.group(1).split("|")]
    if m := re.search(r"Integers from (\d+) to (\d+)", doc):
        rules["min"], rules["max"] = int(m.group(1)), int(m.group(2))
    if m := re.search(r"Valid Range: Minimum value of ([\d,]+)\. Maximum value of ([\d,]+)", doc):
        rules["min"], rules["max"] = (int(g.replace(",", "")) for g in m.groups())
    if re.search(r"must be a non-zero positive integer", doc):
        rules["min"], rules["max"] = 1, 2**31 - 1
    if m := re.search(r"You can specify up to (\d+) noncurrent versions", doc):
        rules["min"], rules["max"] = 1, int(m.group(1))
    if m := re.search(r"Up to (\d+) characters", doc):
        rules["max_length"] = int(m.group(1))
    if m := re.search(r"(?:Valid|Allowed) characters(?: are)?:? a-z, A-Z, 0-9, spaces, and (\S+)", doc):
        rules["characters"] = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ") | set(m.group(1))
    return rules


def problems(value: Any, target: Shape | str) -> list[str]:
    """What AWS's model refuses in `value` for the shape (empty when the value is valid): its
    enum, range, length and pattern, and the rules its documentation states."""
    s = shape(target) if isinstance(target, str) else target
    meta = {**s.metadata}
    doc_rules = documented_rules(s)
    if "min" in doc_rules and s.type_name in ("integer", "long"):
        meta.setdefault("min", doc_rules["min"])
        meta.setdefault("max", doc_rules["max"])
    if "max_length" in doc_rules and s.type_name == "string":
        meta.setdefault("max", doc_rules["max_length"])
    out: list[str] = []
    if isinstance(value, str) and "characters" in doc_rules and not set(value) <= doc_rules["characters"]:
        bad = "".join(sorted(set(value) - doc_rules["characters"]))
        out.append(f"{value!r} has characters AWS does not allow here: {bad!r}")
    enum = getattr(s, "enum", None) or doc_rules.get("enum") or []
    if enum and value not in enum:
        out.append(f"{value!r} is not one of {', '.join(map(str, enum))}")
    if s.type_name in ("integer", "long") and isinstance(value, int) and not isinstance(value, bool):
        if "min" in meta and value < meta["min"]:
            out.append(f"{value} is below the minimum {meta['min']}")
        if "max" in meta and value > meta["max"]:
            out.append(f"{value} is above the maximum {meta['max']}")
    if isinstance(value, (str, list, tuple, Mapping)) and s.type_name in ("string", "list", "map"):
        unit = "characters" if isinstance(value, str) else "entries"
        if "min" in meta and len(value) < meta["min"]:
            out.append(f"has {len(value)} {unit}; at least {meta['min']} needed")
        if "max" in meta and len(value) > meta["max"]:
            out.append(f"has {len(value)} {unit}; at most {meta['max']} allowed")
    # AWS anchors some patterns and not others; either way it validates the whole value.
    if isinstance(value, str) and "pattern" in meta and _pattern(meta["pattern"]).fullmatch(value) is None:
        out.append(f"{value!r} does not match AWS's pattern {meta['pattern']}")
    return out


def check(value: Any, address: str) -> Any:
    """`value`, or ValueError naming the AWS API member whose rule it breaks."""
    found = problems(value, address)
    if found:
        member = address.rsplit(":", 1)[-1]
        raise Refusal(f"{'; '.join(found)} (AWS {address.split(':')[0]} API, {member})", "invalid")
    return value


def documented_values(address: str) -> tuple[int, ...]:
    """Integers the API documentation of a member enumerates ("Possible values are: 1, 3, 5"):
    for members whose allowed values AWS lists in prose, not as an enum (CloudWatch Logs
    retention days)."""
    doc = shape(address).documentation or ""
    match = re.search(r"Possible values are:([\d,\sand]+)", doc)
    if not match:
        raise LookupError(f"{address}: no 'Possible values are:' list in botocore's documentation")
    return tuple(int(n) for n in re.findall(r"\d+", match.group(1)))


def check_log_retention(days: int) -> int:
    """`days`, or ValueError listing the retentions CloudWatch Logs accepts (PutRetentionPolicy)."""
    allowed = documented_values("logs:PutRetentionPolicy:retentionInDays")
    if days not in allowed:
        raise Refusal(f"CloudWatch Logs accepts {', '.join(map(str, allowed))} days (PutRetentionPolicy)", "invalid")
    return days


# Tag rules of every service whose resources carry the stack's tags (key and value shapes, and
# the most tags one resource may hold). The strictest rule of any of them applies to `tags`.
TAG_SHAPES: dict[str, tuple[str, str]] = {
    "eks": ("eks:TagResource:tags.<key>", "eks:TagResource:tags.{}"),
    "fsx": ("fsx:CreateFileSystem:Tags.[].Key", "fsx:CreateFileSystem:Tags.[].Value"),
    "iam": ("iam:CreateRole:Tags.[].Key", "iam:CreateRole:Tags.[].Value"),
    "kms": ("kms:CreateKey:Tags.[].TagKey", "kms:CreateKey:Tags.[].TagValue"),
    "logs": ("logs:CreateLogGroup:tags.<key>", "logs:CreateLogGroup:tags.{}"),
}
TAG_LIMITS = ("eks:TagResource:tags", "fsx:CreateFileSystem:Tags", "iam:CreateRole:Tags", "logs:CreateLogGroup:tags")


def tag_problems(tags: Mapping[str, str], reserved: Sequence[str] = ()) -> list[str]:
    """`tags.<key>: ...` lines for tags some service would refuse; `reserved` are keys the
    stack adds itself (they count against the per-resource limit)."""
    out: list[str] = []
    for key, value in tags.items():
        if key.lower().startswith("aws:"):
            out.append(problem(f"tags.{key}", "forbidden", "the aws: prefix is reserved for AWS's own tags"))
            continue
        for service, (key_address, value_address) in TAG_SHAPES.items():
            bad = [f"key {p}" for p in problems(key, key_address)]
            bad += [f"value {p}" for p in problems(value, value_address)]
            if bad:
                out.append(problem(f"tags.{key}", "invalid", f"{'; '.join(bad)} ({service} tag rules)"))
                break
    total = len({*tags, *reserved})
    limit = min(int(shape(a).metadata.get("max", 50)) for a in TAG_LIMITS)
    if total > limit:
        out.append(
            problem(
                "tags",
                "invalid",
                f"{len(tags)} tags plus the {len(reserved)} the stack adds is {total}; AWS allows {limit}",
            )
        )
    return out


ACM_CERTIFICATE_SHAPE = "acm:DescribeCertificate:CertificateArn"
# The form ACM's model documents for the member: arn:aws:acm:region:123456789012:certificate/<UUID>.
_ACM_CERTIFICATE_RE = re.compile(
    rf"arn:{PARTITION}:acm:([a-z0-9-]+):[0-9]{{12}}:certificate/[0-9a-f]{{8}}(?:-[0-9a-f]{{4}}){{3}}-[0-9a-f]{{12}}",
    re.ASCII,
)


def check_acm_certificate_arn(arn: str) -> str:
    """`arn`, or ValueError: an ACM certificate's ARN as ACM's model patterns and documents it
    (DescribeCertificate's CertificateArn), in this program's partition."""
    bad = problems(arn, ACM_CERTIFICATE_SHAPE)
    if bad or _ACM_CERTIFICATE_RE.fullmatch(arn) is None:
        raise Refusal(
            f"{arn!r} is not an ACM certificate ARN like arn:{PARTITION}:acm:us-west-2:123456789012:certificate/"
            "12345678-1234-1234-1234-123456789012 (ACM DescribeCertificate, CertificateArn)",
            "invalid",
        )
    return arn


def acm_certificate_region(arn: str) -> str:
    """The region of a certificate ARN check_acm_certificate_arn accepted."""
    match = _ACM_CERTIFICATE_RE.fullmatch(arn)
    assert match is not None, arn
    return match.group(1)
