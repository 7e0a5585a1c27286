"""Throughput of `tracegen run` against the loopback Ollama server, and its memory.

For each server parallelism P the fake server answers every request after a fixed latency,
at most P at a time (like OLLAMA_NUM_PARALLEL). A run of N ``markers`` episodes (one model
turn each, then one sandboxed test run) is timed from start to exit, and compared with the
ideal bound P / (latency × turns per episode). A finite run of N episodes cannot beat
N / (ceil(N / P) × latency × turns) either (the last round is partly empty): both ratios
are printed. The last rows are the same work one request at a time (as the original
scripts did), then model turns alone (the backend's chat requests, each answer parsed with
its logprobs, no sandbox and no trace: "CPU ms/turn" of a multi-turn mode's turn), and peak
RSS for 200 and 2000 episodes.

    python benchmarks/throughput.py                  # docs/performance.md (a few minutes)
    python benchmarks/throughput.py --quick          # fewer episodes, for a smoke check
    python benchmarks/throughput.py --server openai  # the OpenAI-compatible stand-in (vLLM)
    python benchmarks/throughput.py --parsers        # model turns alone, by HTTP parser

``--parsers`` prints the CPU per model turn of the same transport framing answers with llhttp
(httptools, what tracegen uses), with h11 (httpx's parser) in its place, and of the hand-written
parser tracegen had before (`HAND_WRITTEN`, a checkout of that commit).

The server runs in this process and each run in a child process, so the peak RSS printed
is that of tracegen alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), os.environ.get("TRACEGEN_BENCH_SRC") or str(ROOT / "src")]

from benchmarks.common import ADD_ANSWER, write_add_problems  # noqa: E402

PREVIOUS_RELEASE = "3fdc947"
"""The commit whose figures are printed beside today's (``--previous``)."""
HAND_WRITTEN = "fd90a8b"
"""The last commit whose transport parsed HTTP by hand (``llm/lanes.py``)."""


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_case(url: str, episodes: int, concurrency: int) -> dict[str, float]:
    """One run against the server at ``url``, in this process; returns its measurements.
    A short run first imports what a run needs, so the CPU per turn is that of a run in
    progress (start-up is `cli_startup.py`'s to measure)."""
    _run(url, 8, concurrency)
    return _run(url, episodes, concurrency)


def turns_case(url: str, requests: int, concurrency: int, parser: str = "") -> dict[str, float]:
    """``requests`` chat requests through the Ollama backend, at most ``concurrency`` at once,
    after a warm-up; tracegen's CPU per request. ``parser`` ``h11`` frames the answers with
    h11 in place of llhttp."""
    import asyncio

    if parser == "h11":
        from tracegen.llm import transport

        transport._Connection = _h11_connection()  # type: ignore[misc]

    from tracegen.llm.base import ChatRequest
    from tracegen.llm.ollama import OllamaBackend
    from tracegen.schema import ChatMessage

    async def main() -> dict[str, float]:
        backend = OllamaBackend(url, "test-model")
        ask = ChatRequest(messages=[ChatMessage(role="user", content="Write add(a, b).")])
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                await backend.chat(ask)

        await asyncio.gather(*(one() for _ in range(concurrency)))
        cpu, started = _cpu()[0], time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        seconds, cpu = time.perf_counter() - started, _cpu()[0] - cpu
        await backend.aclose()
        return {"seconds": seconds, "cpu_ms_turn": 1000 * cpu / requests}

    return asyncio.run(main())


def _h11_connection() -> type:
    """The transport's connection with h11 reading its answers (and writing its requests,
    as h11 must see a request to read its answer): the same bounds, another parser."""
    import asyncio

    import h11
    import httpx

    from tracegen.llm.transport import HttpResponse

    class H11Connection(asyncio.Protocol):
        def __init__(self) -> None:
            self.open = False
            self._conn = h11.Connection(h11.CLIENT)
            self._result: asyncio.Future[tuple[HttpResponse, bool]] | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self._transport, self.open = transport, True

        def connection_lost(self, exc: Exception | None) -> None:
            self.open = False
            if self._result is not None and not self._result.done():
                self._result.set_exception(httpx.ReadError("closed"))

        def close(self) -> None:
            self.open = False
            self._transport.close()

        def unasked(self) -> bool:
            return False

        async def exchange(
            self, data: bytes, deadline: float, timeout_s: float, limit: int
        ) -> tuple[HttpResponse, bool]:
            head, _, body = data.partition(b"\r\n\r\n")
            line, *fields = head.split(b"\r\n")
            method, target, _ = line.split(b" ")
            headers = [tuple(f.split(b": ", 1)) for f in fields]
            conn = self._conn
            out = conn.send(h11.Request(method=method, target=target, headers=headers))
            out += conn.send(h11.Data(data=body)) if body else b""
            out += conn.send(h11.EndOfMessage())
            loop = asyncio.get_running_loop()
            self._result = result = loop.create_future()
            self._status, self._headers, self._body = 0, [], bytearray()
            self._limit = limit
            self._transport.write(out)
            timer = loop.call_at(deadline, self._fail, httpx.ReadTimeout("late"))
            try:
                return await result
            finally:
                timer.cancel()

        def _fail(self, error: Exception) -> None:
            if self._result is not None and not self._result.done():
                self._result.set_exception(error)
            self.close()

        def data_received(self, data: bytes) -> None:
            conn = self._conn
            conn.receive_data(data)
            try:
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        return
                    if isinstance(event, h11.Response):
                        self._status, self._headers = event.status_code, list(event.headers)
                    elif isinstance(event, h11.Data):
                        self._body += event.data
                        if len(self._body) > self._limit:
                            raise h11.RemoteProtocolError("too large")
                    elif isinstance(event, h11.EndOfMessage):
                        keep = conn.our_state is h11.DONE and conn.their_state is h11.DONE
                        if keep:
                            conn.start_next_cycle()
                        answer = HttpResponse(self._status, self._headers, self._body)
                        assert self._result is not None
                        self._result.set_result((answer, keep))
                        return
            except h11.RemoteProtocolError as e:
                self._fail(httpx.ReadError(str(e)))

    return H11Connection


def _run(url: str, episodes: int, concurrency: int) -> dict[str, float]:
    from tracegen.config import RunSettings, load_settings
    from tracegen.jsonl import iter_lines

    try:
        from tracegen.generate.run import run_command
    except ImportError:  # the previous release's layout
        from tracegen.runner import run_command  # type: ignore[import-not-found,no-redef]

    with tempfile.TemporaryDirectory() as tmp:
        problems = Path(tmp) / "problems.jsonl"
        samples = 10 if episodes >= 100 else 1
        write_add_problems(problems, episodes // samples)
        out = Path(tmp) / "traces.jsonl"
        flags = {
            "hosts": [url],
            "model": "test-model",
            "mode": "markers",
            "problems": str(problems),
            "num_samples": samples,
            "output": str(out),
            "concurrency": concurrency,
            "sandbox": "rlimit",
            "quiet": True,
        }
        settings = load_settings(RunSettings, flags, env={})
        started = time.perf_counter()
        cpu_started = _cpu()
        status = run_command(settings)
        seconds = time.perf_counter() - started
        cpu_self, cpu_children = (a - b for a, b in zip(_cpu(), cpu_started, strict=True))
        rss_mb = _peak_rss_mb()
        traces = turns = 0
        for _, row in iter_lines(out):
            traces += 1
            turns += row["usage"]["requests"]
    if status != 0 or traces != episodes:
        raise SystemExit(f"run failed: exit {status}, {traces} of {episodes} traces")
    return {
        "seconds": seconds,
        "traces": traces,
        "turns": turns / traces,
        "rss_mb": rss_mb,
        "cpu_ms_turn": 1000 * cpu_self / turns,
        "sandbox_cpu_ms": 1000 * cpu_children / traces,
    }


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of its children that have ended (the sandbox)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _case(
    kind: str,
    parallel: int,
    episodes: int,
    latency: float,
    concurrency: int,
    src: Path | None = None,
    worker: str = "--case",
) -> dict[str, float]:
    """Serve from this process; run tracegen in a child, so its peak RSS is its own.
    ``src`` runs another checkout's ``src`` (the previous release) instead of this one;
    ``worker`` is what the child runs (``--case``: a run, ``--turns``: model turns alone)."""
    from tests.support.fake_ollama import FakeOllama
    from tests.support.fake_openai import FakeOpenAI

    env = dict(os.environ)
    if src is not None:
        env["TRACEGEN_BENCH_SRC"] = str(src)
    server: FakeOllama | FakeOpenAI
    if kind == "openai":
        server = FakeOpenAI("vllm", parallel=parallel, latency_s=latency)
    else:
        server = FakeOllama(parallel=parallel, latency_s=latency)
    with server:
        server.set_responder(lambda path, body: ADD_ANSWER)
        url = server.api if isinstance(server, FakeOpenAI) else server.url
        cmd = [sys.executable, __file__, *worker.split(), url, str(episodes), str(concurrency)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise SystemExit(f"case P={parallel} N={episodes} failed:\n{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])


def _previous_release(commit: str = PREVIOUS_RELEASE) -> Path | None:
    """A checkout of ``commit`` beside this one (made once), or None without git."""
    target = Path(tempfile.gettempdir()) / f"tracegen-{commit}"
    if not target.exists():
        made = subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(target), commit],
            capture_output=True,
            check=False,
        )
        if made.returncode != 0:
            return None
    return target / "src"


def compare_parsers(turns: int) -> None:
    """Model turns alone (Ollama backend, latency 0.2 s) at P=8 and P=128, each framing."""
    print(f"model turns alone by HTTP parser ({turns} turns, Ollama backend, latency 0.2 s)")
    print(f"{'parser':<22} {'P':>4} {'turns/s':>8} {'CPU ms/turn':>11}")
    hand = _previous_release(HAND_WRITTEN)
    framings = [("llhttp (httptools)", None, ""), ("h11", None, "h11")]
    if hand is not None:
        framings.append((f"hand-written {HAND_WRITTEN}", hand, ""))
    for p in (8, 128):
        for name, src, parser in framings:
            worker = "--turns" if not parser else f"--parser={parser} --turns"
            r = _case("ollama", p, turns, 0.2, p + 4, src, worker=worker)
            print(f"{name:<22} {p:>4} {turns / r['seconds']:>8.1f} {r['cpu_ms_turn']:>11.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer episodes")
    parser.add_argument("--case", nargs=3, metavar=("URL", "N", "CONCURRENCY"))
    parser.add_argument("--turns", nargs=3, metavar=("URL", "N", "CONCURRENCY"))
    parser.add_argument("--parser", default="", help=argparse.SUPPRESS)
    parser.add_argument("--parsers", action="store_true", help="model turns alone, by parser")
    parser.add_argument("--server", choices=("ollama", "openai"), default="ollama")
    args = parser.parse_args()
    if args.case:
        url, n, c = args.case
        print(json.dumps(run_case(url, int(n), int(c))))
        return
    if args.turns:
        url, n, c = args.turns
        print(json.dumps(turns_case(url, int(n), int(c), args.parser)))
        return
    if args.parsers:
        compare_parsers(80 if args.quick else 800)
        return

    n = 40 if args.quick else 200
    cases = [
        ("concurrent", 1, n, 0.2, 2),
        ("concurrent", 8, n, 0.2, 10),
        ("concurrent", 32, n, 1.0, 36),
        ("concurrent", 64, 2 * n, 1.0, 68),
        ("concurrent", 128, 4 * n, 1.0, 132),
        ("one at a time", 32, n // 4, 0.2, 1),
    ]
    previous = _previous_release() if args.server == "ollama" else None
    header = (
        f"{'run':<14} {'code':<9} {'P':>4} {'latency':>8} {'episodes':>8} {'traces/s':>9} "
        f"{'P/lat':>7} {'ratio':>6} {'finite':>7} {'ratio':>6} {'CPU ms/turn':>11} "
        f"{'sandbox ms':>10} {'RSS MB':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, p, episodes, latency, c in cases:
        for code, src in (("this", None), (PREVIOUS_RELEASE, previous)):
            if code != "this" and src is None:
                continue
            r = _case(args.server, p, episodes, latency, c, src)
            rate = r["traces"] / r["seconds"]
            bound = p / (latency * r["turns"])
            rounds = math.ceil(episodes / p)
            finite = episodes / (rounds * latency * r["turns"])
            print(
                f"{name:<14} {code:<9} {p:>4} {latency:>7.2f}s {episodes:>8} {rate:>9.2f} "
                f"{bound:>7.2f} {rate / bound:>6.2f} {finite:>7.2f} {rate / finite:>6.2f} "
                f"{r['cpu_ms_turn']:>11.2f} {r['sandbox_cpu_ms']:>10.2f} {r['rss_mb']:>7.1f}"
            )
    print()
    print("model turns alone (Ollama backend, P=128, latency 0.2 s, 132 in flight)")
    print(f"{'code':<9} {'turns':>6} {'turns/s':>8} {'CPU ms/turn':>11}")
    for code, src in (("this", None), (PREVIOUS_RELEASE, previous)):
        if args.server != "ollama" or (code != "this" and src is None):
            continue
        r = _case("ollama", 128, 4 * n, 0.2, 132, src, worker="--turns")
        print(f"{code:<9} {4 * n:>6} {4 * n / r['seconds']:>8.1f} {r['cpu_ms_turn']:>11.2f}")
    print()
    print(f"{'episodes':>8} {'seconds':>8} {'traces/s':>9} {'peak RSS MB':>12}")
    for episodes in (200, 400 if args.quick else 2000):
        r = _case(args.server, 32, episodes, 0.01, 32)
        print(
            f"{episodes:>8} {r['seconds']:>8.1f} {r['traces'] / r['seconds']:>9.1f} "
            f"{r['rss_mb']:>12.1f}"
        )


if __name__ == "__main__":
    main()
