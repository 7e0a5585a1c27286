"""The environment's episode metrics go out through Atropos's own W&B logging."""

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
