"""Label selectors, the Kubernetes syntax subset the API's `label_selector` and the CLI's
`-l` take: one grammar, one parser (pure: no I/O).

    key=value  key==value   the label is there with that value
    key!=value              the label is missing or has another value
    key in (v1,v2)          the label is there with one of the values
    key notin (v1,v2)       the label is missing or has none of the values
    key                     the label is there (any value)
    !key                    the label is missing

Requirements are separated by commas (commas inside parentheses separate values) and must
all hold; an empty (or blank) selector selects everything. Keys: 1-253 letters, digits and
`._/-`; values: 0-63 letters, digits and `._-` (a value list may not hold an empty one):
at most MAX_SELECTOR characters. `parse` raises SelectorError listing every malformed
requirement; `format_selector` writes the
canonical text `parse` reads back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["OPS", "MAX_SELECTOR", "Requirement", "SelectorError", "format_selector",
           "matches", "parse"]

MAX_SELECTOR = 4096

OPS = ("=", "!=", "in", "notin", "exists", "!exists")
_KEY = r"[A-Za-z0-9._/-]{1,253}"
_VALUE = r"[A-Za-z0-9._-]{0,63}"
_EXISTS = re.compile(rf"^({_KEY})$")
_NOT_EXISTS = re.compile(rf"^!\s*({_KEY})$")
_COMPARE = re.compile(rf"^({_KEY})\s*(==|!=|=)\s*({_VALUE})$")
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s*\((.*)\)$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


class SelectorError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # one of OPS
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op in ("=", "in"):
            return self.key in labels and value in self.values
        return self.key not in labels or value not in self.values  # != and notin

    def __str__(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "!exists":
            return f"!{self.key}"
        if self.op in ("=", "!="):
            return f"{self.key}{self.op}{self.values[0]}"
        return f"{self.key} {self.op} ({','.join(self.values)})"


def _split(text: str) -> tuple[list[str], list[str]]:
    """Terms at parenthesis depth 0, and problems with the parentheses."""
    terms: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
            if depth > 1:
                return [], ["nested parentheses"]
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return [], ["')' without '('"]
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    if depth:
        return [], ["'(' without ')'"]
    terms.append(text[start:])
    return terms, []


def parse(text: str) -> list[Requirement]:
    """The requirements of a selector (all must hold); SelectorError lists every problem."""
    if len(text) > MAX_SELECTOR:
        raise SelectorError([f"longer than {MAX_SELECTOR} characters"])
    if not text.strip():
        return []
    terms, problems = _split(text)
    if problems:
        raise SelectorError([f"{text!r}: {p}" for p in problems])
    reqs: list[Requirement] = []
    for n, raw in enumerate(terms, 1):
        term = raw.strip()
        where = f"requirement {n} {term!r}" if term else f"requirement {n}"
        if not term:
            problems.append(f"{where}: empty (a stray comma?)")
        elif m := _NOT_EXISTS.match(term):
            reqs.append(Requirement(m[1], "!exists"))
        elif m := _EXISTS.match(term):
            reqs.append(Requirement(m[1], "exists"))
        elif m := _COMPARE.match(term):
            reqs.append(Requirement(m[1], "!=" if m[2] == "!=" else "=", (m[3],)))
        elif m := _SET.match(term):
            values = tuple(v.strip() for v in m[3].split(","))
            bad = [v for v in values if not v or not _VALUE_RE.match(v)]
            if bad:
                problems.append(f"{where}: values must be 1-63 letters, digits, '.', '_' or "
                                f"'-' (got {', '.join(map(repr, bad))})")
            else:
                reqs.append(Requirement(m[1], m[2], tuple(dict.fromkeys(values))))
        else:
            problems.append(f"{where}: expected key=value, key!=value, key in (a,b), "
                            "key notin (a,b), key or !key (keys: 1-253 letters, digits, "
                            "'.', '_', '-', '/'; values: 0-63 letters, digits, '.', '_', "
                            "'-')")
    if problems:
        raise SelectorError(problems)
    return reqs


def matches(requirements: list[Requirement], labels: Mapping[str, str]) -> bool:
    """Whether `labels` satisfy every requirement (an empty selector matches all)."""
    return all(r.matches(labels) for r in requirements)


def format_selector(requirements: list[Requirement]) -> str:
    return ",".join(map(str, requirements))
