from pathlib import Path

import pytest
import yaml

from lalmeval.config.schema import load_config, parse_config
from lalmeval.config.secrets import redacted_config as redacted
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


def test_entries_repeating_a_name_are_accepted_as_the_replicas_of_one_model():
    first = {"info": {"name": "m", "url": "http://127.0.0.1:8000/v1", "model": "m"}}
    second = {"info": {"name": "m", "url": "http://127.0.0.1:8001/v1", "model": "m"}}
    assert [m.name for m in config_with(models=[first, second]).models] == ["m", "m"]


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_max_failure_rate_is_a_share_between_0_and_1(value):
    with pytest.raises(UserError, match=r"max_failure_rate: Input should be (greater|less) than or equal to"):
        config_with(max_failure_rate=value)


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
    from lalmeval.config.schema import Config, Filters, GenerationOverride, JudgeProperties, ModelInfo, PromptRule, TemperatureOverride
    from lalmeval.config.generation import Generation

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


def test_a_generation_setting_that_cannot_be_sent_is_refused_at_start(ws, capsys):
    """`generation_kwargs.extra_body: {until: 2024-01-01}` — YAML reads an unquoted date as a date,
    which no request body can carry: refused before any work, one line naming the key (exit 2),
    instead of every sample failing with `internal error: TypeError: ... not JSON serializable`."""
    from lalmeval.cli.commands import main
    from tests.support.endpoint import ScriptedEndpoint
    from tests.support.workspace import model

    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(3)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})
    with ScriptedEndpoint(lambda seen, n: "answer") as ep:
        path = ws.config([model(ep.url, generation_kwargs={"extra_body": {"until": "DATE"}})], [["qs", "accuracy"]],
                         output_dir=str(ws.root / "runs"))
        path.write_text(path.read_text().replace("DATE", "2024-01-01"))
        code = main(["run", "--config", str(path), "--run-id", "t"])
        sent = len(ep.requests)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and sent == 0 and not (ws.root / "runs" / "t").exists()
    assert lines == [f"error: {path}: models[0].generation_kwargs.extra_body: 'until': 2024-01-01 is a date, not a JSON value; "
                     "quote it to send it as text"]


@pytest.mark.parametrize("where,extra_body,message", [
    ("model", "{a: {b: [1, .nan]}}", "models[0].generation_kwargs.extra_body: 'a.b[1]': nan is not a finite number, which JSON cannot carry"),
    ("model", "{tags: !!set {x: null}}", "models[0].generation_kwargs.extra_body: 'tags': {'x'} is a set, not a JSON value"),
    ("model", "{weights: {2024-01-01: 1}}", "models[0].generation_kwargs.extra_body: key datetime.date(2024, 1, 1) under 'weights' is a date, not text"),
    ("override", "{since: 2024-01-01 10:00:00}", "generation_overrides[0].extra_body: 'since': 2024-01-01 10:00:00 is a datetime, not a JSON value"),
])
def test_every_extra_body_value_a_request_cannot_carry_is_refused_naming_its_key(tmp_path, where, extra_body, message):
    entry = "{name: m, url: 'http://127.0.0.1:9/v1', model: m" + (f", generation_kwargs: {{extra_body: {extra_body}}}" if where == "model" else "") + "}"
    overrides = f"generation_overrides: [{{model: m, extra_body: {extra_body}}}]\n" if where == "override" else ""
    (tmp_path / "c.yaml").write_text(f"dataset_metric: [[demo_commands, word_error_rate]]\nmodels: [{entry}]\n{overrides}")
    with pytest.raises(UserError) as err:
        load_config(tmp_path / "c.yaml")
    assert message in str(err.value)


def test_integer_keys_of_extra_body_are_sent_as_json_would_send_them():
    """`logit_bias: {50256: -100}` is how a YAML user writes it; JSON keys are text."""
    config = config_with(models=[{"info": {"name": "m", "url": "http://x/v1", "model": "m",
                                           "generation_kwargs": {"extra_body": {"logit_bias": {50256: -100}}}}}])
    assert config.models[0].generation_kwargs.extra_body == {"logit_bias": {"50256": -100}}


def test_a_runspec_extra_body_value_json_cannot_carry_is_refused_naming_the_dataset(tmp_path):
    from lalmeval.catalog.runspecs import Catalog

    (tmp_path / "qa").mkdir()
    (tmp_path / "qa" / "questions.json").write_text('{"qs": {"hf_repo": "x.jsonl", "language": "en", "generation_kwargs": {"extra_body": {"bias": NaN}}}}')
    with pytest.raises(UserError, match=r"questions.json: dataset 'qs': generation_kwargs.extra_body: 'bias': nan is not a finite number"):
        Catalog.load([tmp_path])


def test_secrets_are_blanked_by_field_and_scrubbed_elsewhere_only_when_long_enough():
    """A one-letter token cannot be told from the letters of a model id or a command: it is blanked in its
    own field only, and the run warns that the config repeats it. Credential fields of extra_body are secrets."""
    from lalmeval.config.secrets import short_secret_warnings

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
