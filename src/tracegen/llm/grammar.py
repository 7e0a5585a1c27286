"""Grammars: the language a model's reply must belong to, written once and rendered in the
forms servers take.

A `Grammar` is a set of named rules built from a few parts (`lit`, `chars`, `seq`, `alt`,
`rep` and rule references). It renders as GBNF, the form llama.cpp's ``grammar`` request field
takes (and the EBNF of xgrammar, which vLLM's ``structured_outputs.grammar`` and SGLang's
``ebnf`` use, follows the same syntax), and, as the rules are not recursive, as one regular
expression (vLLM's ``structured_outputs.regex``, SGLang's ``regex``). Character classes are
written in the syntax both share (``^<``, ``a-z``, ``\\n``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

_REGEX_SPECIAL = set("\\.^$|?*+()[]{}/")
_GBNF_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


class Expr:
    """One part of a rule."""

    def gbnf(self) -> str:
        raise NotImplementedError

    def regex(self, rules: dict[str, Expr]) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Lit(Expr):
    text: str

    def gbnf(self) -> str:
        return '"' + "".join(_GBNF_ESCAPES.get(c, c) for c in self.text) + '"'

    def regex(self, rules: dict[str, Expr]) -> str:
        out = []
        for c in self.text:
            if c in _REGEX_SPECIAL:
                out.append("\\" + c)
            elif c in "\n\t\r":
                out.append(_GBNF_ESCAPES[c])
            else:
                out.append(c)
        return "".join(out)


@dataclass(frozen=True)
class Chars(Expr):
    """A character class, ``spec`` as between the brackets (``^<``, ``a-z0-9``)."""

    spec: str

    def gbnf(self) -> str:
        return f"[{self.spec}]"

    def regex(self, rules: dict[str, Expr]) -> str:
        return f"[{self.spec}]"


@dataclass(frozen=True)
class Ref(Expr):
    name: str

    def gbnf(self) -> str:
        return self.name

    def regex(self, rules: dict[str, Expr]) -> str:
        return f"(?:{rules[self.name].regex(rules)})"


@dataclass(frozen=True)
class Seq(Expr):
    items: tuple[Expr, ...]

    def gbnf(self) -> str:
        return " ".join(_group(i) for i in self.items)

    def regex(self, rules: dict[str, Expr]) -> str:
        return "".join(
            f"(?:{i.regex(rules)})" if isinstance(i, Alt) else i.regex(rules) for i in self.items
        )


@dataclass(frozen=True)
class Alt(Expr):
    options: tuple[Expr, ...]

    def gbnf(self) -> str:
        return " | ".join(o.gbnf() for o in self.options)

    def regex(self, rules: dict[str, Expr]) -> str:
        return "|".join(o.regex(rules) for o in self.options)


@dataclass(frozen=True)
class Rep(Expr):
    item: Expr
    low: int = 0
    high: int | None = None

    def _suffix(self) -> str:
        if (self.low, self.high) == (0, None):
            return "*"
        if (self.low, self.high) == (1, None):
            return "+"
        if (self.low, self.high) == (0, 1):
            return "?"
        return f"{{{self.low},{'' if self.high is None else self.high}}}"

    def gbnf(self) -> str:
        return f"{_atom(self.item)}{self._suffix()}"

    def regex(self, rules: dict[str, Expr]) -> str:
        return f"(?:{self.item.regex(rules)}){self._suffix()}"


def _atom(e: Expr) -> str:
    return e.gbnf() if isinstance(e, Lit | Chars | Ref) else f"({e.gbnf()})"


def _group(e: Expr) -> str:
    return f"({e.gbnf()})" if isinstance(e, Alt) else e.gbnf()


def _expr(e: Expr | str) -> Expr:
    return Lit(e) if isinstance(e, str) else e


def lit(text: str) -> Lit:
    return Lit(text)


def chars(spec: str) -> Chars:
    return Chars(spec)


def ref(name: str) -> Ref:
    return Ref(name)


def seq(*items: Expr | str) -> Expr:
    return Seq(tuple(_expr(i) for i in items))


def alt(*options: Expr | str) -> Expr:
    return Alt(tuple(_expr(o) for o in options))


def rep(item: Expr | str, low: int = 0, high: int | None = None) -> Rep:
    return Rep(_expr(item), low, high)


def opt(item: Expr | str) -> Rep:
    return Rep(_expr(item), 0, 1)


class Grammar:
    """A named language: ``rules`` by name, ``root`` the whole reply."""

    def __init__(self, name: str, rules: dict[str, Expr]) -> None:
        if "root" not in rules:
            raise ValueError(f"grammar {name!r} has no root rule")
        self.name = name
        self.rules = rules

    def __repr__(self) -> str:
        return f"Grammar({self.name!r}, sha256={self.sha256[:12]}…)"

    @cached_property
    def gbnf(self) -> str:
        """llama.cpp's GBNF (xgrammar's EBNF reads it too): one ``name ::= …`` line a rule."""
        return "".join(f"{name} ::= {rule.gbnf()}\n" for name, rule in self.rules.items())

    @cached_property
    def regex(self) -> str:
        """The same language as one regular expression (the rules are inlined)."""
        return self.rules["root"].regex(self.rules)

    @cached_property
    def sha256(self) -> str:
        """What the trace records: the hash of the GBNF text."""
        return hashlib.sha256(self.gbnf.encode()).hexdigest()
