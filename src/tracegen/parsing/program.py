"""Programs written in several `<code>` blocks, and what a finished program looks like."""

from __future__ import annotations

import ast
import re

_TOP_LEVEL_NAME = re.compile(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)", re.MULTILINE)
_RETURNS = (ast.Return, ast.Yield, ast.YieldFrom)


def clean_block(text: str) -> str:
    """A code block without surrounding blank lines; indentation is kept (blocks continue)."""
    lines = text.rstrip().splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


def _defined(block: str) -> set[str]:
    return set(_TOP_LEVEL_NAME.findall(block))


class Program:
    """Blocks appended in order; a block that defines again a name an earlier block defined
    replaces that block and everything after it (the model rewrote that part)."""

    def __init__(self) -> None:
        self.blocks: list[str] = []

    def add(self, block: str) -> None:
        block = clean_block(block)
        if not block:
            return
        names = _defined(block)
        for i, old in enumerate(self.blocks):
            if names & _defined(old):
                del self.blocks[i:]
                break
        self.blocks.append(block)

    @property
    def text(self) -> str:
        return "\n".join(self.blocks) + "\n" if self.blocks else ""


def defines(code: str, name: str | None) -> bool:
    """Whether ``code`` defines ``name`` at top level (textually; the code may not parse)."""
    return name is not None and name in _defined(code)


_MAIN = re.compile(r"\bint\s+main\s*\(")


def is_complete(code: str, entry_point: str | None) -> bool:
    """The code parses and defines the entry point with a ``return`` (or, without an entry
    point, prints something)."""
    if entry_point is None and _MAIN.search(code):  # a C++ program: main, braces closed
        depth = 0
        for char in code:
            depth += (char == "{") - (char == "}")
            if depth < 0:
                return False
        return depth == 0 and "}" in code
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    if entry_point is None:
        return any(
            (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id in ("print", "input")
            )
            or (isinstance(n, ast.Attribute) and n.attr in ("write", "stdin"))
            for n in ast.walk(tree)
        )
    if "." in entry_point:  # Solution.method: the class defines the method
        owner, method = entry_point.split(".", 1)
        return any(
            isinstance(n, ast.ClassDef)
            and n.name == owner
            and is_complete("\n".join(ast.unparse(x) for x in n.body), method)
            for n in tree.body
        )
    return any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and n.name == entry_point
        and any(isinstance(x, _RETURNS) for x in ast.walk(n))
        for n in tree.body
    )


def final_program(programs: list[str], entry_point: str | None) -> str | None:
    """The program that is judged among ``programs`` (in the order written): the last that
    defines the entry point, else the last one."""
    defining = [p for p in programs if defines(p, entry_point)]
    chosen = defining or programs
    return chosen[-1] if chosen else None
