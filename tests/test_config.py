from pathlib import Path

import pytest
import yaml

from lalmeval.config import load_config, parse_config
from lalmeval.secrets import redacted_config as redacted
from lalmeval.errors import UserError

BASE = {"dataset_metric": [["demo_commands", "word_error_rate"]], "models": [{"info": {"name": "m", "url": "http://x/v1", "model": "m"}}]}


def config_with(**changes):
    data = {**BASE, **changes}
    return parse_config(data, "cfg.yaml")


def test_misspelt_top_level_key_names_key_and_nearest_valid_key():
    with pytest.raises(UserError, match=r"cfg.yaml: unknown key 'dataset_metrics' \(did you mean 'dataset_metric'\?\)"):
        config_with(dataset_metrics=[])


def test_misspelt_model_key_names_nearest_model_field():
    data = {**BASE, "models": [{"info": {"name": "m", "url": "http://127.0.0.1:8000/v1", "model": "m", "batchsize": 3}}]}
    with pytest.raises(UserError, match=r"unknown key 'models\[0\]\.batchsize' \(did you mean 'batch_size'\?\)"):
        parse_config(data, "cfg.yaml")


def test_misspelt_filter_key_names_nearest_filter():
    with pytest.raises(UserError, match=r"unknown key 'filters.num_sample' \(did you mean 'num_samples'\?\)"):
        config_with(filters={"num_sample": 3})


def test_wrong_type_names_the_key():
    data = {**BASE, "models": [{"info": {"name": "m", "url": "http://127.0.0.1:8000/v1", "model": "m", "batch_size": "many"}}]}
    with pytest.raises(UserError, match=r"models\[0\]\.batch_size"):
        parse_config(data, "cfg.yaml")


def test_missing_required_key_is_named():
    with pytest.raises(UserError, match="missing required key 'models'"):
        parse_config({"dataset_metric": [["a", "b"]]}, "cfg.yaml")


def test_env_interpolation_fills_values(monkeypatch):
    monkeypatch.setenv("LALM_URL", "http://127.0.0.1:9/v1")
    data = {**BASE, "models": [{"info": {"name": "m", "url": "${LALM_URL}", "model": "m", "auth_token": "${LALM_TOKEN:-fallback}"}}]}
    config = parse_config(data, "cfg.yaml")
    assert config.models[0].url == "http://127.0.0.1:9/v1"
    assert config.models[0].auth_token.get_secret_value() == "fallback"


def test_missing_env_var_is_an_error_naming_it_and_where(monkeypatch):
    monkeypatch.delenv("LALM_NOPE", raising=False)
    data = {**BASE, "models": [{"info": {"name": "m", "url": "${LALM_NOPE}", "model": "m"}}]}
    with pytest.raises(UserError, match=r"environment variable 'LALM_NOPE' is not set \(used at models\[0\]\.info\.url\)"):
        parse_config(data, "cfg.yaml")


def test_duplicate_model_names_rejected():
    model = {"info": {"name": "m", "url": "http://127.0.0.1:8000/v1", "model": "m"}}
    with pytest.raises(UserError, match="model names must be unique; repeated: m"):
        config_with(models=[model, model])


def test_temperature_override_for_unknown_model_rejected():
    with pytest.raises(UserError, match="unknown model 'mm'"):
        config_with(temperature_overrides=[{"model": "mm", "temperature": 0.5}])


def test_flat_model_entries_are_accepted_too():
    config = config_with(models=[{"name": "flat", "url": "http://127.0.0.1:8000/v1", "model": "m"}])
    assert config.models[0].name == "flat"


def test_invalid_yaml_reports_line(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("dataset_metric:\n  - [a, b\nmodels: []\n")
    with pytest.raises(UserError, match=r"bad.yaml: invalid YAML at line"):
        load_config(path)


def test_redacted_config_hides_tokens():
    config = config_with(models=[{"info": {"name": "m", "url": "http://127.0.0.1:8000/v1", "model": "m", "auth_token": "sk-secret-value-123"}}])
    dumped = yaml.safe_dump(redacted(config))
    assert "sk-secret-value-123" not in dumped and "<redacted>" in dumped


def test_sample_config_is_valid_and_documents_every_key(monkeypatch):
    repo = Path(__file__).resolve().parents[1]
    for var, value in (("ENDPOINT_URL", "http://127.0.0.1:8000/v1"), ("AUTH_TOKEN", "x"), ("API_VERSION", "x")):
        monkeypatch.setenv(var, value)
    text = (repo / "sample_config.yaml").read_text()
    load_config(repo / "sample_config.yaml")
    from lalmeval.config import Config, Filters, GenerationOverride, JudgeProperties, ModelInfo, PromptRule, TemperatureOverride
    from lalmeval.generation import Generation

    for schema in (Config, Filters, ModelInfo, TemperatureOverride, JudgeProperties, GenerationOverride, PromptRule, Generation):
        for key in schema.model_fields:
            assert f"{key}:" in text, f"sample_config.yaml does not show '{key}'"


def test_redaction_reaches_secrets_inside_other_values():
    model = {"name": "m", "url": "http://127.0.0.1:8000/v1", "model": "m", "auth_token": "tok-in-launch-9876", "launch": "vllm serve x --api-key tok-in-launch-9876"}
    dumped = yaml.safe_dump(redacted(config_with(models=[{"info": model}])))
    assert "tok-in-launch-9876" not in dumped and "--api-key <redacted>" in dumped


def test_an_invalid_token_is_reported_without_echoing_it():
    for token in ("sk-live-SECRET-value\nX", " sk-live-SECRET-value"):
        data = {**BASE, "models": [{"info": {"name": "m", "url": "http://x/v1", "model": "m", "auth_token": token}}]}
        with pytest.raises(UserError) as err:
            parse_config(data, "cfg.yaml")
        assert "models[0].auth_token" in str(err.value) and "SECRET" not in str(err.value)


def test_secrets_are_blanked_by_field_and_scrubbed_elsewhere_only_when_long_enough():
    """A one-letter token cannot be told from the letters of a model id or a command: it is blanked in its
    own field only, and the run warns that the config repeats it. Credential fields of extra_body are secrets."""
    from lalmeval.secrets import short_secret_warnings

    extra = {"api_key": "key-in-body-12345", "skip_special_tokens": False, "return_tokens_as_token_ids": True}
    model = {"name": "m", "url": "http://127.0.0.1:8000/v1", "model": "mistralai/Voxtral-Mini-3B", "auth_token": "x",
             "launch": "serve --api-key key-in-body-12345 --name x", "generation_kwargs": {"extra_body": extra}}
    config = config_with(models=[{"info": model}], generation_overrides=[{"model": "m", "extra_body": {"accessToken": "tok2"}}])
    dumped = redacted(config)
    entry = dumped["models"][0]
    assert entry["auth_token"] == "<redacted>" and entry["model"] == "mistralai/Voxtral-Mini-3B"
    assert entry["launch"] == "serve --api-key <redacted> --name x"
    assert entry["generation_kwargs"]["extra_body"] == {**extra, "api_key": "<redacted>"}
    assert dumped["generation_overrides"][0]["extra_body"] == {"accessToken": "<redacted>"}
    warnings = short_secret_warnings(config)
    assert len(warnings) == 1 and warnings[0].startswith("warning: models[m].auth_token is shorter than 6 characters"), warnings


def test_a_config_error_never_quotes_a_secret():
    token = "sk-live-SECRET-value-0123"
    for settings in ({"auth_token": token}, {"generation_kwargs": {"extra_body": {"api_key": token}}}):
        data = {**BASE, "models": [{"info": {"name": "m", "url": f"http://x:0/gw/{token}/v1", "model": "m", **settings}}]}
        with pytest.raises(UserError) as err:
            parse_config(data, "cfg.yaml")
        assert "models[0].url" in str(err.value) and "/gw/<redacted>/v1" in str(err.value) and token not in str(err.value)
