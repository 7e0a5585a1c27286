"""Programs for the judge's limits on a whole execution: what a program may not do by
spreading its work over processes (a chain of forks that each stay under the CPU limit,
memory split over children), and right programs that start processes and threads or
reserve address space they never touch, which must stay ``accepted``."""

from __future__ import annotations

from tracegen.schema import Problem, ProgramLimits, TestCase

LIMITED = Problem(
    id="sum-limited",
    prompt="Read two integers a and b; print a + b.",
    limits=ProgramLimits(time_s=1, memory_mb=64),
    tests=[TestCase(name="public", kind="stdio", input="2 3\n", expected="5\n")],
)
"""One second of CPU and 64 MB for everything the execution holds."""

TIGHT = Problem(
    id="sum-tight",
    prompt="Read two integers a and b; print a + b.",
    limits=ProgramLimits(time_s=2, memory_mb=32),
    tests=[TestCase(name="public", kind="stdio", input="2 3\n", expected="5\n")],
)
"""32 MB: less than g++ needs to compile a program that includes ``bits/stdc++.h``."""
TIGHT_SANDBOX_MB = 64
"""A sandbox's memory limit under which such a compile does not fit either."""
STDCPP_SUM = r"""
#include <bits/stdc++.h>
using namespace std;
int main() {
    long long a, b;
    cin >> a >> b;
    vector<long long> v{a, b};
    cout << accumulate(v.begin(), v.end(), 0LL) << endl;
}
"""
"""Right under `TIGHT`: its compile has its own memory limit, not the problem's nor the
sandbox's."""

GENEROUS = Problem(
    id="sum-generous",
    prompt="Read two integers a and b; print a + b.",
    limits=ProgramLimits(time_s=4, memory_mb=512),
    tests=[TestCase(name="public", kind="stdio", input="2 3\n", expected="5\n")],
)

FORK_CHAIN = """\
import os, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
a, b = map(int, input().split())
r, w = os.pipe()
if os.fork() == 0:  # each link burns just under the limit, forks the next and exits
    os.close(r)
    for _ in range(4):
        burn(0.5)
        while True:  # a fork refused for a moment must not end the chain early
            try:
                child = os.fork()
                break
            except OSError:
                time.sleep(0.01)
        if child:
            os._exit(0)
    os.write(w, b"x")  # the chain is complete
    os._exit(0)
os.close(w)
done = os.read(r, 1)  # the last link's word; the links are never waited for
os.read(r, 1)  # its exit
if done == b"x":  # a chain cut short answers nothing: it is never accepted
    print(a + b)
"""
"""2 s of CPU in all, no process over 0.5 s: a one-second problem's verdict is ``time``. (Each
link stays well under the one-second `RLIMIT_CPU` of each process, which the kernel checks on
tick-sampled time: on a loaded host it fired after 0.7 s that `time.process_time` measured.)"""
SHORT_FORK_CHAIN = FORK_CHAIN.replace("burn(0.5)", "burn(0.35)")
"""1.4 s in all: over one second, well within the wall-clock limit even on a loaded host."""

FORK_CHAIN_CPP = r"""
#include <cstdio>
#include <ctime>
#include <unistd.h>
static void burn(double s) {
    clock_t end = clock() + (clock_t)(s * CLOCKS_PER_SEC);
    volatile unsigned long x = 0;
    while (clock() < end) x++;
}
int main() {
    long long a, b;
    if (scanf("%lld %lld", &a, &b) != 2) return 1;
    int fd[2];
    if (pipe(fd)) return 1;
    if (fork() == 0) {
        close(fd[0]);
        for (int i = 0; i < 4; i++) {
            burn(0.5);
            pid_t child;
            while ((child = fork()) < 0) usleep(10000);
            if (child) _exit(0);
        }
        if (write(fd[1], "x", 1) != 1) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    char c, done = 0;
    while (read(fd[0], &c, 1) > 0) done = c;
    if (done == 'x') printf("%lld\n", a + b);
}
"""

SPLIT_MEMORY = """\
import os, time
a, b = map(int, input().split())
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        held = bytearray(40 << 20)
        for i in range(0, len(held), 4096):
            held[i] = 1
        time.sleep(1.5)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print(a + b)
"""
"""Four children of 40 MB each under a 64 MB problem: ``memory``."""

SHM_MEMORY = """\
import mmap, time
a, b = map(int, input().split())
shared = mmap.mmap(-1, 160 << 20)  # shared anonymous memory, written: 160 MB held
for i in range(0, len(shared), 4096):
    shared[i] = 1
time.sleep(1.0)
print(a + b)
"""

FILES_THEN_ELSEWHERE = """\
import os, time
a, b = map(int, input().split())
written = 0
for where in ({where!r}, "."):
    try:
        while written < 200:  # 8 MB files: each under the sandbox's file size limit
            with open(os.path.join(where, f"held-{{written}}"), "wb") as f:
                f.write(b"x" * (8 << 20))
            written += 8
    except OSError:  # it may not write there: its working directory then
        continue
os.chdir("/")  # where the program is no longer says where its files are
time.sleep(1.5)
print(a + b)
"""

OWN_FILES = {
    "files-then-elsewhere": FILES_THEN_ELSEWHERE.format(where="."),
    "shm-files-then-elsewhere": FILES_THEN_ELSEWHERE.format(where="/dev/shm"),
    "tmp-files-then-elsewhere": FILES_THEN_ELSEWHERE.format(where="/tmp"),
}
"""Python programs for `LIMITED` that write 200 MB of files in a file system of the
execution's own (its working directory, ``/dev/shm``, ``/tmp``, or its working directory
where it may not write there), then move to ``/`` while they hold them: ``memory``. (Under
bubblewrap and the built-in isolation: the rlimit-only isolation has no file system of the
execution's own.)"""

HOSTILE = {"fork-chain": FORK_CHAIN, "split-memory": SPLIT_MEMORY, "shm-memory": SHM_MEMORY}
"""Python programs for `LIMITED`, each of which must be judged by its limit."""
HOSTILE_OUTCOMES = {"fork-chain": "time", "split-memory": "memory", "shm-memory": "memory"}

RIGHT_UNDER_LIMITED = {
    "forty-threads": (
        "import threading\n"
        "a, b = map(int, input().split())\n"
        "out, barrier = [], threading.Barrier(40)\n"
        "def work():\n"
        "    barrier.wait()\n"
        "    out.append(1)\n"
        "threads = [threading.Thread(target=work) for _ in range(40)]\n"
        "for t in threads:\n    t.start()\n"
        "for t in threads:\n    t.join()\n"
        "print(a + b + len(out) - 40)\n"
    ),
    "reserved-address-space": (
        "import mmap\n"
        "a, b = map(int, input().split())\n"
        "reserved = mmap.mmap(-1, 2 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
        "reserved[0] = 1\n"
        "print(a + b)\n"
    ),
    "moves-to-the-root": (
        "import os, time\n"
        "a, b = map(int, input().split())\n"
        "os.chdir('/')\n"
        "time.sleep(0.3)\n"
        "print(a + b)\n"
    ),
    "short-children": (
        "import os\n"
        "a, b = map(int, input().split())\n"
        "for _ in range(8):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "print(a + b)\n"
    ),
}
"""Right programs under `LIMITED`'s 64 MB: threads and reservations hold no memory."""

RIGHT_UNDER_GENEROUS = {
    "four-workers": (
        "import multiprocessing\n"
        "def square(n):\n    return n * n\n"
        "if __name__ == '__main__':\n"
        "    a, b = map(int, input().split())\n"
        "    with multiprocessing.Pool(4) as pool:\n"
        "        squares = pool.map(square, range(100))\n"
        "    print(a + b + sum(squares) - 328350)\n"
    ),
    "four-workers-busy": (
        "import os\n"
        "def burn():\n"
        "    x = 0\n"
        "    for i in range(200000):\n        x += i\n"
        "a, b = map(int, input().split())\n"
        "children = []\n"
        "for _ in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n        burn()\n        os._exit(0)\n"
        "    children.append(pid)\n"
        "for pid in children:\n    os.waitpid(pid, 0)\n"
        "print(a + b)\n"
    ),
}
"""Right programs under `GENEROUS` (four seconds, 512 MB)."""

SCRIPT_LIMITS = {"timeout_s": 10.0, "cpu_s": 10, "memory_mb": 128}
"""`SandboxLimits` for the scripts below: the sandbox's own memory limit, not a problem's."""
SCRIPTS = {
    "split-memory": (
        "import os, time\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        held = bytearray(60 << 20)\n"
        "        time.sleep(2)\n"
        "        os._exit(0)\n"
        "for _ in range(4):\n    os.wait()\n"
    ),
    "forty-threads": (
        "import threading\n"
        "out, barrier = [], threading.Barrier(40)\n"
        "def work():\n    barrier.wait()\n    out.append(bytearray(1 << 20))\n"
        "threads = [threading.Thread(target=work) for _ in range(40)]\n"
        "for t in threads:\n    t.start()\n"
        "for t in threads:\n    t.join()\n"
        "print(len(out))\n"
    ),
}
"""Scripts (`Sandbox.run_code`) under `SCRIPT_LIMITS`: 240 MB over four processes is
``memory``; 40 threads holding 40 MB are ``ok``."""
SCRIPT_STATUS = {"split-memory": "memory", "forty-threads": "ok"}
