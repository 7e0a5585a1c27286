"""The environment in process: its episode metrics go out through Atropos's own W&B logging,
and a group the API refuses is kept and named, never lost silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.token_traces import ChatmlModel, inline_tools, make_tokenizer, tool_feedback

pytestmark = pytest.mark.slow  # imports atroposlib (wandb, transformers…)


async def test_wandb_log_carries_the_episode_means(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("atroposlib")
    import wandb
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig

    from tracegen.atropos.env import TracegenEnv, TracegenEnvConfig

    monkeypatch.setenv("WANDB_MODE", "disabled")
    logged: list[dict[str, Any]] = []
    monkeypatch.setattr(wandb, "log", lambda metrics, step=None: logged.append(metrics))
    tokenizer = make_tokenizer(tmp_path / "tok")
    config = TracegenEnvConfig(tokenizer_name=str(tokenizer), use_wandb=True)
    server = APIServerConfig(
        base_url="http://127.0.0.1:9/v1", model_name="m", api_key="x", health_check=False
    )
    env = TracegenEnv(config, [server])
    model = ChatmlModel(tokenizer)
    good, half = tool_feedback(model, 0), inline_tools(model, 1)
    good.is_ideal = True
    good.metrics.executions = 2
    for trace in (good, half):
        env.means.add(trace)
    await env.wandb_log({})
    [metrics] = logged
    assert metrics["train/success_rate"] == 0.5
    assert metrics["train/ideal_rate"] == 0.5
    assert metrics["train/executions_per_episode"] == 1.0
    assert {"train/think_count", "train/verify_count", "train/completion_tokens"} <= set(metrics)
    await env.wandb_log({})
    assert "train/success_rate" not in logged[-1], "each step's means are of its own episodes"


class _Api:
    """A stand-in for Atropos's ``/scored_data`` (``atroposlib/api/server.py``): it answers
    each POST with the next status of ``statuses``."""

    def __init__(self, statuses: list[int]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        owner = self
        self.statuses = statuses
        self.bodies: list[bytes] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                status = owner.statuses.pop(0)
                body = b'{"detail": "no"}' if status >= 400 else b'{"status": "received"}'
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


async def test_a_group_the_api_refuses_is_kept_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("atroposlib")
    import orjson
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig

    from tracegen.atropos.env import TracegenEnv, TracegenEnvConfig

    api = _Api([200, 422])
    unsent = tmp_path / "unsent.jsonl"
    config = TracegenEnvConfig(
        tokenizer_name=str(make_tokenizer(tmp_path / "tok")),
        use_wandb=False,
        rollout_server_url=api.url,
        unsent_path=str(unsent),
    )
    server = APIServerConfig(
        base_url="http://127.0.0.1:9/v1", model_name="m", api_key="x", health_check=False
    )
    env = TracegenEnv(config, [server])
    group = {"tokens": [[1, 2]], "masks": [[-100, 2]], "scores": [1.0]}
    await env._send_scored_data_to_api(dict(group))
    assert env.sent_groups == 1 and not unsent.exists()
    with pytest.raises(Exception, match="answered 422"):
        await env._send_scored_data_to_api(dict(group))
    assert env.unsent_groups == 1 and api.statuses == [], "a refusal is not retried"
    [kept] = [orjson.loads(line) for line in unsent.read_bytes().splitlines()]
    assert kept["tokens"] == group["tokens"]
    assert f"1 finished group(s) not delivered ({api.url}/scored_data answered 422" in (
        capsys.readouterr().err
    )
    api.server.shutdown()


async def test_samples_are_checked_with_the_tokenizer_only_when_it_is_the_policys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("atroposlib")
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig

    from tracegen.atropos.env import TracegenEnv, TracegenEnvConfig

    tokenizer = make_tokenizer(tmp_path / "tok")
    config = TracegenEnvConfig(tokenizer_name=str(tokenizer), use_wandb=False)
    server = APIServerConfig(
        base_url="http://127.0.0.1:9/v1", model_name="m", api_key="x", health_check=False
    )
    model = ChatmlModel(tokenizer)
    traces = [tool_feedback(model, 0), inline_tools(model, 1)]
    fits = TracegenEnv(config, [server])
    assert fits._checker(traces) is not None
    other = TracegenEnv(config, [server])
    other.tokenizer.decode = lambda ids, **kw: "something else"  # type: ignore[method-assign]
    assert other._checker(traces) is None
    assert "does not decode the policy's ids to its prompt" in capsys.readouterr().err
    assert other._checker(traces) is None and not capsys.readouterr().err, "said once"


def test_env_limit_applies_to_the_eval_problems_too() -> None:
    pytest.importorskip("atroposlib")
    from tracegen.atropos.env import evaluation_problems
    from tracegen.problems import load_problems

    training = load_problems("builtin", limit=1)
    assert [p.id for p in evaluation_problems("builtin", 2, training)] == [
        p.id for p in load_problems("builtin", limit=2)
    ]
    assert evaluation_problems(None, 2, training) == training
