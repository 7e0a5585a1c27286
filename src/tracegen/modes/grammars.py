"""Each mode's protocol as a grammar, for constrained decoding (``--constrain``).

One grammar describes one model request of a mode: the tags it may write, in the order the
mode's prompt asks for, and nothing after them (the reply ends where the grammar ends). Inside
prose blocks a ``<`` may start no tag (``a < b`` is fine, ``<result>`` is not) and a block
holds at most `PROSE_LINES` lines of at most `LINE_CHARS` characters (a small model otherwise
reasons until it runs out of tokens, and never writes code); inside code any ``<`` is allowed
except one that starts ``</``, so comparisons, shifts and ``<=`` are code like any other, and a
block holds at most `CODE_LINES` lines of `LINE_CHARS` (so a turn ends, well within
``--max-tokens``' default, instead of rambling on). Backticks are left out of
both: small models otherwise answer in Markdown fences inside the tags. A tool call is one
line of strict JSON naming the ``python`` tool, whose code may hold ``<`` but not ``</``.
"""

from __future__ import annotations

from tracegen.llm.grammar import Expr, Grammar, alt, chars, opt, ref, rep, seq

PROSE_LINES = 3
LINE_CHARS = 200
CODE_LINES = 40
CALL_CHARS = 1500
JSON_BLOCK = 50
_LINE = rep(alt(chars("^<`\\n"), seq("<", chars("^/a-z`\\n"))), 0, LINE_CHARS)
_PROSE = seq(ref("line"), rep(seq("\n", ref("line")), 0, PROSE_LINES - 1))
_CODE_LINE = rep(alt(chars("^<`\\n"), seq("<", chars("^/`\\n"))), 0, LINE_CHARS)
_CODE = seq(ref("code-line"), rep(seq("\n", ref("code-line")), 0, CODE_LINES - 1))
_HEX4 = rep(chars("0-9a-fA-F"), 4, 4)


def _escape(escaped: str) -> Expr:
    return seq("\\", alt(chars(escaped), seq("u", _HEX4)))


_JSON_CHAR = alt(
    chars(r'^"\\<\x00-\x1f'),
    # "<" then a character other than "/" (or an escape other than "\/"), so "</tool_call>"
    # cannot end a call early
    seq("<", alt(chars(r'^/"\\\x00-\x1f'), _escape(r'"\\bfnrt'))),
    _escape(r'"\\/bfnrt'),
)
_JSON_BLOCK = rep(_JSON_CHAR, JSON_BLOCK, JSON_BLOCK)
# Two levels, as llama.cpp caps the size of one repetition; whole blocks then a shorter tail,
# so a string is read one way only (blocks of any length let the sampler track every way of
# cutting it, which made each token of a tool call cost seconds).
_JSON_STRING = seq(rep(ref("json-block"), 0, CALL_CHARS // JSON_BLOCK - 1), ref("json-tail"))
_JSON_TAIL = rep(_JSON_CHAR, 0, JSON_BLOCK)
_WS = rep(chars(" \\n"), 0, 2)


def _block(tag: str, body: str) -> Expr:
    return seq(f"<{tag}>", ref(body), f"</{tag}>")


_BLOCKS: dict[str, Expr] = {
    "ws": _WS,
    "prose": _PROSE,
    "line": _LINE,
    "code-body": _CODE,
    "code-line": _CODE_LINE,
    "think": _block("think", "prose"),
    "code": _block("code", "code-body"),
    "verify": _block("verify", "prose"),
    "plan": _block("plan", "prose"),
    "reflection": _block("reflection", "prose"),
}


def _grammar(name: str, root: Expr, *uses: str) -> Grammar:
    """``root`` and the shared rules it ``uses`` (block rules and the bodies they contain)."""
    rules = ("ws", "line", "code-line", *uses)
    return Grammar(name, {"root": root, **{r: _BLOCKS[r] for r in rules}})


_W = ref("ws")
MARKERS = _grammar(
    "markers",
    seq(
        ref("think"),
        _W,
        ref("code"),
        _W,
        rep(seq(alt(ref("think"), ref("code")), _W)),
        ref("verify"),
    ),
    *("think", "code", "verify", "prose", "code-body"),
)
"""markers: think, code, then more thinks and codes in any order, one verify last."""

ONE_STEP = _grammar(
    "one-step",
    alt(ref("think"), ref("code"), ref("verify")),
    *("think", "code", "verify", "prose", "code-body"),
)
"""forced-interleave and interleaved-tools: exactly one step a turn."""

THINK_CODE = _grammar(
    "think-code", seq(ref("think"), _W, ref("code")), "think", "code", "prose", "code-body"
)
"""tool-feedback: a think, then the complete program."""

PLAN_CODE = _grammar(
    "plan-code",
    seq(opt(seq(ref("reflection"), _W)), ref("plan"), _W, ref("code")),
    *("reflection", "plan", "code", "prose", "code-body"),
)
"""structured: (a reflection on the last result,) a plan, the complete program."""

REFLECTION = _grammar("reflection", ref("reflection"), "reflection", "prose")
"""structured, after the tests pass: the last reflection."""

_CALL = seq(
    '<tool_call>{"name": "python", "arguments": {"code": "',
    ref("json-string"),
    '"}}</tool_call>',
)
_INLINE_RULES: dict[str, Expr] = {
    "prose": _PROSE,
    "line": _LINE,
    "code-line": _CODE_LINE,
    "json-string": _JSON_STRING,
    "json-block": _JSON_BLOCK,
    "json-tail": _JSON_TAIL,
    "code-body": _CODE,
    "ws": _WS,
    "after": alt(_CALL, ref("finish")),
    "finish": seq("</think>", _W, "<code>", ref("code-body"), "</code>"),
}
INLINE_START = Grammar(
    "inline-tools", {"root": seq("<think>", ref("prose"), ref("after")), **_INLINE_RULES}
)
"""inline-tools, first request: open the think, then a tool call or the final program."""

INLINE_CONTINUE = Grammar(
    "inline-tools/continue", {"root": seq(ref("prose"), ref("after")), **_INLINE_RULES}
)
"""inline-tools, after a tool response: more thinking, then a tool call or the program."""

INLINE_FINISH = Grammar(
    "inline-tools/finish",
    {"root": seq(ref("prose"), ref("finish")), **_INLINE_RULES, "after": ref("finish")},
)
"""inline-tools, once every execution is used: more thinking, then the program."""

GRAMMARS = {
    g.name: g
    for g in (
        *(MARKERS, ONE_STEP, THINK_CODE, PLAN_CODE, REFLECTION),
        *(INLINE_START, INLINE_CONTINUE, INLINE_FINISH),
    )
}
"""Every protocol grammar by name (what traces record, with its hash)."""
