from collections import Counter

from tests.support.toolcall_corpus import judge, load_corpus


def test_corpus_holds_at_least_fifty_malformed_calls_and_some_valid_ones() -> None:
    kinds = Counter(str(row["kind"]) for row in load_corpus())
    valid = kinds["valid"] + kinds["valid_in_think"]
    assert sum(kinds.values()) - valid >= 50
    assert valid >= 5
    assert len(kinds) >= 20


def test_no_call_in_the_corpus_is_recovered_wrongly() -> None:
    wrong = [j.id for j in map(judge, load_corpus()) if j.outcome == "wrong"]
    assert wrong == []


def test_parse_success_rate_on_the_corpus_is_at_least_95_percent() -> None:
    judged = [judge(row) for row in load_corpus()]
    recoverable = [j for j in judged if j.outcome != "refused"]
    parsed = [j for j in recoverable if j.outcome == "parsed"]
    assert len(parsed) / len(recoverable) >= 0.95, [j.id for j in recoverable if j not in parsed]


def test_unreadable_calls_in_the_corpus_are_refused() -> None:
    rows = [row for row in load_corpus() if row["expected_code"] is None]
    assert rows
    assert {judge(row).outcome for row in rows} == {"refused"}


def test_every_repair_strategy_is_exercised_by_the_corpus() -> None:
    strategies = Counter(j.strategy for j in map(judge, load_corpus()) if j.outcome == "parsed")
    assert {"strict", "escaped", "extracted"} <= set(strategies)
