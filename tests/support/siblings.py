"""Hostile samples that try to change the verdict of a right sample running beside them (fill
the temporary space, storm forks, hog memory, signal every process they can, take the names
of later executions' directories), and the right sample that must not notice them."""

from __future__ import annotations

from tracegen.sandbox import SandboxLimits

LIMITS = SandboxLimits(
    timeout_s=6.0, cpu_s=6, memory_mb=256, processes=32, file_size_mb=64, output_bytes=10_000
)
"""Short limits, 256 MB of memory (and of temporary space) per execution."""

RIGHT = """
import os, subprocess, tempfile, threading
with tempfile.TemporaryFile() as f:
    f.write(os.urandom(4 << 20))  # 4 MB in its temporary directory
with open("/dev/shm/x" if os.access("/dev/shm", os.W_OK) else "own", "wb") as f:
    f.write(b"x" * 4096)
done = []
thread = threading.Thread(target=lambda: done.append(sum(range(1000))))
thread.start()
thread.join()
assert done == [499500]
assert subprocess.run(["true"]).returncode == 0
if os.fork() == 0:
    os._exit(0)
os.wait()

def square(x):
    return x * x
"""
"""A right `tests.support.forgeries.SQUARE` solution that uses what an ordinary program
uses: its temporary directory, a thread, a subprocess, a fork."""

HOSTILE = {
    "fills its temporary space": """
import os, time
written = 0
for where in (os.environ.get("TMPDIR", "."), "/tmp", "/dev/shm", "/var/tmp"):
    try:
        for i in range(10_000):
            with open(os.path.join(where, f"fill-{i}"), "wb") as f:
                for _ in range(60):
                    f.write(b"x" * (1 << 20))
                    written += 1
    except OSError:
        pass
print(written, flush=True)
time.sleep(3)
""",
    "storms forks": """
import os, time
children = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(4)
        os._exit(0)
    children += 1
print(children, flush=True)
time.sleep(4)
""",
    "hogs memory": """
import os, time
for _ in range(3):
    if os.fork() == 0:
        try:
            block = bytearray(200 << 20)  # touched: 200 MB resident each
        except MemoryError:
            pass
        time.sleep(4)
        os._exit(0)
time.sleep(4)
""",
    "signals every process it can": """
import os, signal, time
for sig in (signal.SIGSTOP, signal.SIGKILL):
    for _ in range(20):
        try:
            os.kill(-1, sig)
        except OSError:
            pass
        time.sleep(0.1)
""",
    "takes later executions' names": """
import os, time
for base in ("/tmp", os.path.dirname(os.getcwd()), os.getcwd()):
    for i in range(1, 200):
        for name in (f"run-{i}", f"judge-{i}"):
            try:
                os.mkdir(os.path.join(base, name))
            except OSError:
                pass
time.sleep(1)
""",
}
"""Hostile samples, each running for a few seconds beside right ones."""
