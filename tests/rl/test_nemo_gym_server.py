"""tracegen's judge as a NeMo-Gym resources server: NeMo-Gym's own server
(``SimpleResourcesServer.setup_webserver``) answering ``/verify`` with verify requests built
from NeMo-Gym's own types (``NeMoGymResponse``), as its agents send them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest.mock import MagicMock

import httpx
import pytest

pytestmark = pytest.mark.slow
pytest.importorskip(
    "nemo_gym.base_resources_server",
    reason="nemo-gym is not installed (no release installs on Python 3.11: 0.2-0.4 need "
    ">= 3.12, 0.5-0.7 >= 3.13.14): pip install 'tracegen[nemo-gym]'",
)

from nemo_gym.openai_utils import NeMoGymResponse  # noqa: E402
from nemo_gym.server_utils import ServerClient  # noqa: E402

from tests.support.asgi import add_problems, serving  # noqa: E402
from tracegen.nemo_gym import TracegenResourcesServer, TracegenResourcesServerConfig  # noqa: E402

RIGHT = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\n"
WRONG = "Here it is:\n```python\ndef add(a, b):\n    return a * b\n```\n"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    problems = add_problems(tmp_path_factory.mktemp("nemo") / "add.jsonl", 2)
    config = TracegenResourcesServerConfig(
        host="127.0.0.1",
        port=0,
        entrypoint="",
        name="tracegen",
        tracegen={"problems": str(problems), "sandbox": "builtin"},
    )
    server = TracegenResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))
    with serving(server.setup_webserver()) as base:
        yield base


def _message(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "msg",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
        **extra,
    }


def _request(output: list[dict[str, Any]], problem_id: str = "add0") -> dict[str, Any]:
    response = NeMoGymResponse(
        id="r",
        created_at=0,
        model="policy",
        object="response",
        output=output,
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
    )
    return {
        "responses_create_params": {"input": "Write add(a, b) returning a + b."},
        "response": response.model_dump(mode="json"),
        "verifier_metadata": {"problem_id": problem_id},
    }


def _verify(url: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(f"{url}/verify", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_a_right_program_gets_1_and_a_wrong_one_0(url: str) -> None:
    right = _verify(url, _request([_message(RIGHT)]))
    wrong = _verify(url, _request([_message(WRONG)]))
    assert right["reward"] == 1.0 and right["verdict"] == "ok"
    assert (right["passed"], right["total"]) == (2, 2)
    assert "return a + b" in right["program"]
    assert wrong["reward"] == 0.0 and wrong["verdict"] == "failed" and wrong["passed"] == 0
    assert not wrong["mask_sample"]


def test_the_last_program_defining_the_entry_point_is_judged(url: str) -> None:
    text = (
        "<code>\ndef add(a, b):\n    return a + b\n</code>\n"
        "A check:\n```python\nprint(add(1, 2))\n```"
    )
    assert _verify(url, _request([_message(text)]))["reward"] == 1.0
    call = {
        "type": "function_call",
        "call_id": "c1",
        "name": "python",
        "arguments": '{"code": "def add(a, b):\\n    return b + a\\n"}',
        "status": "completed",
    }
    assert _verify(url, _request([call, _message("Done.")]))["reward"] == 1.0


def test_no_program_gets_0(url: str) -> None:
    result = _verify(url, _request([_message("I cannot write that.")], "add1"))
    assert result["reward"] == 0.0 and result["program"] is None


def test_the_policy_s_token_ids_come_back_as_sent(url: str) -> None:
    ids = {
        "prompt_token_ids": [1, 2, 3],
        "generation_token_ids": [7, 8],
        "generation_log_probs": [-0.5, -0.25],
    }
    result = _verify(url, _request([_message(RIGHT, **ids)]))
    [item] = result["response"]["output"]
    assert {k: item[k] for k in ids} == ids and result["reward"] == 1.0


def test_seed_session_and_aggregate_metrics_are_nemo_gym_s(url: str) -> None:
    assert httpx.post(f"{url}/seed_session", json={}, timeout=30).status_code == 200
    rows = [_verify(url, _request([_message(t)])) for t in (RIGHT, WRONG)]
    for rollout, row in enumerate(rows):  # as NeMo-Gym's rollout collection numbers them
        row |= {"_ng_task_index": 0, "_ng_rollout_index": rollout}
    answer = httpx.post(f"{url}/aggregate_metrics", json={"verify_responses": rows}, timeout=30)
    assert answer.status_code == 200, answer.text
    metrics = answer.json()
    assert any(v == 0.5 for v in metrics["agent_metrics"].values()), metrics


def test_an_unknown_problem_is_refused(url: str) -> None:
    answer = httpx.post(f"{url}/verify", json=_request([_message(RIGHT)], "nope"), timeout=30)
    assert answer.status_code >= 400
