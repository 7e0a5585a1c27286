"""Settings precedence: flags > environment > config file; unknown keys are errors."""

import pytest

from tracegen.config import DEFAULT_HOST, GenerationSettings, RunSettings, load_settings
from tracegen.errors import ConfigError


def write_config(tmp_path, text):
    path = tmp_path / "tracegen.toml"
    path.write_text(text)
    return path


def test_defaults_work_for_a_local_ollama():
    s = load_settings(RunSettings, {}, env={})
    assert s.hosts == [DEFAULT_HOST]
    assert s.problems == "builtin"
    assert str(s.output) == "traces.jsonl"


def test_flags_beat_environment_which_beats_the_config_file(tmp_path):
    config = write_config(tmp_path, 'model = "from-file"\ntemperature = 0.1\nnum-samples = 3\n')
    env = {"TRACEGEN_MODEL": "from-env", "TRACEGEN_TEMPERATURE": "0.2"}
    s = load_settings(RunSettings, {"model": "from-flag"}, config_file=config, env=env)
    assert (s.model, s.temperature, s.num_samples) == ("from-flag", 0.2, 3)


def test_unset_flags_do_not_override(tmp_path):
    s = load_settings(RunSettings, {"model": None}, env={"TRACEGEN_MODEL": "env-model"})
    assert s.model == "env-model"


def test_ollama_host_and_key_come_from_their_usual_variables():
    env = {"OLLAMA_HOST": "gpu1:11434,http://gpu2:11434/", "OLLAMA_API_KEY": "sk-secret"}
    s = load_settings(RunSettings, {}, env=env)
    assert s.hosts == ["http://gpu1:11434", "http://gpu2:11434"]
    assert s.ollama_api_key is not None and s.ollama_api_key.get_secret_value() == "sk-secret"
    assert s.api_key is None
    assert "sk-secret" not in repr(s) and "sk-secret" not in str(s.model_dump())


def test_unknown_key_in_the_config_file_is_an_error_naming_it(tmp_path):
    config = write_config(tmp_path, 'model = "m"\ntemprature = 0.5\n')
    with pytest.raises(ConfigError, match=r"tracegen.toml: unknown key 'temprature'"):
        load_settings(RunSettings, {}, config_file=config, env={})


def test_bad_value_names_the_setting_and_where_it_came_from():
    with pytest.raises(ConfigError, match=r"^concurrency \(flag\): Input should be greater"):
        load_settings(RunSettings, {"concurrency": -1}, env={})
    with pytest.raises(ConfigError, match=r"^temperature \(environment\)"):
        load_settings(RunSettings, {}, env={"TRACEGEN_TEMPERATURE": "hot"})


def test_invalid_toml_and_missing_config_file_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(RunSettings, {}, config_file=write_config(tmp_path, "model = "), env={})
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(RunSettings, {}, config_file=tmp_path / "nope.toml", env={})


def test_settings_digest_changes_with_what_shapes_traces():
    base = GenerationSettings()
    assert base.digest("prompt") == GenerationSettings().digest("prompt")
    assert base.digest("prompt") != base.digest("another prompt")
    assert base.digest("p") != GenerationSettings(temperature=0.1).digest("p")
    assert base.digest("p") != GenerationSettings(mode="markers").digest("p")


def test_run_settings_hand_over_their_generation_part():
    s = load_settings(RunSettings, {"mode": "markers", "seed": 7}, env={})
    gen = s.generation()
    assert type(gen) is GenerationSettings
    assert (gen.mode, gen.seed) == ("markers", 7)


def test_credentials_in_a_url_are_hidden_wherever_it_is_quoted():
    from tracegen.config import redact_url

    text = "cannot reach Ollama at https://me:p@ss@gpu1:11434/x: is it up? and http://gpu2"
    assert (
        redact_url(text)
        == "cannot reach Ollama at https://***@gpu1:11434/x: is it up? and http://gpu2"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"seed": 2**64}, r"^seed \(flag\): .*less than or equal to 9223372036854775807"),
        ({"concurrency": 5000}, r"^concurrency \(flag\): .*less than or equal to 1024"),
        ({"num_samples": 10**6}, r"^num-samples \(flag\): .*less than or equal to 10000"),
        ({"exec_timeout": 1e-9}, r"^exec-timeout \(flag\): .*greater than or equal to 0.001"),
        ({"problem_ids": " , "}, r"^problem-ids \(flag\): .*names no problem id"),
        ({"problem_ids": []}, r"^problem-ids \(flag\): .*names no problem id"),
    ],
)
def test_settings_beyond_their_documented_bounds_are_refused(flags, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(RunSettings, flags, env={})
