"""tracegen's problems, modes and judge as a verifiers environment (``verifiers`` 0.3.1, the
extra's pin, its v1 API: ``verifiers.v1.Taskset`` and ``verifiers.v1.Env``).

The taskset is tracegen's problems (``--env.taskset.tracegen`` takes ``tracegen run``'s
settings: ``problems``, ``mode``, ``sandbox``, ``max_iterations``…). The env's rollout is
tracegen's episode, run the mode's way with verifiers' agent as the model: each model turn
tracegen's mode asks for is one ``interaction.turn`` (the messages tracegen adds — the task,
execution results, the mode's feedback — are the user turns), so the code runs in
tracegen's sandbox and the conversation is the mode's. The reward is tracegen's judge's
(``tracegen_reward``: ``2·score − 1`` plus the mode's structure bonuses, clamped to
[−1, 1]), recorded on the rollout's trace with the tracegen trace's score and success.

Modes whose model turns are chat turns run here: ``markers``, ``tool-feedback``,
``forced-interleave``, ``interleaved-tools``, ``structured``; ``inline-tools`` (continues the
assistant's own message) and ``native-tools`` (tool messages) need a turn shape verifiers'
chat agent does not take. Give the agent the mode's stop strings (``--env.player.sampling``)
so a reply ends where a server would end it; tracegen cuts it there in any case.

Sources: ``verifiers/v1/taskset.py``, ``env.py``, ``agent.py`` (``Interaction.turn``),
``tasksets/openenv/taskset.py`` (the same host-side engine shape).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from tracegen.config import RunSettings
from tracegen.errors import ConfigError
from tracegen.generate.handoff import HandedRuns, Reply, Turn
from tracegen.llm.openai import openai_messages
from tracegen.schema import Trace, TraceError

_NO_REPLY = TraceError(
    kind="limit", reason="no_reply", message="the verifiers agent stopped answering"
)
CHAT_TURN_MODES = (
    "markers",
    "tool-feedback",
    "forced-interleave",
    "interleaved-tools",
    "structured",
)

_RUNS: dict[str, HandedRuns] = {}


def handed_runs(settings: dict[str, Any]) -> HandedRuns:
    """One `HandedRuns` (problems, plan, warm sandbox) per distinct settings, per process."""
    key = repr(sorted(settings.items()))
    if key not in _RUNS:
        run_settings = RunSettings(**settings)
        if run_settings.mode not in CHAT_TURN_MODES:
            raise ConfigError(
                f"mode {run_settings.mode} does not run under verifiers' chat agent: use one "
                f"of {', '.join(CHAT_TURN_MODES)}"
            )
        _RUNS[key] = HandedRuns(run_settings)
    return _RUNS[key]


class TracegenData(vf.TaskData):
    problem_id: str
    settings: dict[str, Any]


class TracegenTasksetConfig(vf.TasksetConfig):
    tracegen: dict[str, Any] = Field(
        default_factory=dict,
        description="tracegen run's settings: problems, mode, sandbox, max_iterations, "
        "exec_timeout, limit, problem_ids…",
    )


class TracegenTask(vf.Task[TracegenData]):
    pass


class TracegenTaskset(vf.Taskset[TracegenTask, TracegenTasksetConfig]):
    """tracegen's problems, one task each (the prompt is the mode's: the env opens it)."""

    def load(self) -> Iterator[TracegenTask]:
        settings = self.config.tracegen
        runs = handed_runs(settings)
        for problem in runs.problems:
            yield TracegenTask(
                TracegenData(
                    id=problem.id,
                    name=problem.id,
                    prompt=None,
                    system_prompt=runs.plan.system_prompt,
                    problem_id=problem.id,
                    settings=settings,
                ),
                self.config.task,
            )


class TracegenEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class TracegenEnv(vf.Env[TracegenEnvConfig]):
    """A rollout is one tracegen episode; its model turns are the player's."""

    async def run(self, task: Any, agents: Any) -> None:
        data = task.data
        runs = handed_runs(data.settings)
        spec = runs.spec(data.problem_id)
        episode = runs.episode(spec)
        event: Turn | Trace = await episode.start()
        seen = 1  # the system message: the task's own system prompt
        try:
            async with agents.player.interaction(task) as interaction:
                while isinstance(event, Turn):
                    new = openai_messages(event.request.messages)[seen:]
                    segment = await interaction.turn(new)
                    if segment.terminated:
                        interaction.trace.stop("tracegen_no_reply")
                        break
                    event = await episode.answer(Reply(content=segment.last_reply))
                    seen += len(new) + 1  # and the reply, one assistant message
        finally:
            await episode.aclose()
        trace = interaction.trace
        if not isinstance(event, Trace):  # the player stopped answering: the episode ends
            await episode.aclose()
            event = episode.trace or spec.failed(_NO_REPLY)
        trace.record_reward("tracegen_reward", event.reward)
        trace.record_metrics({"tracegen_score": event.score, "tracegen_success": event.success})
        trace.info["tracegen"] = {
            "trace_id": event.id,
            "problem_id": event.problem_id,
            "final_code": event.final_code,
            "verdict": None if event.verdict is None else event.verdict.status,
        }


ENV_ID = "tracegen-verifiers"
"""The environment's id: verifiers imports the top-level module it names,
``tracegen_verifiers``."""


def load_environment(**settings: Any) -> TracegenEnv:
    """The environment, its taskset tracegen's problems under ``settings`` (``tracegen
    run``'s: ``problems``, ``mode``, ``sandbox``…), built as verifiers' ``eval`` builds it."""
    from verifiers.v1.utils.loaders import load_environment as load

    config = TracegenEnvConfig.model_validate({"taskset": {"id": ENV_ID, "tracegen": settings}})
    env: TracegenEnv = load(config)
    return env
