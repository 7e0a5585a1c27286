"""`TracegenEnv`: tracegen's episodes as an Atropos environment (``atroposlib`` 0.4.0).

An item is a problem; a group is ``--env.group_size`` episodes of it, run by tracegen's
`tracegen.generate.worker.EpisodeWorker` (the run decided once by
`tracegen.generate.setup.prepare`) against the policy server of
``--openai.*`` (tracegen's own OpenAI-compatible backend, which records the exact prompt and
sampled ids on vLLM, SGLang and llama.cpp's server), executed in tracegen's sandbox and
scored by its judge. Each group goes to Atropos's API as a ``ScoredDataGroup`` built by
`tracegen.atropos.groups.scored_group`.

What `BaseEnv` does is kept: back-pressure (it polls ``/status-env`` and starts groups only
while the queue holds fewer than ``max_batches_offpolicy`` batches), evaluation every
``steps_per_eval`` steps, W&B logging. What is added: a finished group the API did not take
(refused, unreachable, interrupted) is written to ``--env.unsent_path`` and named on stderr,
never lost silently; when the environment stops (Ctrl-C, ``total_steps``, the API gone), it
says how many groups were sent, kept unsent, and dropped unfinished. Every episode, kept in
a group or not, is written to ``--env.traces_path`` (by default beside the groups ``process``
writes) so ``tracegen stats``, ``report`` and ``convert`` read it.

Sources: ``atroposlib/envs/base.py`` (``BaseEnv``, ``ScoredDataGroup``, ``env_manager``,
``handle_send_to_api``, the ``serve``/``process``/``evaluate`` commands),
``atroposlib/api/server.py`` (``/register-env``, ``/scored_data``, ``/status-env``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import orjson
import wandb
from atroposlib.envs.base import BaseEnv, BaseEnvConfig
from atroposlib.envs.server_handling.server_baseline import APIServerConfig, ServerBaseline
from pydantic import Field, ValidationError, create_model
from pydantic_cli import FailedExecutionException, run_and_exit

from tracegen.atropos.groups import (
    EpisodeMeans,
    environment_failure,
    episode_means,
    eval_ks,
    pass_rates,
    scored_group,
)
from tracegen.atropos.settings import TokenIds, run_settings, tracegen_fields
from tracegen.config import RunSettings
from tracegen.episode.spec import EpisodeSpec
from tracegen.errors import (
    BackendError,
    BackendUnavailable,
    BadRequest,
    ConfigError,
    ServerError,
    TracegenError,
)
from tracegen.export.tokens.gguf_hf import cached_hf_tokenizer
from tracegen.export.tokens.sequences import Decoder
from tracegen.export.tokens.tokenizer import Tokenizer, load_tokenizer
from tracegen.generate.plan import Plan
from tracegen.generate.setup import RunSetup, prepare
from tracegen.generate.worker import EpisodeWorker
from tracegen.jsonl import JsonlWriter
from tracegen.llm.factory import open_pool
from tracegen.llm.packaged import PACKAGED, find_model
from tracegen.llm.pool import HostPool
from tracegen.llm.retries import RetryPolicy
from tracegen.problems import load_problems
from tracegen.schema import Problem, Trace
from tracegen.terminal import one_line, printable

log = logging.getLogger("tracegen.atropos")

NO_IDS = (
    "{server} gives no token ids, so groups would hold ids tracegen guessed from the text, "
    "which the policy did not sample: use vLLM or llama.cpp's server (tracegen reads their "
    "ids), or pass "
    "--env.token_ids retokenized (with --env.tokenizer_name a local tokenizer) to train on "
    "retokenized ids knowingly"
)


RETRY_ROUNDS = 10_000
"""Added to the round of a group run again, so its episodes get new ids and seeds."""


API_RETRIES = RetryPolicy(attempts=3, max_s=10.0)
"""How a group is sent again to Atropos's API: tracegen's one retry policy, three tries."""


class _NotDelivered(Exception):
    """The API did not take a group, after its tries."""


TracegenEnvConfig = create_model(
    "TracegenEnvConfig",
    __base__=BaseEnvConfig,
    __doc__="Atropos's environment settings and tracegen's (`tracegen.atropos.settings`).",
    **tracegen_fields(),
    token_ids=(
        TokenIds,
        Field(
            default="exact",
            description="exact: the ids the policy server sampled (refuse a server without "
            "them); retokenized: ids from tokenizing the text with tokenizer_name",
        ),
    ),
    eval_problems=(
        str | None,
        Field(default=None, description="evaluate: the problem set (default: problems)"),
    ),
    traces_path=(
        str | None,
        Field(
            default=None,
            description="tracegen's trace file (process: beside data_path_to_save_groups)",
        ),
    ),
    unsent_path=(
        str,
        Field(
            default="unsent_groups.jsonl",
            description="where finished groups the API did not take are kept",
        ),
    ),
)


def _say(text: str) -> None:
    print(f"tracegen: {printable(text)}", file=sys.stderr, flush=True)


class TracegenEnv(BaseEnv):
    """tracegen's problems, modes, sandbox and judge as an Atropos environment."""

    name: ClassVar[str] = "tracegen"
    env_config_cls = TracegenEnvConfig

    def __init__(
        self,
        config: Any,
        server_configs: ServerBaseline | list[APIServerConfig],
        slurm: bool = False,
        testing: bool = False,
    ) -> None:
        server = server_configs[0] if isinstance(server_configs, list) else server_configs
        self.run_settings: RunSettings = run_settings(
            config.model_dump(),
            base_url=getattr(server, "base_url", None),
            model_name=server.model_name,
            api_key=getattr(server, "api_key", None),
        )
        self.tokenizer_source = _tokenizer_source(config.tokenizer_name)
        """``--env.tokenizer_name`` as given (a GGUF file, or a packaged model's, is read by
        llama.cpp to retokenize)."""
        if self.tokenizer_source.suffix == ".gguf":
            made = cached_hf_tokenizer(self.tokenizer_source)  # what AutoTokenizer reads
            config = config.model_copy(update={"tokenizer_name": str(made)})
        try:
            super().__init__(config, server_configs, slurm=slurm, testing=testing)
        except (OSError, ValueError) as e:
            reason = " ".join(str(e).split())[:200]
            raise ConfigError(
                f"--env.tokenizer_name {config.tokenizer_name}: cannot load it ({reason}); "
                "give a local Hugging Face tokenizer directory or the model's .gguf file"
            ) from None
        self.sent_groups = 0
        self.unsent_groups = 0
        self.episodes_run = 0
        self.means = EpisodeMeans()
        self.pool: HostPool | None = None
        self.run_setup: RunSetup
        self.worker: EpisodeWorker | None = None
        self.traces: JsonlWriter | None = None
        self.retokenizer: Tokenizer | None = None
        self._fatal: BaseException | None = None
        self._main: asyncio.Task[Any] | None = None
        self._round = 0
        self._tokenizer_fits: bool | None = None

    @classmethod
    def config_init(cls) -> tuple[Any, list[APIServerConfig]]:
        # A list, so --openai.* applies to it (a lone config is ignored by the CLI);
        # no health check: it would send the policy server a request every second; a key
        # Atropos's own client insists on (servers started without one ignore it).
        server = APIServerConfig(
            base_url="", model_name="default", api_key="EMPTY", health_check=False
        )
        # The name /register-env requires (the CLI's own default from `name` is not applied).
        return TracegenEnvConfig(wandb_name=cls.name), [server]

    # ------------------------------------------------------------ setup

    async def setup(self) -> None:
        self.run_setup = setup = await prepare(self.run_settings, _say)
        s = setup.settings
        self.problems = setup.problems
        self.plan: Plan = setup.plan_for(self.problems, 1)
        if self.config.token_ids == "retokenized":
            self.retokenizer = load_tokenizer(self.tokenizer_source)
        self.pool = await open_pool(
            s,
            setup.chosen,
            on_retry=log.info,
            warn=_say,
            continues_message=setup.mode.continues_message,
        )
        if not self.pool.capabilities.token_ids and self.retokenizer is None:
            backend = self.pool.hosts[0].backend
            name = getattr(backend, "server_name", "OpenAI-compatible")
            server = f"the policy server at {backend.host} ({name})"
            await self.pool.aclose()
            self.pool = None
            raise ConfigError(NO_IDS.format(server=server))
        self.worker = await EpisodeWorker(s, self.pool).open()
        if self.worker.warning:
            _say(self.worker.warning)
        path = self.config.traces_path
        if path is None and getattr(self, "process_mode", False):
            path = str(Path(self.config.data_path_to_save_groups).with_suffix(".traces.jsonl"))
        if path is not None:
            self.traces = JsonlWriter(path)
        constrained_note = " (constrained decoding: not the policy's own distribution)"
        ids = "exact ids" if self.retokenizer is None else "retokenized ids where none exact"
        _say(
            f"{len(self.problems)} problems, mode {setup.mode.name}, {ids}, "
            f"sandbox {self.worker.summary}" + (constrained_note if setup.choices.constrain else "")
        )

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
        if self.worker is not None:
            await self.worker.aclose()
        if self.traces is not None:
            self.traces.close()
        if self.retokenizer is not None:
            self.retokenizer.close()

    # ------------------------------------------------------------ items and groups

    async def get_next_item(self) -> tuple[Problem, int]:
        """The next problem, in order, round after round; a round numbers the samples."""
        index = self._round % len(self.problems)
        item = (self.problems[index], self._round // len(self.problems))
        self._round += 1
        return item

    async def _episode(self, spec: EpisodeSpec) -> Trace:
        assert self.worker is not None
        try:
            trace = await self.worker.run(spec)
        except TracegenError as e:  # no other episode would survive it either: stop
            self._stop(e)
            raise
        if self.traces is not None:
            self.traces.write(trace)
        self.episodes_run += 1
        self.means.add(trace)
        return trace

    def _decode(self, ids: Sequence[int]) -> str:
        """The policy's tokenizer (``--env.tokenizer_name``, the one the trainer uses)."""
        text: str = self.tokenizer.decode(list(ids))
        return text

    def _checker(self, traces: Sequence[Trace]) -> Decoder | None:
        """What checks that a sample's ids decode to its text: the policy's tokenizer, once
        the first prompt shows it is the policy's (its messages are in the decoded prompt
        ids); else, said once, the token texts the server returned (which llama.cpp's
        server gives with held-back characters moved to a later token: such samples are
        left out)."""
        if self._tokenizer_fits is None:
            first = next((t for t in traces if t.token_requests), None)
            if first is None:
                return None
            prompt = self._decode(first.token_requests[0].prompt_ids)
            asked = [m.content.strip() for m in first.messages[:2] if m.content.strip()]
            self._tokenizer_fits = all(text in prompt for text in asked)
            if not self._tokenizer_fits:
                _say(
                    f"--env.tokenizer_name {self.config.tokenizer_name} does not decode the "
                    "policy's ids to its prompt: is it the policy's tokenizer? Samples are "
                    "checked with the token texts the server returned instead"
                )
        return self._decode if self._tokenizer_fits else None

    def _stop(self, error: BaseException) -> None:
        if self._fatal is None:
            self._fatal = error
            if self._main is not None:
                self._main.cancel()

    async def collect_trajectories(self, item: tuple[Problem, int]) -> tuple[Any, list[Any]]:
        problem, round_ = item
        size = self.config.group_size
        specs = [self.plan.spec(problem, round_ * size + i) for i in range(size)]
        traces = await asyncio.gather(*(self._episode(s) for s in specs))
        failure = environment_failure(traces)
        if failure is not None:  # not the policy's doing: no reward, the problem again later
            log.warning("group of %s run again later: %s", printable(problem.id), one_line(failure))
            return None, [(problem, round_ + RETRY_ROUNDS)]
        group = scored_group(traces, size, self.retokenizer, self._checker(traces))
        for why in group.dropped:
            log.warning("episode left out of its group: %s", one_line(why))
        return group.data, []

    # ------------------------------------------------------------ delivery

    async def _send_scored_data_to_api(self, scored_data: Any) -> None:
        groups = scored_data if isinstance(scored_data, list) else [scored_data]
        for group in groups:
            group["env_id"] = getattr(self, "env_id", None)
        try:
            await self._post(scored_data)
        except BaseException as e:
            reason = "interrupted" if isinstance(e, asyncio.CancelledError) else str(e)
            self._keep_unsent(groups, reason or type(e).__name__)
            raise
        self.sent_groups += len(groups)

    async def _post(self, scored_data: Any) -> None:
        """POST a group (or list of groups), tried again as `API_RETRIES` says: a 5xx or no
        answer is retried, a 4xx is not (sending it again would not help)."""
        try:
            await API_RETRIES.call(lambda: self._post_once(scored_data))
        except BackendError as e:
            raise _NotDelivered(str(e)) from None

    async def _post_once(self, scored_data: Any) -> None:
        path = "/scored_data_list" if isinstance(scored_data, list) else "/scored_data"
        url = self.config.rollout_server_url + path
        try:
            async with (
                aiohttp.ClientSession() as http,
                self._post_json_with_compression(http, url, scored_data) as resp,
            ):
                if resp.status >= 400:
                    body = " ".join((await resp.text()).split())[:200]
                    problem = f"{url} answered {resp.status}: {body}"
                    raise (BadRequest if resp.status < 500 else ServerError)(problem)
        except aiohttp.ClientError as e:
            raise BackendUnavailable(f"{url}: {type(e).__name__}: {e}") from None

    def _keep_unsent(self, groups: Sequence[dict[str, Any]], reason: str) -> None:
        path = Path(self.config.unsent_path)
        with path.open("ab") as fh:
            for group in groups:
                fh.write(orjson.dumps(group, option=orjson.OPT_APPEND_NEWLINE))
        self.unsent_groups += len(groups)
        _say(f"{len(groups)} finished group(s) not delivered ({reason}): kept in {path}")

    # ------------------------------------------------------------ the commands

    async def env_manager(self) -> None:
        self._main = asyncio.current_task()
        try:
            await super().env_manager()
        except asyncio.CancelledError:
            if self._fatal is None:
                raise
        except TracegenError:
            raise
        except Exception as e:  # a group not delivered, or aiohttp's while polling
            cause = str(e) if isinstance(e, _NotDelivered) else f"{type(e).__name__}: {e}"
            self._fatal = BackendUnavailable(
                f"the Atropos API at {self.config.rollout_server_url} failed ({cause})"
            )
        finally:
            await self._wind_down()
        if self._fatal is not None:
            raise self._fatal

    async def _wind_down(self) -> None:
        """Stop the groups in flight (a group being sent is kept unsent), say what became of
        every group, close."""
        unfinished = [v["item"][0].id for v in self.running_items.values() if "item" in v]
        workers = [w for w in self.workers if not w.done()]
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        if self.pool is None:  # setup did not finish: nothing ran
            await self.close()
            return
        text = f"{self.sent_groups} groups sent"
        if self.unsent_groups:
            text += (
                f", {self.unsent_groups} finished but not delivered (in {self.config.unsent_path})"
            )
        if unfinished:
            shown = ", ".join(unfinished[:5]) + (", …" if len(unfinished) > 5 else "")
            text += f", {len(unfinished)} unfinished dropped ({shown})"
        _say(text + f"; {self.episodes_run} episodes run")
        await self.close()

    async def process_manager(self) -> None:
        try:
            await super().process_manager()
        finally:
            await self.close()
        if self.traces is not None:
            _say(f"traces: {self.traces.path}")

    async def _run_evaluate(self) -> None:
        try:
            await super()._run_evaluate()
        finally:
            await self.close()

    async def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        """Run the eval split (``--env.eval_problems``, else the training problems),
        ``--env.num_samples`` episodes a problem, and report pass@1 and pass@k."""
        setup = self.run_setup
        samples, decided = setup.plan.num_samples, setup.generation
        problems = evaluation_problems(
            self.config.eval_problems, setup.settings.limit, self.problems
        )
        plan = setup.plan_for(problems, samples)
        started = time.time()
        limit = asyncio.Semaphore(max(1, self.config.max_eval_workers))
        writer = None
        if self.config.data_dir_to_save_evals is not None:
            Path(self.config.data_dir_to_save_evals).mkdir(parents=True, exist_ok=True)
            writer = JsonlWriter(Path(self.config.data_dir_to_save_evals) / "traces.jsonl")

        async def one(spec: EpisodeSpec) -> Trace:
            async with limit:
                assert self.worker is not None
                trace = await self.worker.run(spec)
            if writer is not None:
                writer.write(trace)
            return trace

        try:
            traces = await asyncio.gather(*(one(spec) for spec in plan.specs(set())))
        finally:
            if writer is not None:
                writer.close()
        rates = pass_rates(traces, eval_ks(samples))
        metrics = {f"eval/pass@{k}": v for k, v in rates.items()}
        metrics |= episode_means(traces, "eval/")
        shown = ", ".join(f"pass@{k} {v:.3f}" for k, v in rates.items())
        _say(f"eval: {len(problems)} problems × {samples} samples: {shown}")
        await self.evaluate_log(
            metrics,
            model_name=setup.model,
            start_time=started,
            end_time=time.time(),
            generation_parameters={
                "temperature": decided.temperature,
                "max_tokens": decided.max_tokens,
            },
            verbose=False,
        )
        if self.config.use_wandb and wandb.run is not None:
            wandb.log(metrics, step=self.curr_step)
        return metrics

    async def wandb_log(self, wandb_metrics: dict[str, Any] | None = None) -> None:
        metrics = dict(wandb_metrics or {})
        metrics |= self.means.take()
        await super().wandb_log(metrics)

    @classmethod
    def cli(cls) -> None:
        """``serve``, ``process`` and ``evaluate`` with Atropos's flags; a wrong flag or
        setting is one line on stderr and exit status 2, Ctrl-C exits 130."""
        commands = {
            "serve": cls.get_cli_serve_config_cls(),
            "process": cls.get_cli_process_config_cls(),
            "evaluate": cls.get_cli_evaluate_config_cls(),
        }
        try:
            run_and_exit(commands, description=cls.__doc__, exception_handler=_exit_status)
        except KeyboardInterrupt:
            _say("interrupted")
            sys.exit(130)


def _exit_status(error: BaseException) -> int:
    """One line for what a user can fix (exit 2) or what the servers did (exit 1)."""
    if isinstance(error, FailedExecutionException):
        _say(f"error: {error.message.split('error: ')[-1].strip()}")
        return 2
    if isinstance(error, TracegenError):
        _say(f"error: {error}")
        return error.exit_code
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(map(str, first["loc"]))
        _say(f"error: --{where}: {first['msg']}")
        return 2
    if isinstance(error, KeyboardInterrupt):
        return 130
    raise error


def evaluation_problems(
    source: str | None, limit: int | None, training: Sequence[Problem]
) -> Sequence[Problem]:
    """The problems ``evaluate`` runs: ``--env.eval_problems`` (its first ``--env.limit``),
    else the training problems (already limited)."""
    if source is None:
        return training
    return load_problems(source, limit=limit)


def _tokenizer_source(name: str) -> Path:
    """``--env.tokenizer_name``: a packaged model's name (``smollm2-135m``, what ``python -m
    tracegen.serve`` serves) is its GGUF file; anything else a path."""
    if name in PACKAGED:
        return find_model(name).info.path
    return Path(name)
