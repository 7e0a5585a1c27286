"""``--tool-parser auto`` picks each family's parser from its chat template (snippets of the
real templates, cited) or, without one, from the model's name."""

from __future__ import annotations

import pytest

from tracegen.parsing.autodetect import detect_tool_parser
from tracegen.parsing.tool_parsers import PARSERS

TEMPLATES = {
    # Qwen2.5-7B-Instruct's template (the Hermes layout), as quoted in many ports of it
    "hermes": (
        '{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name '
        "and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
        '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>'
        '<|im_end|>\\n" }}'
    ),
    # vllm-project/vllm examples/tool_chat_template_qwen3coder.jinja
    "qwen3_coder": (
        "{{- '\\n<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
        "{{- '<parameter=' + args_name + '>\\n' }}{{- '<tool_call>' }}"
    ),
    # vllm-project/vllm examples/tool_chat_template_deepseekv3.jinja
    "deepseek_v3": (
        "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + "
        "'<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + "
        "tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}"
    ),
    # vllm-project/vllm examples/tool_chat_template_deepseekv31.jinja
    "deepseek_v31": (
        "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + "
        "'<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}"
    ),
    # ggml-org/llama.cpp models/templates/glm_4_5.jinja
    "glm45": (
        "{{ '\\n<tool_call>' + tc_obj.name }}\n<arg_key>{{ k }}</arg_key>\n"
        "<arg_value>{{ v | tojson if v is not string else v }}</arg_value>"
    ),
    # ggml-org/llama.cpp models/templates/moonshotai-Kimi-K2.jinja
    "kimi_k2": (
        "{% if tools -%}\n    {{ '<|im_system|>tool_declare<|im_middle|>' -}}\n"
        "    {{- tools | tojson -}}\n    {{ '<|im_end|>' -}}\n{%- endif -%}"
    ),
    # ggml-org/llama.cpp models/templates/unsloth-MiniMax-M2.jinja
    "minimax_m2": (
        "{{- '<invoke name=\"' + tool_call.name + '\">\\n' }}"
        "{{- '<parameter name=\"' + k + '\">' }}"
    ),
    # vllm-project/vllm examples/tool_chat_template_minimax_m1.jinja
    "minimax": (
        '<tool_calls>\\n{"name": <tool-name>, "arguments": <args-json-object>}\\n</tool_calls>'
    ),
    # openai/gpt-oss chat template (harmony)
    "openai": (
        '{{- "<|start|>assistant<|channel|>commentary to=functions." + tool_call.name }}'
        '{{- " <|constrain|>json<|message|>" + tool_call.arguments|tojson + "<|call|>" }}'
    ),
    # vllm-project/vllm examples/tool_chat_template_mistral_parallel.jinja
    "mistral": '{{- "[TOOL_CALLS] [" }}{%- for tool_call in message.tool_calls %}',
    # vllm-project/vllm examples/tool_chat_template_phi4_mini.jinja
    "phi4_mini_json": (
        "  * all function calls should be generated in a single JSON list formatted as "
        'functools[{"name": [function name], "arguments": [function arguments as JSON]}, ...]'
    ),
    # vllm-project/vllm examples/tool_chat_template_granite_20b_fc.jinja
    "granite-20b-fc": (
        "If none of the functions are relevant or the given question lacks the parameters "
        'required by the function, please output \\"<function_call> {\\"name\\": '
        '\\"no_function\\", \\"arguments\\": {}}\\".'
    ),
    # ibm-granite granite-3.x-instruct template
    "granite": "{{- '<|start_of_role|>assistant<|end_of_role|><|tool_call|>' + tool_calls }}",
    # vllm-project/vllm examples/tool_chat_template_llama4_pythonic.jinja
    "llama4_pythonic": (
        '{{- "<|header_start|>system<|header_end|>\\n\\n" }}'
        '{{- "\\nHere is a list of functions in JSON format that you can invoke. Use exact '
        'format: [func_name1(param1=value1, param2=value2), func_name2(...)]\\n" }}'
    ),
    # vllm-project/vllm examples/tool_chat_template_llama3.2_pythonic.jinja
    "pythonic": (
        "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}You should call them in the "
        "format [func_name1(params_name1=params_value1, params_name2=params_value2...)]"
    ),
    # vllm-project/vllm examples/tool_chat_template_llama3.1_json.jinja
    "llama3_json": (
        "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}"
        "{{- '{\"name\": \"' + tool_call.name + '\", ' }}{{- '\"parameters\": ' }}"
    ),
    # vllm-project/vllm examples/tool_chat_template_internlm2_tool.jinja
    "internlm": (
        '{{- "<|action_start|><|plugin|>\\n" }}{{- \'{"name": "\' + function.name + \'", \'}}'
    ),
    # vllm-project/vllm examples/tool_chat_template_olmo3.jinja
    "olmo3": (
        '{{- "\\n\\nYou have access to the following functions. To call functions, respond '
        'with a pythonic function call wrapped in <function_calls></function_calls> XML tags." }}'
    ),
    # vllm-project/vllm examples/tool_chat_template_xlam_qwen.jinja
    "xlam": (
        "When using tools, make calls in a single JSON array: \n\n"
        '[{"name": "tool_call_name", "arguments": {"arg1": "value1", "arg2": "value2"}}, ...'
    ),
}


@pytest.mark.parametrize("parser", sorted(TEMPLATES))
def test_auto_picks_each_family_from_its_chat_template(parser: str) -> None:
    choice = detect_tool_parser(TEMPLATES[parser], model="some-model")
    assert choice.parser == parser
    assert "chat template" in choice.reason


NAME_ONLY = {
    # Families whose chat template we hold no copy of: picked by the model's name, and by the
    # markers their parsers read (TEMPLATE_MARKERS) when a template writes them.
    "apertus",
    "cohere_command3",
    "deepseek_v32",
    "deepseek_v4",
    "dots",
    "functiongemma",
    "gemma4",
    "gigachat3",
    "gigachat35",
    "hy_v3",
    "inkling",
    "k2_horizon",
    "kimi_k3",
    "lfm2",
    "longcat",
    "minicpm5",
    "minimax_m3",
    "muse_glimmer",
    "seed_oss",
    "solar_open2",
    "step3",
    "step_deepresearch",
}


def test_every_family_can_be_picked_from_a_template_or_its_name() -> None:
    assert set(TEMPLATES) | NAME_ONLY == set(PARSERS)
    assert not set(TEMPLATES) & NAME_ONLY


@pytest.mark.parametrize(
    ("model", "parser"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", "hermes"),
        ("qwen3:8b", "hermes"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder"),
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek_v31"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4_pythonic"),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral"),
        ("moonshotai/Kimi-K2-Instruct", "kimi_k2"),
        ("zai-org/GLM-4.5-Air", "glm45"),
        ("openai/gpt-oss-20b", "openai"),
        ("ibm-granite/granite-3.3-8b-instruct", "granite"),
        ("ibm-granite/granite-4.0-h-tiny", "granite4"),
        ("microsoft/Phi-4-mini-instruct", "phi4_mini_json"),
        ("Salesforce/Llama-xLAM-2-8b-fc-r", "xlam"),
        ("MiniMaxAI/MiniMax-M1-40k", "minimax"),
        ("MiniMaxAI/MiniMax-M2", "minimax_m2"),
        ("internlm/internlm2_5-7b-chat", "internlm"),
        ("ai21labs/AI21-Jamba-Mini-1.7", "jamba"),
        ("tencent/Hunyuan-A13B-Instruct", "hunyuan_a13b"),
        ("ByteDance-Seed/Seed-OSS-36B-Instruct", "seed_oss"),
        ("stepfun-ai/step3", "step3"),
        ("baidu/ERNIE-4.5-21B-A3B-Thinking", "ernie45"),
        ("meituan-longcat/LongCat-Flash-Chat", "longcat"),
        ("allenai/Olmo-3-7B-Instruct", "olmo3"),
        ("ai-sage/GigaChat3-10B-A1.8B", "gigachat3"),
        ("deepseek-ai/DeepSeek-V3.2", "deepseek_v32"),
        ("LiquidAI/LFM2.5-1.2B-Instruct", "lfm2"),
        ("swiss-ai/Apertus-8B-Instruct-2509", "apertus"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v31"),
        ("deepseek-ai/DeepSeek-V4-Flash", "deepseek_v4"),
        ("moonshotai/Kimi-K3", "kimi_k3"),
        ("google/gemma-4-31B-it", "gemma4"),
        ("google/functiongemma-270m-it", "functiongemma"),
        ("tencent/Hy3-preview", "hy_v3"),
        ("openbmb/MiniCPM5-A3B", "minicpm5"),
        ("poolside/Laguna-XS.2", "poolside_v1"),
        ("XiaomiMiMo/MiMo-V2-Flash", "mimo"),
        ("stepfun-ai/Step-3.5-Flash", "step3p5"),
        ("CohereLabs/c4ai-command-a-03-2025", "cohere_command3"),
        ("upstage/Solar-Open2", "solar_open2"),
        ("rednote-hilab/dots.llm1.inst", "dots"),
        ("inclusionAI/Ling-3", "ling3"),
        ("tencent/Hy4-preview", "hy_v4"),
        ("MiniMaxAI/MiniMax-M3", "minimax_m3"),
        ("ai-sage/GigaChat3.5-10B", "gigachat35"),
        ("example/K2-Horizon", "k2_horizon"),
    ],
)
def test_without_a_template_auto_picks_from_the_model_name(model: str, parser: str) -> None:
    assert detect_tool_parser(None, model).parser == parser


@pytest.mark.parametrize(
    ("template", "parser"),
    [
        ("{{- '<|tool_call>call:' + function['name'] + '{' -}}", "gemma4"),
        ("{{- '<start_function_call>call:' + tool_call['name'] + '{' -}}", "functiongemma"),
        ("{{- '<tool_calls>\\n<tool_call>' + name + '<tool_sep>\\n' }}", "hy_v3"),
        ('<|open|>tools<|sep|><|open|>call tool="{{ name }}"<|sep|>', "kimi_k3"),
        ("{{ '<|content_invoke_tool_json|>' + call | tojson + '<|end_message|>' }}", "inkling"),
        ("{{ '<｜DSML｜tool_calls>' }}", "deepseek_v4"),
        (
            '<function name="{{ name }}"><param name="{{ k }}">{{ v }}</param></function>',
            "minicpm5",
        ),
    ],
)
def test_the_markers_of_the_newer_families_pick_them(template: str, parser: str) -> None:
    assert detect_tool_parser(template, "some-model").parser == parser


def test_a_template_without_markers_and_an_unknown_name_try_every_format() -> None:
    choice = detect_tool_parser("{{ messages }}", "my-finetune")
    assert choice.parser is None
    assert "every format" in choice.describe()
