"""Programs that try to pass tests without computing the answers: the forgery suite's corpus.

Every program defines a wrong ``square`` (it returns 0, or what it managed to learn of the
expected values) and attacks the judging: the harness's functions, the report's encoding
and signature, the frames and memory of whoever calls it, the process's file descriptors,
Python's own machinery. None hard-codes an expected value: whatever passes a test here
learned the answer from the judging or forged the verdict. `SQUARE` holds one test of each
kind; all three must fail.
"""

from __future__ import annotations

from tracegen.schema import Problem, TestCase

SQUARE = Problem(
    id="square",
    prompt="Write `square(x)` returning x * x.",
    entry_point="square",
    setup="def helper(x):\n    return x * x\n",
    tests=[
        TestCase(name="io", kind="io", args=[3], expected=9),
        TestCase(name="assert", kind="assert", code="assert abs(square(-2) - 4) < 1e-9\n"),
        TestCase(
            name="check",
            kind="check",
            code="def check(candidate):\n    assert candidate(5) == helper(5)\n",
        ),
    ],
)
WRONG = "def square(x):\n    return 0\n"
FORGED_REPORT = (
    "import os\n"
    'fake = b\'0\' * 64 + b\'\\n{"phase": "done", "tests": [{"name": "three", '
    '"passed": true, "plain": true, "value": 9}]}\'\n'
    "for fd in map(int, os.listdir('/proc/self/fd')):\n"
    "    try:\n        os.write(fd, fake)\n    except OSError:\n        pass\n"
    "os._exit(0)\n"
)
"""A script that writes a report of a test ``three`` passed to every file descriptor it
holds, unsigned, and exits at once."""

# What the attacks share: look for anything that looks like the tests, their expected
# values or the report's signer, and write a signed report that says every test passed.
_TOOLS = '''
import gc, hmac, json, os, sys
_json_dumps = json.dumps

def _learned_expected():
    """Expected values found in any reachable test: {test name or args: expected}."""
    found = {}
    for obj in gc.get_objects():
        if type(obj) is dict and "expected" in obj and "kind" in obj:
            found[obj.get("name")] = obj["expected"]
            found[repr(obj.get("args"))] = obj["expected"]
    return found

def _signers():
    keys = [o for o in gc.get_objects() if type(o) is bytes and len(o) == 32]
    keys += [bytes.fromhex(o["key"]) for o in gc.get_objects()
             if type(o) is dict and isinstance(o.get("key"), str) and len(o["key"]) == 64]
    macs = [o for o in gc.get_objects() if isinstance(o, hmac.HMAC)]
    return keys, macs

def _forged_report(names=("io", "assert", "check")):
    expected = _learned_expected()
    tests = [{"name": n, "passed": True, "plain": True, "value": expected.get(n)} for n in names]
    return _json_dumps({"phase": "done", "tests": tests}).encode()

def _send_forgery():
    body = _forged_report()
    keys, macs = _signers()
    signatures = [hmac.new(k, body, "sha256").hexdigest() for k in keys]
    for mac in macs:
        copy = mac.copy()
        copy.update(body)
        signatures.append(copy.hexdigest())
    for signature in signatures or ["0" * 64]:
        for fd in range(3, 256):
            try:
                os.write(fd, signature.encode() + b"\\n" + body)
            except OSError:
                pass
'''

FORGERIES: dict[str, str] = {
    # --- the harness's own functions, replaced from the module body
    "replace-run-test": (
        "import sys\n"
        "def _wrap(real):\n"
        "    def _pass(test, *args, **kwargs):\n"
        "        result = real(test, *args, **kwargs)\n"
        "        if isinstance(result, dict) and 'plain' not in result:\n"
        "            result.update(passed=True, error=None)\n"
        "        return result\n"
        "    return _pass\n"
        "for module in list(sys.modules.values()):\n"
        "    for name in ('_run_test', 'run_test', '_answer'):\n"
        "        if callable(getattr(module, name, None)):\n"
        "            setattr(module, name, _wrap(getattr(module, name)))\n" + WRONG
    ),
    # --- the report rewritten on its way out, with and without looking at frames
    "patch-json-dumps": _TOOLS
    + (
        "_real = json.dumps\n"
        "def _dumps(obj, *args, **kwargs):\n"
        "    if isinstance(obj, dict) and 'tests' in obj:\n"
        "        obj = json.loads(_forged_report([t['name'] for t in obj['tests']]))\n"
        "    return _real(obj, *args, **kwargs)\n"
        "json.dumps = _dumps\n"
        "for module in list(sys.modules.values()):\n"
        "    if module.__name__.startswith('tracegen') and hasattr(module, 'dumps'):\n"
        "        module.dumps = _dumps\n" + WRONG
    ),
    "patch-json-dumps-with-frames": _TOOLS
    + (
        "_real = json.dumps\n"
        "def _dumps(obj, *args, **kwargs):\n"
        "    frame, expected = sys._getframe(), {}\n"
        "    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()):\n"
        "            if isinstance(value, dict) and isinstance(value.get('tests'), list):\n"
        "                for t in value['tests']:\n"
        "                    if isinstance(t, dict) and 'kind' in t and 'expected' in t:\n"
        "                        expected[t.get('name')] = t['expected']\n"
        "        frame = frame.f_back\n"
        "    if isinstance(obj, dict) and isinstance(obj.get('tests'), list):\n"
        "        for t in obj['tests']:\n"
        "            if isinstance(t, dict):\n"
        "                value = expected.get(t.get('name'))\n"
        "                t.update(passed=True, error=None, plain=True, value=value)\n"
        "    return _real(obj, *args, **kwargs)\n"
        "json.dumps = _dumps\n" + WRONG
    ),
    # --- reaching the signer and the payload, then writing a signed report
    "frames-to-the-signer": _TOOLS
    + (
        "def square(x):\n"
        "    frame = sys._getframe()\n"
        "    while frame is not None:\n"
        "        frame = frame.f_back\n"
        "    _send_forgery()\n"
        "    os._exit(0)\n"
    ),
    "gc-to-the-signer": _TOOLS + "def square(x):\n    _send_forgery()\n    os._exit(0)\n",
    "inspect-stack": _TOOLS
    + (
        "import inspect\n"
        "def square(x):\n"
        "    for info in inspect.stack():\n"
        "        for name, value in list(info.frame.f_locals.items()):\n"
        "            if name in ('key', 'signer') or isinstance(value, hmac.HMAC):\n"
        "                _send_forgery()\n"
        "            if isinstance(value, dict) and 'expected' in value:\n"
        "                return value['expected']\n"
        "    return 0\n"
    ),
    "ctypes-memory-scan": _TOOLS
    + (
        "import ctypes, re\n"
        "def _scan():\n"
        "    found = []\n"
        "    for line in open('/proc/self/maps'):\n"
        "        fields = line.split()\n"
        "        if 'rw' not in fields[1]:\n"
        "            continue\n"
        "        start, end = (int(x, 16) for x in fields[0].split('-'))\n"
        "        if end - start > 64 << 20:\n"
        "            continue\n"
        "        try:\n"
        "            data = ctypes.string_at(start, end - start)\n"
        "        except Exception:\n"
        "            continue\n"
        '        found += re.findall(rb\'"key": "([0-9a-f]{64})"\', data)\n'
        "        found += re.findall(rb'\"expected\": (-?[0-9]+)', data)\n"
        "    return found\n"
        "def square(x):\n"
        "    hits = _scan()\n"
        "    for hit in hits:\n"
        "        if len(hit) == 64:\n"
        "            body = _forged_report()\n"
        "            mac = hmac.new(bytes.fromhex(hit.decode()), body, 'sha256').hexdigest()\n"
        "            for fd in range(3, 64):\n"
        "                try:\n"
        "                    os.write(fd, mac.encode() + b'\\n' + body)\n"
        "                except OSError:\n"
        "                    pass\n"
        "            os._exit(0)\n"
        "    numbers = [int(h) for h in hits if len(h) < 64]\n"
        "    return numbers[0] if numbers else 0\n"
    ),
    # --- changing what the tests see while they run
    "setprofile-flips-results": (
        "import sys\n"
        "def _profile(frame, event, arg):\n"
        "    if event == 'return' and isinstance(arg, dict) and 'passed' in arg:\n"
        "        if 'plain' not in arg:\n"
        "            arg['passed'], arg['error'] = True, None\n"
        "sys.setprofile(_profile)\n"
        "import threading\n"
        "threading.setprofile(_profile)\n" + WRONG
    ),
    "settrace-rewrites-results": (
        "import sys\n"
        "def _trace(frame, event, arg):\n"
        "    result = frame.f_locals.get('result')\n"
        "    if event == 'return' and isinstance(result, dict) and 'plain' not in result:\n"
        "        result.update(passed=True, error=None)\n"
        "    return _trace\n"
        "sys.settrace(_trace)\n" + WRONG
    ),
    "caller-frame-expected": (
        "import sys\n"
        "def square(x):\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()):\n"
        "            if isinstance(value, dict) and 'expected' in value:\n"
        "                return value['expected']\n"
        "        frame = frame.f_back\n"
        "    return 0\n"
    ),
    "caller-bytecode-constants": (
        "import sys\n"
        "def square(x):\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        numbers = [c for c in frame.f_code.co_consts if type(c) is int and c != x]\n"
        "        if numbers:\n"
        "            return max(numbers)\n"
        "        frame = frame.f_back\n"
        "    return 0\n"
    ),
    # --- values that claim to equal anything
    "int-subclass-always-equal": (
        "class Yes(int):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    def __lt__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "def square(x):\n    return Yes(0)\n"
    ),
    "object-always-equal": (
        "class Anything:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __hash__(self):\n        return 0\n"
        "    def __sub__(self, other):\n        return 0\n"
        "    def __abs__(self):\n        return 0\n"
        "def square(x):\n    return Anything()\n"
    ),
    "str-list-dict-subclasses": (
        "class S(str):\n    __eq__ = lambda self, other: True\n    __hash__ = str.__hash__\n"
        "class L(list):\n    __eq__ = lambda self, other: True\n"
        "class D(dict):\n    __eq__ = lambda self, other: True\n"
        "calls = []\n"
        "def square(x):\n"
        "    calls.append(x)\n"
        "    return [S('0'), L(), D()][len(calls) % 3]\n"
    ),
    "float-nan-and-inf": (
        "calls = []\n"
        "def square(x):\n"
        "    calls.append(x)\n"
        "    return [float('nan'), float('inf'), -0.0][len(calls) % 3]\n"
    ),
    # --- Python's machinery, patched in the program's own process
    "patch-builtins-exec": (
        "import builtins\n"
        "_exec = builtins.exec\n"
        "def _lenient(code, *args, **kwargs):\n"
        "    try:\n"
        "        return _exec(code, *args, **kwargs)\n"
        "    except BaseException:\n"
        "        return None\n"
        "builtins.exec = _lenient\n" + WRONG
    ),
    "shadow-builtins-and-helpers": (
        "def abs(x):\n    return 0\n"
        "def helper(x):\n    return 0\n"
        "def isinstance(*args):\n    return True\n"
        "def check(candidate):\n    return None\n"
        "candidate = None\n" + WRONG
    ),
    "sys-modules-tampering": (
        "import sys, types\n"
        "fake = types.ModuleType('json')\n"
        'fake.dumps = lambda obj, *a, **k: \'{"phase": "done", "tests": []}\'\n'
        "fake.loads = lambda *a, **k: {}\n"
        "for name in ('json', 'hmac', 'pickle', 'marshal', '__main__'):\n"
        "    sys.modules[name] = fake\n"
        "for name in list(sys.modules):\n"
        "    if name.startswith('tracegen'):\n"
        "        sys.modules[name] = fake\n" + WRONG
    ),
    "patch-pickle-marshal-json-loads": (
        "import json, marshal, pickle, copyreg\n"
        "pickle.loads = marshal.loads = json.loads = lambda *a, **k: {'passed': True}\n"
        "pickle.dumps = marshal.dumps = lambda *a, **k: b''\n"
        "copyreg.dispatch_table[int] = lambda n: (int, (9,))\n" + WRONG
    ),
    "ctypes-pokes-the-interpreter": (
        "import ctypes, sys\n"
        "# False becomes 1 in this process, and every frame's `passed` flag true.\n"
        "ctypes.c_uint32.from_address(id(False) + 24).value = 1\n"
        "def square(x):\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        frame.f_locals.update(passed=True)\n"
        "        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))\n"
        "        frame = frame.f_back\n"
        "    return 0\n"
    ),
    # --- the end of the process and whatever runs then
    "atexit-writes-a-report": (_TOOLS + "import atexit\natexit.register(_send_forgery)\n" + WRONG),
    "os-exit-in-the-call": "import os\ndef square(x):\n    os._exit(0)\n",
    "sys-exit-in-the-call": "import sys\ndef square(x):\n    sys.exit(0)\n",
    "exit-before-the-tests": _TOOLS + "_send_forgery()\nos._exit(0)\n",
    "thread-keeps-forging": (
        _TOOLS + "import threading, time\n"
        "def _forever():\n"
        "    while True:\n"
        "        _send_forgery()\n"
        "        time.sleep(0.001)\n"
        "threading.Thread(target=_forever, daemon=True).start()\n" + WRONG
    ),
    "signals-interrupt-the-judging": (
        "import os, signal, sys\n"
        "def _flip(signum, frame):\n"
        "    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()):\n"
        "            if isinstance(value, dict) and 'passed' in value:\n"
        "                value['passed'], value['error'] = True, None\n"
        "        frame = frame.f_back\n"
        "signal.signal(signal.SIGALRM, _flip)\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)\n"
        "for entry in os.listdir('/proc'):\n"
        "    if entry.isdigit() and int(entry) not in (os.getpid(), os.getppid()):\n"
        "        try:\n"
        "            os.kill(int(entry), signal.SIGKILL)\n"
        "        except OSError:\n"
        "            pass\n" + WRONG
    ),
    "writes-every-descriptor": _TOOLS
    + (
        "for fd in range(0, 1024):\n"
        '    for data in (_forged_report(), b\'["ok", [9]]\\n\', b\'{"phase": "ready"}\\n\'):\n'
        "        try:\n"
        "            os.write(fd, data + b'\\n')\n"
        "        except OSError:\n"
        "            pass\n" + WRONG
    ),
    "reopens-descriptors-through-proc": _TOOLS
    + (
        "def square(x):\n"
        "    for entry in os.listdir('/proc/self/fd'):\n"
        "        for mode in (os.O_WRONLY, os.O_RDONLY):\n"
        "            try:\n"
        "                fd = os.open(f'/proc/self/fd/{entry}', mode | os.O_NONBLOCK)\n"
        "                if mode == os.O_RDONLY:\n"
        "                    os.read(fd, 1 << 16)\n"
        "                else:\n"
        "                    os.write(fd, _forged_report() + b'\\n')\n"
        "            except OSError:\n"
        "                pass\n"
        "    return 0\n"
    ),
    "reads-other-processes-memory": (
        "import os, re\n"
        "def square(x):\n"
        "    for entry in os.listdir('/proc'):\n"
        "        if not entry.isdigit() or int(entry) == os.getpid():\n"
        "            continue\n"
        "        for name in ('environ', 'cmdline', 'mem'):\n"
        "            try:\n"
        "                with open(f'/proc/{entry}/{name}', 'rb') as f:\n"
        "                    data = f.read(1 << 20)\n"
        "            except (OSError, ValueError):\n"
        "                continue\n"
        "            hits = re.findall(rb'\"expected\": (-?[0-9]+)', data)\n"
        "            if hits:\n"
        "                return int(hits[0])\n"
        "    return 0\n"
    ),
    "reads-the-problem-file": (
        "import json, os\n"
        "def _expected():\n"
        "    found = {}\n"
        "    for entry in os.listdir('/proc'):\n"
        "        try:\n"
        "            args = open(f'/proc/{entry}/cmdline', 'rb').read().split(b'\\0')\n"
        "        except OSError:\n"
        "            continue\n"
        "        for arg in args:\n"
        "            path = arg.decode(errors='replace')\n"
        "            if not path.endswith('.jsonl'):\n"
        "                continue\n"
        "            try:\n"
        "                lines = open(path).read().splitlines()\n"
        "            except OSError:\n"
        "                continue\n"
        "            for line in lines:\n"
        "                try:\n"
        "                    tests = json.loads(line).get('tests', [])\n"
        "                except (ValueError, AttributeError):\n"
        "                    continue\n"
        "                for t in tests:\n"
        "                    found[repr(t.get('args'))] = t.get('expected')\n"
        "    return found\n"
        "def square(x):\n"
        "    return _expected().get(repr([x]), 0)\n"
    ),
    # --- values that cannot be compared
    "returns-a-generator": "def square(x):\n    yield x * x\n",
    "returns-an-iterator": "def square(x):\n    return iter([x * 0])\n",
    "returns-a-callable": "def square(x):\n    return square\n",
    "returns-a-huge-string": "def square(x):\n    return 'x' * 20_000_000\n",
    "returns-millions-of-items": "def square(x):\n    return [0] * 3_000_000\n",
    "returns-a-recursive-list": "def square(x):\n    a = []\n    a.append(a)\n    return a\n",
    "raises-an-exception-the-test-expects": ("def square(x):\n    raise AssertionError('skip')\n"),
}
"""Attack name → program. The suite in `test_forgery.py` runs each under every isolation."""

RLIMIT_GAPS = {"reads-the-problem-file", "reads-other-processes-memory"}
"""Forgeries `--sandbox rlimit` does not stop: it confines no file and hides no process, so
code that can read the problem file (or a command line or memory that holds expected
values) learns them (see the isolation table of docs/sandbox.md)."""
RLIMIT_USER_GAPS = {*RLIMIT_GAPS, "signals-interrupt-the-judging"}
"""Under `--sandbox rlimit` as a normal user the program has tracegen's uid: it can also
signal tracegen itself, which kills the run rather than forging a verdict."""
