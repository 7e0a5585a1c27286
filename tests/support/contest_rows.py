"""One small row of each competitive-programming dataset, written field for field as the
dataset ships it (sources: each dataset's card on the Hugging Face hub and the grader that
reads it, cited per row). Every row is the same task — read a and b, print a + b — so the
same programs are judged under each format."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from typing import Any

STATEMENT = "Read two integers a and b from standard input and print a + b."


def lcb_private(cases: list[dict[str, str]]) -> str:
    """LiveCodeBench's packing of private tests (``code_generation_lite``):
    base64(zlib(pickle(json string)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


CODE_CONTESTS: dict[str, Any] = {
    # deepmind/code_contests, contest_problem.proto (the parquet rows' fields)
    "name": "1000_A. Sum",
    "description": STATEMENT,
    "public_tests": {"input": ["2 3\n"], "output": ["5\n"]},
    "private_tests": {"input": ["10 20\n", "-7 7\n"], "output": ["30\n", "0\n"]},
    "generated_tests": {"input": ["1000000000 1000000000\n"], "output": ["2000000000\n"]},
    "source": 2,
    "difficulty": 7,
    "solutions": {"language": [3], "solution": ["print(sum(map(int, input().split())))"]},
    "incorrect_solutions": {"language": [], "solution": []},
    "cf_contest_id": 1000,
    "cf_index": "A",
    "cf_points": 500.0,
    "cf_rating": 800,
    "cf_tags": ["math"],
    "is_description_translated": False,
    "untranslated_description": "",
    "time_limit": {"seconds": 1, "nanos": 500000000},
    "memory_limit_bytes": 268435456,
    "input_file": "",
    "output_file": "",
}

APPS: dict[str, Any] = {
    # codeparrot/apps: input_output is a JSON string; testing_util.py reads it
    "problem_id": 4242,
    "question": STATEMENT,
    "solutions": json.dumps(["print(sum(map(int, input().split())))"]),
    "input_output": json.dumps(
        {"inputs": ["2 3\n", "10 20\n", "-7 7\n"], "outputs": ["5\n", "30\n", "0\n"]}
    ),
    "difficulty": "introductory",
    "url": "https://codeforces.com/problemset/problem/1000/A",
    "starter_code": "",
}

APPS_CALL_BASED: dict[str, Any] = {
    # codeparrot/apps, a call-based row: outputs wrapped in a list, as APPS ships them
    "problem_id": 4243,
    "question": "Write add(a, b) returning a + b.",
    "solutions": json.dumps(["def add(a, b):\n    return a + b"]),
    "input_output": json.dumps(
        {"fn_name": "add", "inputs": [[2, 3], [10, 20]], "outputs": [[5], [30]]}
    ),
    "difficulty": "introductory",
    "url": "https://www.codewars.com/kata/0",
    "starter_code": "def add(a, b):\n\t",
}

TACO: dict[str, Any] = {
    # BAAI/TACO: no id field (the row index is the id); limits as text
    "question": STATEMENT,
    "solutions": ["print(sum(map(int, input().split())))"],
    "starter_code": "",
    "input_output": json.dumps(
        {"inputs": ["2 3\n", "10 20\n", "-7 7\n"], "outputs": ["5\n", "30\n", "0\n"]}
    ),
    "difficulty": "EASY",
    "raw_tags": "['Math']",
    "name": None,
    "source": "codeforces",
    "tags": ["Mathematics"],
    "skill_types": [],
    "url": "https://codeforces.com/problemset/problem/1000/A",
    "Expected Auxiliary Space": None,
    "time_limit": "2 seconds",
    "date": "2018-06-01",
    "picture_num": "0",
    "memory_limit": "256 megabytes",
    "Expected Time Complexity": None,
}

LIVECODEBENCH: dict[str, Any] = {
    # livecodebench/code_generation_lite (lcb_runner/benchmarks/code_generation.py)
    "question_title": "Sum",
    "question_content": STATEMENT,
    "platform": "atcoder",
    "question_id": "abc999_a",
    "contest_id": "abc999",
    "contest_date": "2024-08-03T00:00:00",
    "starter_code": "",
    "difficulty": "easy",
    "public_test_cases": json.dumps([{"input": "2 3\n", "output": "5\n", "testtype": "stdin"}]),
    "private_test_cases": lcb_private(
        [
            {"input": "10 20\n", "output": "30\n", "testtype": "stdin"},
            {"input": "-7 7\n", "output": "0\n", "testtype": "stdin"},
        ]
    ),
    "metadata": "{}",
}

LIVECODEBENCH_FUNCTIONAL: dict[str, Any] = {
    # a LeetCode row: functional tests, one JSON value per input line, Solution().method
    "question_title": "add-two-integers",
    "question_content": "Return a + b.",
    "platform": "leetcode",
    "question_id": "3999",
    "contest_id": "weekly-contest-999",
    "contest_date": "2024-08-03T00:00:00",
    "starter_code": "class Solution:\n    def addTwo(self, a: int, b: int) -> int:\n        ",
    "difficulty": "easy",
    "public_test_cases": json.dumps([{"input": "2\n3", "output": "5", "testtype": "functional"}]),
    "private_test_cases": lcb_private(
        [{"input": "10\n20", "output": "30", "testtype": "functional"}]
    ),
    "metadata": json.dumps({"func_name": "addTwo"}),
}

CODEFORCES: dict[str, Any] = {
    # open-r1/codeforces (scoring: src/open_r1/utils/competitive_programming/cf_scoring.py)
    "id": "1000/A",
    "aliases": None,
    "contest_id": "1000",
    "contest_name": "Codeforces Round (Div. 2)",
    "contest_type": "CF",
    "contest_start": 1528000000,
    "contest_start_year": 2018,
    "index": "A",
    "time_limit": 1.0,
    "memory_limit": 256.0,
    "title": "Sum",
    "description": STATEMENT,
    "input_format": "Two integers a and b.",
    "output_format": "Their sum.",
    "interaction_format": None,
    "note": None,
    "examples": [{"input": "2 3\n", "output": "5\n"}],
    "editorial": None,
    "rating": 800,
    "tags": ["math"],
    "testset_size": 3,
    "official_tests": [
        {"input": "10 20\n", "output": "30\n"},
        {"input": "-7 7\n", "output": "0\n"},
    ],
    "official_tests_complete": True,
    "input_mode": "stdio",
    "generated_checker": None,
    "executable": True,
    "generated_tests": 0,
}

DEEPCODER: dict[str, Any] = {
    # agentica-org/DeepCoder-Preview-Dataset (primeintellect subset): tests a JSON string
    "problem": STATEMENT,
    "tests": json.dumps(
        [
            {"input": "2 3\n", "output": "5\n", "type": "stdin_stdout"},
            {"input": "10 20\n", "output": "30\n", "type": "stdin_stdout"},
            {"input": "-7 7\n", "output": "0\n", "type": "stdin_stdout"},
        ]
    ),
    "metadata": "{}",
}

VERIFIABLE: dict[str, Any] = {
    # open-r1/verifiable-coding-problems-python (read by open-r1's code_reward)
    "source": "codeforces",
    "task_type": "verifiable_code",
    "in_source_id": "1000_A",
    "prompt": STATEMENT,
    "gold_standard_solution": "```python\nprint(sum(map(int, input().split())))\n```",
    "verification_info": json.dumps(
        {
            "language": "python",
            "test_cases": [
                {"fn_name": None, "input": "2 3\n", "output": "5\n", "type": "stdin_stdout"},
                {"fn_name": None, "input": "10 20\n", "output": "30\n", "type": "stdin_stdout"},
                {"fn_name": None, "input": "-7 7\n", "output": "0\n", "type": "stdin_stdout"},
            ],
        }
    ),
    "metadata": json.dumps({"difficulty": 800}),
    "problem_id": "vfc_1000",
}

SUM_ROWS: dict[str, tuple[dict[str, Any], str]] = {
    "code_contests": (CODE_CONTESTS, "1000_A. Sum"),
    "apps": (APPS, "4242"),
    "taco": (TACO, "0"),
    "livecodebench": (LIVECODEBENCH, "abc999_a"),
    "codeforces": (CODEFORCES, "1000/A"),
    "deepcoder": (DEEPCODER, "0"),
    "verifiable": (VERIFIABLE, "vfc_1000"),
}
"""Each dataset's sum row and the problem id it must get."""
