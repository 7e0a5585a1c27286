"""The command line. Thin: parse flags, build settings, call one library function.

Heavy modules (httpx, datasets, the runner) are imported inside the commands so that
``tracegen --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

from tracegen.errors import TracegenError


class _Group(TyperGroup):
    """Turns every `TracegenError` into one line on stderr and its exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TracegenError as e:
            click.echo(f"tracegen: error: {e}", err=True)
            raise typer.Exit(e.exit_code) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


app = typer.Typer(
    cls=_Group,
    help="Generate executed reasoning traces for training code-writing models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

_GEN = "Generation"
_RUN = "Run"
_OUT = "Output"

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML file of settings (flags and env win).")
]
HostOpt = Annotated[
    list[str] | None,
    typer.Option("--host", help="Ollama server URL; repeat for several. [env: OLLAMA_HOST]"),
]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Model name as Ollama knows it.")]
ProblemsOpt = Annotated[
    str | None,
    typer.Option(
        "--problems",
        help="builtin, humaneval, mbpp, gsm8k, or a file (tracegen JSONL/YAML, HumanEval).",
    ),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", help="Use only the first N problems.")]
IdsOpt = Annotated[
    str | None, typer.Option("--problem-ids", help="Comma-separated problem ids to use.")
]
SandboxOpt = Annotated[
    str | None, typer.Option("--sandbox", help="Isolation: auto (default), bwrap, builtin, rlimit.")
]


@app.command()
def run(
    mode: Annotated[
        str | None, typer.Option(help="Conversation protocol.", rich_help_panel=_GEN)
    ] = None,
    model: ModelOpt = None,
    host: HostOpt = None,
    problems: ProblemsOpt = None,
    limit: LimitOpt = None,
    problem_ids: IdsOpt = None,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Traces file (JSONL).", rich_help_panel=_OUT),
    ] = None,
    rejects: Annotated[
        Path | None,
        typer.Option(help="Write rejected traces and failed episodes here.", rich_help_panel=_OUT),
    ] = None,
    num_samples: Annotated[
        int | None, typer.Option(help="Samples per problem.", rich_help_panel=_RUN)
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="In-flight episodes per host.", rich_help_panel=_RUN)
    ] = None,
    only_success: Annotated[
        bool | None, typer.Option("--only-success", help="Keep traces that pass every test.")
    ] = None,
    only_ideal: Annotated[
        bool | None, typer.Option("--only-ideal", help="Keep successful traces of ideal shape.")
    ] = None,
    temperature: Annotated[float | None, typer.Option(rich_help_panel=_GEN)] = None,
    seed: Annotated[
        int | None, typer.Option(help="Fixes sampling seeds and work order.", rich_help_panel=_GEN)
    ] = None,
    max_iterations: Annotated[
        int | None, typer.Option(help="Execute-and-fix rounds.", rich_help_panel=_GEN)
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(help="Model turns or steps per episode.", rich_help_panel=_GEN)
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Tokens per model turn (num_predict).", rich_help_panel=_GEN)
    ] = None,
    num_ctx: Annotated[int | None, typer.Option(help="Context size.", rich_help_panel=_GEN)] = None,
    top_logprobs: Annotated[
        int | None, typer.Option(help="Alternatives per token (0-20).", rich_help_panel=_GEN)
    ] = None,
    continuation: Annotated[
        str | None,
        typer.Option(
            help="inline-tools: prefill (/api/chat) or raw (/api/generate).", rich_help_panel=_GEN
        ),
    ] = None,
    tool_parser: Annotated[
        str | None,
        typer.Option(
            help="native-tools: format of tool calls written as text.", rich_help_panel=_GEN
        ),
    ] = None,
    prompts_dir: Annotated[
        Path | None, typer.Option(help="Folder of system prompts overriding the shipped ones.")
    ] = None,
    require_logprobs: Annotated[
        bool | None, typer.Option("--require-logprobs", help="Fail if the server returns none.")
    ] = None,
    sandbox: SandboxOpt = None,
    exec_timeout: Annotated[
        float | None,
        typer.Option(
            "--exec-timeout",
            help="Seconds each execution may run (default 10).",
            rich_help_panel=_RUN,
        ),
    ] = None,
    overwrite: Annotated[
        bool | None, typer.Option("--overwrite", help="Start the output file afresh.")
    ] = None,
    quiet: Annotated[bool | None, typer.Option("--quiet", "-q", help="No progress output.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Generate traces: run episodes concurrently, score them, append them to a JSONL file."""
    flags = dict(locals())
    config_file = flags.pop("config")
    flags["hosts"] = flags.pop("host") or None

    from tracegen.config import RunSettings, load_settings

    settings = load_settings(RunSettings, flags, config_file=config_file)

    from tracegen.runner import run_command

    raise typer.Exit(run_command(settings))


@app.command()
def convert(
    input: Annotated[Path, typer.Argument(help="Trace file (JSONL).")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="JSONL output [default: IN.<format>.jsonl]."),
    ] = None,
    chat_format: Annotated[
        bool, typer.Option("--chat-format", help="OpenAI chat `messages` (TRL SFTTrainer).")
    ] = False,
    sharegpt: Annotated[
        bool, typer.Option("--sharegpt", help="ShareGPT `conversations` (from/value).")
    ] = False,
    training_format: Annotated[
        bool, typer.Option("--training-format", help="Problem + one assistant message.")
    ] = False,
    to_hf: Annotated[
        Path | None,
        typer.Option("--to-hf", help="Save a Hugging Face dataset (load_from_disk) here."),
    ] = None,
    parquet: Annotated[Path | None, typer.Option("--parquet", help="Write Parquet here.")] = None,
    only_success: Annotated[
        bool, typer.Option("--only-success", help="Keep traces that pass every test.")
    ] = False,
    only_ideal: Annotated[
        bool, typer.Option("--only-ideal", help="Keep successful traces of ideal shape.")
    ] = False,
    reasoning_field: Annotated[
        bool, typer.Option("--reasoning-field", help="Thinking in its own field, not <think>.")
    ] = False,
    keep_logprobs: Annotated[
        bool, typer.Option("--keep-logprobs", help="Carry token logprobs through.")
    ] = False,
) -> None:
    """Turn traces into chat, ShareGPT or single-message training files, JSONL/HF/Parquet."""
    from tracegen.convert import convert_command

    convert_command(
        input=input,
        output=output,
        chat_format=chat_format,
        sharegpt=sharegpt,
        training_format=training_format,
        to_hf=to_hf,
        parquet=parquet,
        only_success=only_success,
        only_ideal=only_ideal,
        reasoning_field=reasoning_field,
        keep_logprobs=keep_logprobs,
    )


@app.command()
def stats(
    files: Annotated[list[str], typer.Argument(help="Trace files or globs.")],
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    by: Annotated[
        str | None, typer.Option("--by", help="Break down by mode, model or problem.")
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Malformed lines are fatal.")] = False,
) -> None:
    """Summarise trace files: rates, distributions, failures, per-problem success."""
    from tracegen.stats import stats_command

    stats_command(files=files, json_out=json_out, by=by, strict=strict)


@app.command()
def show(
    file: Annotated[Path, typer.Argument(help="Trace file (JSONL).")],
    index: Annotated[int | None, typer.Option("--index", help="0-based record number.")] = None,
    id: Annotated[str | None, typer.Option("--id", help="Trace id.")] = None,
    only_failed: Annotated[
        bool, typer.Option("--only-failed", help="Pick among failures.")
    ] = False,
) -> None:
    """Render one trace: steps coloured by kind, test results, metrics."""
    from tracegen.render import show_command

    show_command(file=file, index=index, trace_id=id, only_failed=only_failed)


@app.command()
def verify(
    solutions: Annotated[Path, typer.Argument(help="JSONL of {problem_id, code}, or traces.")],
    problems: ProblemsOpt = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Verdicts JSONL.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object per solution.")] = False,
    sandbox: SandboxOpt = None,
) -> None:
    """Run solutions against their problems' tests in the sandbox."""
    from tracegen.verify import verify_command

    verify_command(
        solutions=solutions,
        problems=problems or "builtin",
        output=output,
        json_out=json_out,
        sandbox=sandbox or "auto",
    )


@app.command("problems")
def problems_(
    source: Annotated[
        str, typer.Argument(help="builtin, humaneval, mbpp, gsm8k or a path.")
    ] = "builtin",
    limit: LimitOpt = None,
    problem_ids: IdsOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object per problem.")] = False,
) -> None:
    """List a problem set: id, entry point, number of tests."""
    from tracegen.problems import problems_command

    problems_command(source=source, limit=limit, problem_ids=problem_ids, json_out=json_out)


@app.command()
def doctor(
    host: HostOpt = None,
    model: ModelOpt = None,
    sandbox: SandboxOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Check the server, the model, logprobs and the sandbox; exit 1 if anything is wrong."""
    from tracegen.config import RunSettings, load_settings
    from tracegen.doctor import doctor_command

    flags = {"hosts": host or None, "model": model, "sandbox": sandbox}
    settings = load_settings(RunSettings, flags, config_file=config)
    raise typer.Exit(doctor_command(settings))


def main() -> None:
    """Console entry point."""
    app(prog_name="tracegen")
