"""OCI's policy statement grammar, parsed, and a statement's condition evaluated against a request.

`Allow <subject> to <verb> <resource-type> in <location> [where <conditions>]` (Oracle's "Policy Syntax" page;
whitespace and case do not matter): subject `any-user`, `group A, B`, `group id ocid…`, `dynamic-group …`;
location `tenancy`, `compartment <name>` (`A:B` for a deeper one, relative to the policy's compartment),
`compartment id <ocid>`; conditions `variable = 'value'` or `!=`, a `/pattern*/` with `*` wildcards, and
`any {…}` / `all {…}` of them. Policies only allow: there is no deny. Values match case-insensitively.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ocigroup_cli.iam.permissions import RESOURCE_TYPES, VERBS

_TOKEN = re.compile(r"\s*(?:('[^']*'|\"[^\"]*\")|(/[^/]*/)|(!=|=|\{|\}|,)|([^\s{},=!'\"]+))")
# the variables a condition may test (Oracle's general ones and those of the services the emulator serves)
VARIABLES = frozenset(
    {
        "request.user.id", "request.user.name", "request.groups.id", "request.permission", "request.operation",
        "request.region", "request.principal.type", "target.compartment.id", "target.compartment.name",
        "target.tenant.id", "target.stream.id", "target.streampool.id", "target.bucket.name", "target.object.name",
        "target.metrics.namespace",
    }
)  # fmt: skip


class PolicyError(ValueError):
    """A statement that does not parse: the reason, for the line that holds it."""


@dataclass(frozen=True)
class Clause:
    variable: str
    negated: bool
    value: str  # lowercase; a pattern keeps its `*`
    pattern: bool

    def holds(self, variables: dict[str, str | tuple[str, ...]]) -> bool:
        given = variables.get(self.variable)
        if given is None:  # a variable the request does not carry: the condition is not met
            return False
        values = given if isinstance(given, tuple) else (given,)
        hit = any(_matches(v.lower(), self.value, self.pattern) for v in values)
        return hit != self.negated


@dataclass(frozen=True)
class Condition:
    """`any {…}` or `all {…}` of clauses and conditions."""

    kind: str  # "any" | "all"
    parts: tuple[Clause | Condition, ...]

    def holds(self, variables: dict[str, str | tuple[str, ...]]) -> bool:
        results = (p.holds(variables) for p in self.parts)
        return any(results) if self.kind == "any" else all(results)


@dataclass(frozen=True)
class Statement:
    text: str
    any_user: bool
    groups: frozenset[str]  # lowercase names (a `Default/` domain dropped)
    group_ids: frozenset[str]
    verb: str
    resource_type: str
    location: tuple[str, ...]  # ("tenancy",) | ("id", ocid) | ("path", name, name…)
    condition: Clause | Condition | None = field(default=None)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[str] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise PolicyError(f"unexpected {text[pos : pos + 12]!r}")
            self.items.append(m.group(0).strip())
            pos = m.end()
        self.pos = 0

    def peek(self) -> str:
        return self.items[self.pos] if self.pos < len(self.items) else ""

    def take(self, what: str = "a word") -> str:
        if self.pos >= len(self.items):
            raise PolicyError(f"the statement ends where {what} should come")
        self.pos += 1
        return self.items[self.pos - 1]

    def expect(self, word: str) -> None:
        got = self.take(repr(word))
        if got.lower() != word:
            raise PolicyError(f"expected {word!r}, found {got!r}")


def parse(text: str) -> Statement:
    """One statement, or PolicyError saying what is wrong with it."""
    t = _Tokens(" ".join(text.split()))
    first = t.take("'Allow'")
    if first.lower() != "allow":
        raise PolicyError(f"only 'Allow' statements grant anything here (found {first!r})")
    any_user, groups, ids = _subject(t)
    verb = t.take("a verb").lower()
    if verb not in VERBS:
        raise PolicyError(f"{verb!r} is not a verb: use one of {', '.join(VERBS)}")
    resource_type = t.take("a resource type").lower()
    if resource_type not in RESOURCE_TYPES:
        raise PolicyError(f"{resource_type!r} is not a resource type here: one of {', '.join(RESOURCE_TYPES)}")
    t.expect("in")
    location = _location(t)
    condition = None
    if t.peek():
        t.expect("where")
        try:
            condition = _condition(t)
        except RecursionError:  # a condition parses once a level
            raise PolicyError("conditions nested deeper than a policy can hold") from None
        if t.peek():
            raise PolicyError(f"unexpected {t.peek()!r} after the condition")
    return Statement(text, any_user, groups, ids, verb, resource_type, location, condition)


def _subject(t: _Tokens) -> tuple[bool, frozenset[str], frozenset[str]]:
    kind = t.take("a subject").lower()
    if kind == "any-user":
        t.expect("to")
        return True, frozenset(), frozenset()
    if kind not in ("group", "dynamic-group"):
        raise PolicyError(f"the subject must be 'group …', 'dynamic-group …' or 'any-user', not {kind!r}")
    names: set[str] = set()
    ids: set[str] = set()
    while True:
        by_id = t.peek().lower() == "id"
        if by_id:
            t.take()
        name = _unquote(t.take("a group's name"))
        if kind == "group":  # a dynamic group's members are instances: no user of the file is one
            (ids if by_id else names).add(name.lower().removeprefix("default/"))
        following = t.take("'to'")
        if following.lower() == "to":
            return False, frozenset(names), frozenset(ids)
        if following != ",":
            raise PolicyError(f"expected ',' or 'to' after the subject, found {following!r}")
        if t.peek().lower() in ("group", "dynamic-group"):
            t.take()


def _location(t: _Tokens) -> tuple[str, ...]:
    word = t.take("'tenancy' or 'compartment'").lower()
    if word == "tenancy":
        return ("tenancy",)
    if word != "compartment":
        raise PolicyError(f"the location must be 'tenancy' or 'compartment …', not {word!r}")
    name = t.take("a compartment")
    if name.lower() == "id":
        return ("id", _unquote(t.take("a compartment OCID")))
    return ("path", *(_unquote(name).split(":")))


def _condition(t: _Tokens) -> Clause | Condition:
    word = t.take("a condition")
    if word.lower() in ("any", "all") and t.peek() == "{":
        t.take()
        parts: list[Clause | Condition] = [_condition(t)]
        while (sep := t.take("'}'")) == ",":
            parts.append(_condition(t))
        if sep != "}":
            raise PolicyError(f"expected ',' or '}}' in {word.lower()} {{…}}, found {sep!r}")
        return Condition(word.lower(), tuple(parts))
    variable = word.lower()
    if variable not in VARIABLES:
        raise PolicyError(
            f"{word!r} is not a variable a condition can test here: one of {', '.join(sorted(VARIABLES))}"
        )
    op = t.take("'=' or '!='")
    if op not in ("=", "!="):
        raise PolicyError(f"expected '=' or '!=' after {word}, found {op!r}")
    raw = t.take("a value")
    pattern = raw.startswith("/") and raw.endswith("/") and len(raw) >= 2
    value = raw[1:-1] if pattern else _unquote(raw)
    return Clause(variable, op == "!=", value.lower(), pattern)


def _matches(value: str, wanted: str, pattern: bool) -> bool:
    """`wanted` as it is, or a pattern where `*` stands for anything: matched left to right in linear passes (as a
    regular expression, `/*a*a*…*a/` backtracked for ever and held the emulator's thread)."""
    if not pattern or "*" not in wanted:
        return value == wanted
    first, *middle, last = wanted.split("*")
    if len(first) + len(last) > len(value) or not value.startswith(first) or not value.endswith(last):
        return False
    at, end = len(first), len(value) - len(last)
    for part in middle:  # each piece at its first place after the one before: if any way fits, that one does
        found = value.find(part, at, end)
        if found < 0:
            return False
        at = found + len(part)
    return True


def _unquote(word: str) -> str:
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "'\"":
        return word[1:-1]
    return word
