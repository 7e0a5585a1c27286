"""Attacks on the judging itself, as a policy rewarded for passing would find them: its
control flow, its channel to the program, its comparisons, what the program leaves behind
in its own process and the timing of its answers. The second forgery corpus, beside
`tests.support.forgeries` (which attacks the harness, the report and memory).

Each attack is a wrong program for one of the problems below (wrong on every test's
arguments) and must fail every test; each of `RIGHT` must pass. Most attacks hard-code
nothing, but the channel attacks carry the right answers: they write them to the judge's
channel instead of returning them, so only a judge that binds each answer to its call
fails them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.forgeries import SQUARE
from tracegen.schema import Problem, TestCase

MAPPED = Problem(
    id="mapped",
    prompt="Write `square(x)` returning x * x.",
    entry_point="square",
    tests=[
        TestCase(
            name="all-map",
            kind="check",
            code=(
                "def check(candidate):\n"
                "    cases = [(1, 1), (2, 4), (3, 9)]\n"
                "    assert all(map(lambda c: candidate(c[0]) == c[1], cases))\n"
            ),
        ),
        TestCase(
            name="zip-loop",
            kind="assert",
            code=(
                "for got, want in zip(map(square, [1, 2, 3]), [1, 4, 9]):\n    assert got == want\n"
            ),
        ),
        TestCase(
            name="not-any",
            kind="assert",
            code="assert not any(square(a) != b for a, b in [(1, 1), (2, 4), (3, 9)])\n",
        ),
        TestCase(
            name="except-exception",
            kind="check",
            code=(
                "def check(candidate):\n"
                "    for x in (1, 2, 3):\n"
                "        try:\n            got = candidate(x)\n"
                "        except Exception:\n            got = None\n"
                "        assert got == x * x\n"
            ),
        ),
    ],
)
"""Tests written with ``map``, ``zip``, ``any`` and ``except Exception``: an exception that
steers control flow (``StopIteration`` ending the ``map``) would make them hold."""


def _io_problem(
    id: str, entry: str, prompt: str, ios: dict[str, tuple[Any, Any]], asserted: str
) -> Problem:
    """``io`` tests named by ``ios`` (name → argument and expected value), then one ``assert``."""
    tests = [TestCase(name=n, kind="io", args=[a], expected=e) for n, (a, e) in ios.items()]
    tests.append(TestCase(name="asserted", kind="assert", code=asserted))
    return Problem(id=id, prompt=prompt, entry_point=entry, tests=tests)


TEN = _io_problem(
    "ten",
    "times_ten",
    "Write `times_ten(n)` returning n * 10.",
    {"million": (1_000_000, 10_000_000), "seven": (7, 70)},
    "assert times_ten(2) == 20\n",
)
HALF = _io_problem(
    "half",
    "half",
    "Write `half(x)` returning x / 2.",
    {"five": (5, 2.5), "huge": (1e308, 5e307)},
    "assert abs(half(3) - 1.5) < 1e-9\n",
)
ODDS = _io_problem(
    "odds",
    "count_odd",
    "Write `count_odd(xs)` returning how many numbers of xs are odd.",
    {"one": ([1, 2], 1), "none": ([2, 4], 0)},
    "assert count_odd([1, 3]) == 2\n",
)
EVEN = _io_problem(
    "even",
    "is_even",
    "Write `is_even(n)` returning whether n is even.",
    {"two": (2, True), "three": (3, False)},
    "assert is_even(4) is True\n",
)
ROOT = Problem(
    id="root",
    prompt="Write `root(x)` returning the square root of x, raising ValueError if x < 0.",
    entry_point="root",
    tests=[
        TestCase(
            name="negative",
            kind="check",
            code=(
                "def check(candidate):\n"
                "    try:\n        candidate(-1)\n    except:\n        pass\n"
                "    else:\n        raise AssertionError('no error')\n"
            ),
        ),
    ],
)
"""A test with a bare ``except:``, which catches what the judge raises too."""
SORTED = Problem(
    id="sorted",
    prompt="Write `ascending(xs)` returning xs sorted.",
    entry_point="ascending",
    tests=[
        TestCase(name="three", kind="io", args=[[3, 1, 2]], expected=[1, 2, 3]),
        TestCase(name="check", kind="assert", code="assert ascending([2, 1]) == [1, 2]\n"),
    ],
)


USES_UTIL = Problem(
    id="uses-util",
    prompt="Write `square(x)` returning x * x.",
    entry_point="square",
    tests=[TestCase(name="t", kind="assert", code="assert square(3) == 9 and bool(util)\n")],
)
"""A test that takes the name ``util`` from the program (a module it imports)."""


@dataclass(frozen=True)
class Case:
    problem: Problem
    code: str


# Right on x == 1, raising ``what`` on every other argument: each MAPPED test calls with 2.
def _raising(what: str, prelude: str = "") -> Case:
    body = f"def square(x):\n    if x == 1:\n        return 1\n    raise {what}\n"
    return Case(MAPPED, prelude + body)


# The right answers of SQUARE's three calls (io 3, assert -2, check 5), as the channel
# carried them before answers were bound to calls, and with nonces guessed every way.
_INJECT = r"""
import json, os
_ANSWERS = [9, 4, 25]
def _lines(nonces):
    lines = [b'{"phase": "ready", "names": {"square": "call"}}\n']
    lines += [json.dumps(["ok", [v]]).encode() + b"\n" for v in _ANSWERS]
    for nonce in nonces:
        lines.append(json.dumps([nonce, "ready", {"square": "call"}]).encode() + b"\n")
        lines += [json.dumps([nonce, "ok", [v]]).encode() + b"\n" for v in _ANSWERS]
    return b"".join(lines)
_GUESSES = [None, "", 0, 1, 2, 3, "0" * 32, "f" * 32, True]
def _inject(fd=3, nonces=_GUESSES):
    try:
        os.write(fd, _lines(nonces))
    except OSError:
        pass
"""

# Finds the nonce of the call being answered, in the frames of whoever called us.
_CURRENT_NONCE = r"""
import sys
def _current_nonce():
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if type(value) is list and value and type(value[0]) is str and len(value[0]) == 32:
                return value[0]
        frame = frame.f_back
    return None
"""

_FAKE_REPORT = (
    '{"phase": "done", "tests": [{"name": "io", "passed": true, "plain": true, "value": 9},'
    ' {"name": "assert", "passed": true}, {"name": "check", "passed": true}]}'
)

ATTACKS: dict[str, Case] = {
    # --- exceptions that would steer the judge's control flow
    "raises-stop-iteration": _raising("StopIteration"),
    "raises-stop-async-iteration": _raising("StopAsyncIteration"),
    "raises-generator-exit": _raising("GeneratorExit"),
    "raises-keyboard-interrupt": _raising("KeyboardInterrupt"),
    "raises-system-exit": _raising("SystemExit(0)"),
    "raises-a-base-exception-subclass": _raising(
        "Quiet()", "class Quiet(BaseException):\n    pass\n"
    ),
    "raises-a-stop-iteration-named-like-a-value-error": _raising(
        "ValueError()", "class ValueError(StopIteration):\n    pass\n"
    ),
    "raises-a-base-exception-group": _raising(
        "BaseExceptionGroup('x', [StopIteration(), KeyboardInterrupt()])"
    ),
    "raises-an-exception-with-hostile-dunders": _raising(
        "Hostile()",
        "class Hostile(StopIteration):\n"
        "    __eq__ = lambda self, other: True\n"
        "    __hash__ = lambda self: 0\n"
        "    def __str__(self):\n        raise StopIteration\n"
        "    def __repr__(self):\n        raise SystemExit\n"
        "    @property\n"
        "    def __class__(self):\n        return AssertionError\n",
    ),
    "raises-an-exception-whose-args-are-hostile": _raising(
        "StopIteration(Liar())",
        "class Liar:\n"
        "    __eq__ = lambda self, other: True\n"
        "    def __str__(self):\n        raise KeyboardInterrupt\n"
        "    __repr__ = __str__\n",
    ),
    "raises-an-exception-whose-class-lies-about-itself": _raising(
        "Masked()",
        "class Meta(type):\n"
        "    @property\n"
        "    def __name__(cls):\n        return 'AssertionError'\n"
        "    @property\n"
        "    def __mro__(cls):\n        return (StopIteration, Exception, BaseException, object)\n"
        "class Masked(StopIteration, metaclass=Meta):\n    pass\n",
    ),
    "raises-with-a-forged-message": _raising(
        "StopIteration('\\n' + REPORT)", f"REPORT = {_FAKE_REPORT!r}\n"
    ),
    "returns-an-exception-instead-of-raising": Case(
        MAPPED, "def square(x):\n    return StopIteration(x * x)\n"
    ),
    # --- the judge's channel
    "injects-ready-and-answers-at-import": Case(
        SQUARE, _INJECT + "_inject()\n" + "def square(x):\n    return 0\n"
    ),
    "injects-then-exits-at-import": Case(
        SQUARE, _INJECT + "_inject()\nos._exit(0)\n" + "def square(x):\n    return 0\n"
    ),
    "thread-injects-answers": Case(
        SQUARE,
        _INJECT + "import threading, time\n"
        "def _forever():\n"
        "    while True:\n        _inject()\n        time.sleep(0.0005)\n"
        "threading.Thread(target=_forever, daemon=True).start()\n"
        "def square(x):\n    time.sleep(0.005)\n    return 0\n",
    ),
    "answers-the-hello-itself": Case(
        SQUARE,
        "import json, os\n"
        "_hello = json.loads(os.read(4, 1 << 16).splitlines()[0])\n"
        "os.write(3, json.dumps([_hello[0], 'ready', {'square': 'value'}]).encode() + b'\\n')\n"
        "square = 0\n",
    ),
    "answers-with-the-previous-nonce": Case(
        SQUARE,
        _INJECT + _CURRENT_NONCE + "_seen = []\n"
        "def square(x):\n"
        "    _seen.append(_current_nonce())\n"
        "    if len(_seen) > 1:\n"
        "        _inject(nonces=[_seen[-2]])\n"
        "    return 0\n",
    ),
    "answers-twice-from-inside-the-call": Case(
        SQUARE,
        _INJECT + _CURRENT_NONCE + "def square(x):\n"
        "    _inject(nonces=[_current_nonce()])\n"
        "    return 0\n",
    ),
    "forks-to-answer-twice": Case(
        SQUARE,
        "import os\ndef square(x):\n    os.fork()\n    return 0\n",
    ),
    "forked-child-writes-answers-later": Case(
        SQUARE,
        _INJECT + "import time\n"
        "if os.fork() == 0:\n"
        "    for _ in range(200):\n        _inject()\n        time.sleep(0.005)\n"
        "    os._exit(0)\n"
        "def square(x):\n    return 0\n",
    ),
    "swaps-in-a-calls-pipe-of-its-own": Case(
        SQUARE,
        _INJECT + "r, w = os.pipe()\n"
        "for n in _GUESSES:\n"
        "    os.write(w, json.dumps([n, 'call', 'square', [3], {}]).encode() + b'\\n')\n"
        "os.close(w)\n"
        "os.dup2(r, 4)\n"
        "def square(x):\n    return 9\n",
    ),
    "crosses-its-descriptors": Case(
        SQUARE, "import os\nos.dup2(3, 4)\ndef square(x):\n    return 0\n"
    ),
    "floods-the-judge-with-one-huge-line": Case(
        SQUARE,
        "import os\n"
        "def square(x):\n"
        "    try:\n        os.write(3, b'[' * (17 << 20))\n    except OSError:\n        pass\n"
        "    return 0\n",
    ),
    "drips-answers-a-byte-at-a-time": Case(
        SQUARE,
        _INJECT + "import threading, time\n"
        "def _drip():\n"
        "    for byte in _lines(_GUESSES):\n"
        "        os.write(3, bytes([byte]))\n"
        "threading.Thread(target=_drip, daemon=True).start()\n"
        "def square(x):\n    time.sleep(0.01)\n    return 0\n",
    ),
    "writes-a-fake-report-to-stdout-and-stderr": Case(
        SQUARE,
        f"import os\nREPORT = {_FAKE_REPORT!r}\n"
        "for fd in (1, 2):\n"
        "    os.write(fd, b'0' * 64 + b'\\n' + REPORT.encode() + b'\\nPASSED 3/3\\n')\n"
        "print('all tests passed', flush=True)\n"
        "def square(x):\n    return 0\n",
    ),
    "prints-fake-results-then-exits-in-the-call": Case(
        SQUARE,
        f"import os, sys\nREPORT = {_FAKE_REPORT!r}\n"
        "def square(x):\n"
        "    print(REPORT)\n    print('3 passed', file=sys.stderr)\n"
        "    sys.stdout.flush()\n    sys.stderr.flush()\n"
        "    os._exit(0)\n",
    ),
    # --- comparisons
    "float-within-a-millionth-of-an-int": Case(
        TEN, "def times_ten(n):\n    return n * 10 * (1 + 5e-7)\n"
    ),
    "bool-for-an-int": Case(ODDS, "def count_odd(xs):\n    return any(x % 2 for x in xs)\n"),
    "int-for-a-bool": Case(EVEN, "def is_even(n):\n    return int(n % 2 == 0)\n"),
    "nan-for-a-float": Case(HALF, "def half(x):\n    return float('nan')\n"),
    "infinity-for-a-huge-float": Case(HALF, "def half(x):\n    return float('inf')\n"),
    "an-int-too-big-for-a-float": Case(HALF, "def half(x):\n    return 10 ** 400\n"),
    "float-subclass-always-equal": Case(
        HALF,
        "class F(float):\n"
        "    __eq__ = lambda self, other: True\n    __ne__ = lambda self, other: False\n"
        "    __lt__ = lambda self, other: True\n    __hash__ = float.__hash__\n"
        "    __sub__ = lambda self, other: F(0.0)\n    __abs__ = lambda self: F(0.0)\n"
        "def half(x):\n    return F(0.0)\n",
    ),
    "subclass-nested-inside-a-list": Case(
        SORTED,
        "class Yes(int):\n"
        "    __eq__ = lambda self, other: True\n    __hash__ = int.__hash__\n"
        "class L(list):\n    __eq__ = lambda self, other: True\n"
        "def ascending(xs):\n    return [Yes(0)] * len(xs) if len(xs) > 2 else L()\n",
    ),
    "tuple-and-bytes-subclasses-always-equal": Case(
        SORTED,
        "class T(tuple):\n    __eq__ = lambda self, other: True\n    __hash__ = tuple.__hash__\n"
        "class B(bytes):\n    __eq__ = lambda self, other: True\n    __hash__ = bytes.__hash__\n"
        "def ascending(xs):\n    return T() if len(xs) > 2 else B()\n",
    ),
    "numbers-of-the-numeric-tower": Case(
        TEN,
        "from fractions import Fraction\nfrom decimal import Decimal\n"
        "def times_ten(n):\n    return Fraction(n * 10 + 1, 1) if n > 2 else Decimal(n * 10 + 1)\n",
    ),
    "a-refused-value-for-a-bare-except": Case(ROOT, "def root(x):\n    return iter(())\n"),
    "a-list-nested-twenty-thousand-deep": Case(
        SORTED,
        "def ascending(xs):\n"
        "    deep = []\n"
        "    for _ in range(20_000):\n        deep = [deep]\n"
        "    return deep\n",
    ),
    # --- what the program changes in its own process, hoping the judge shares it
    "shadows-all-map-zip-and-assertion-error": Case(
        MAPPED,
        "all = any = lambda *args: True\n"
        "map = zip = lambda *args: iter(())\n"
        "AssertionError = StopIteration\n"
        "__builtins__ = {'all': all}\n"
        "def square(x):\n    return 0\n",
    ),
    "patches-builtins-of-its-process": Case(
        MAPPED,
        "import builtins\n"
        "builtins.all = builtins.any = lambda *args: True\n"
        "builtins.map = lambda *args: iter(())\n"
        "builtins.AssertionError = StopIteration\n"
        "builtins.isinstance = lambda *args: True\n"
        "def square(x):\n    return 0\n",
    ),
    "binds-a-test-name-to-a-module-that-runs-on-import": Case(
        USES_UTIL,
        # A module object of the program's own making, named after a script of the
        # standard library (unittest's runs the tests it finds, then exits).
        "import types\nutil = types.ModuleType('unittest.__main__')\n"
        "def square(x):\n    return 0\n",
    ),
    "binds-a-test-name-to-cpythons-test-suite": Case(
        USES_UTIL,
        "import types\nutil = types.ModuleType('test.autotest')\ndef square(x):\n    return 0\n",
    ),
    "gc-callback-forges": Case(
        SQUARE,
        _INJECT + "import gc\n"
        "gc.callbacks.append(lambda phase, info: _inject())\n"
        "def square(x):\n    [[] for _ in range(5000)]\n    gc.collect()\n    return 0\n",
    ),
    "del-forges-when-collected": Case(
        SQUARE,
        _INJECT + "class Bomb:\n    def __del__(self):\n        _inject()\n"
        "def square(x):\n    Bomb()\n    return 0\n",
    ),
    "audit-hook-forges-on-every-event": Case(
        SQUARE,
        _INJECT + "import sys\n_busy = []\n"
        "def _hook(event, args):\n"
        "    if event == 'os.write' or _busy:\n        return\n"
        "    _busy.append(1)\n    _inject()\n    _busy.pop()\n"
        "sys.addaudithook(_hook)\n"
        "def square(x):\n    return 0\n",
    ),
    "settrace-in-every-thread-forges": Case(
        SQUARE,
        _INJECT + "import sys, threading\n"
        "def _trace(frame, event, arg):\n"
        "    if event == 'return' and frame.f_code.co_name == 'square':\n        _inject()\n"
        "    return _trace\n"
        "sys.settrace(_trace)\nthreading.settrace(_trace)\n"
        "def square(x):\n    return 0\n",
    ),
    "signal-handler-forges-on-a-timer": Case(
        SQUARE,
        _INJECT + "import signal\n"
        "signal.signal(signal.SIGALRM, lambda *a: _inject())\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)\n"
        "def square(x):\n    return 0\n",
    ),
    "atexit-and-excepthook-forge": Case(
        SQUARE,
        _INJECT + "import atexit, sys, threading\n"
        "atexit.register(_inject)\n"
        "sys.excepthook = lambda *a: _inject()\n"
        "threading.excepthook = lambda *a: _inject()\n"
        "def square(x):\n    raise SystemExit(0)\n",
    ),
    # --- timing
    "sleeps-until-the-timeout": Case(
        SQUARE, "import time\ndef square(x):\n    time.sleep(60)\n    return x * x\n"
    ),
}
"""Attack name → a wrong program for its problem. Every test must fail."""

RIGHT: dict[str, Case] = {
    "square": Case(SQUARE, "def square(x):\n    return x * x\n"),
    "mapped": Case(MAPPED, "def square(x):\n    return x * x\n"),
    "mapped-using-iterators-inside": Case(
        MAPPED,
        "def square(x):\n"
        "    it = iter([x * x])\n"
        "    value = next(it)\n"
        "    try:\n        next(it)\n    except StopIteration:\n        pass\n"
        "    return next(iter(()), value)\n",
    ),
    "root": Case(
        ROOT,
        "def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x ** 0.5\n",
    ),
    "ten-as-floats": Case(TEN, "def times_ten(n):\n    return float(n * 10)\n"),
    "half-with-rounding-noise": Case(HALF, "def half(x):\n    return x / 2 * (1 + 1e-12)\n"),
    "odds": Case(ODDS, "def count_odd(xs):\n    return sum(x % 2 for x in xs)\n"),
    "even": Case(EVEN, "def is_even(n):\n    return n % 2 == 0\n"),
    "sorted-a-tuple-for-io": Case(  # io tests compare tuples as lists
        SORTED, "def ascending(xs):\n    return tuple(sorted(xs)) if len(xs) > 2 else sorted(xs)\n"
    ),
    "square-with-a-thread-and-output": Case(
        SQUARE,
        "import threading\nprint('loading')\n"
        "def square(x):\n"
        "    box = []\n"
        "    t = threading.Thread(target=lambda: box.append(x * x))\n"
        "    t.start()\n    t.join()\n"
        "    print('square of', x)\n"
        "    return box[0]\n",
    ),
}
"""Right programs that look like some attacks (floats for ints, iterators, threads, output):
every test must pass."""
