import json
import re
import subprocess
import sys

import pytest

from lalmeval.catalog.runspecs import Catalog
from lalmeval.errors import UserError
from lalmeval.metrics import METRICS
from tests.support.workspace import REPO


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def entry(**extra):
    return {"hf_repo": "org/x", "language": "en", **extra}


def test_names_resolve_as_dataset_then_task_type_then_category(tmp_path):
    write(tmp_path / "paralinguistics" / "emotion.json", {"meld": entry(), "iemocap": entry()})
    write(tmp_path / "paralinguistics" / "accent.json", {"edacc": entry()})
    catalog = Catalog.load([tmp_path])
    assert [d.name for d in catalog.resolve("meld")] == ["meld"]
    assert [d.name for d in catalog.resolve("emotion")] == ["iemocap", "meld"]
    assert [d.name for d in catalog.resolve("paralinguistics")] == ["edacc", "iemocap", "meld"]


def test_unknown_name_suggests_closest(tmp_path):
    write(tmp_path / "asr" / "librispeech.json", {"librispeech_test_clean": entry()})
    with pytest.raises(UserError, match="did you mean 'librispeech_test_clean'"):
        Catalog.load([tmp_path]).resolve("librispeech_test_clen")


def test_duplicate_dataset_names_error_names_both_files(tmp_path):
    write(tmp_path / "a" / "one.json", {"same": entry()})
    write(tmp_path / "b" / "two.json", {"same": entry()})
    with pytest.raises(UserError) as err:
        Catalog.load([tmp_path])
    assert "one.json" in str(err.value) and "two.json" in str(err.value)


def test_bad_json_names_file_and_line(tmp_path):
    write(tmp_path / "a" / "broken.json", '{"x": {"hf_repo": "a",\n "language": }')
    with pytest.raises(UserError, match=r"broken.json: invalid JSON at line 2"):
        Catalog.load([tmp_path])


def test_unknown_runspec_field_suggests_closest(tmp_path):
    write(tmp_path / "a" / "t.json", {"x": entry(target_colum="text")})
    with pytest.raises(UserError, match=r"dataset 'x': unknown field 'target_colum' \(did you mean 'target_column'\?\)"):
        Catalog.load([tmp_path])


def test_unknown_language_is_rejected(tmp_path):
    write(tmp_path / "a" / "t.json", {"x": entry(language="Klingonese")})
    with pytest.raises(UserError, match="unknown language 'Klingonese'"):
        Catalog.load([tmp_path])


@pytest.mark.parametrize("setting", [{"mc_template": "mc_options_zh"}, {"shuffle_options": True}])
def test_a_multiple_choice_setting_on_a_dataset_without_options_is_refused(tmp_path, setting):
    """It would do nothing: the options never reach the prompt, so the user is told instead."""
    write(tmp_path / "a" / "t.json", {"x": entry(target_column="answer", **setting)})
    field = next(iter(setting))
    with pytest.raises(UserError, match=rf"t.json: dataset 'x': {field} applies to multiple choice, and this dataset has no options"):
        Catalog.load([tmp_path])
    write(tmp_path / "a" / "t.json", {"x": entry(target_column="answer", choices_column="options", **setting)})
    write(tmp_path / "b" / "u.json", {"y": entry(format="twinkle", **setting)})  # the format finds the option columns
    assert [d.name for d in Catalog.load([tmp_path]).resolve("x")] == ["x"]


def test_builtin_runspecs_load_and_use_known_processors_and_metrics():
    from lalmeval.run.plan import _check_processors

    catalog = Catalog.load([REPO / "runspecs"])
    assert "demo_commands" in catalog.datasets and "librispeech_test_clean" in catalog.datasets
    for dataset in catalog.datasets.values():
        _check_processors(dataset)


def test_list_command_prints_families_and_expands_every_dataset_on_request():
    def listing(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "lalmeval", "list", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout

    out = listing()
    assert "\n  demo_commands (1): en · lalmeval 1 · word_error_rate · local data: 1 of 1 present\n" in out
    assert re.search(r"\n  fleurs \(\d+\): 10\d languages · au_harness 102, kimi 2, lalmeval 4, lmms 3 · word_error_rate · local data: \d+ of \d+ present\n", out)
    assert "librispeech_test_other  [" not in out  # families, not every dataset
    assert re.search(r"\n    librispeech_test_other +\[en; word_error_rate\]\n", listing("--expand"))
    assert re.search(r"\n    librispeech_test_other@lmms_v0.3 +\[en; word_error_rate; lmms_v0.3\]\n", listing("librispeech"))


def test_every_builtin_dataset_plans_with_all_its_metrics(tmp_path):
    from lalmeval.config.schema import parse_config
    from lalmeval.run.plan import build_plan

    catalog = Catalog.load([REPO / "runspecs"])
    categories = sorted({d.category for d in catalog.datasets.values()})
    config = parse_config({
        "dataset_metric": [[c, "all"] for c in categories],
        "models": [{"name": "m", "url": "http://127.0.0.1:9/v1", "model": "m", "modalities": ["text", "audio"]}],   # it speaks too
        "judge_properties": {"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1"},
        "transcriber": {"url": "http://127.0.0.1:9/v1", "model": "whisper-tiny.en"},   # speech_wer of the TTS sets
    }, "c.yaml")
    # Optional extras (bertscore, comet, ...) refuse to start without their package: plan the rest.
    extras = set()
    for metric in {m for d in catalog.datasets.values() for m in d.spec.metrics}:
        try:
            METRICS.get(metric).check(config)
        except UserError as exc:
            assert "pip install" in str(exc) or "apt-get install" in str(exc), exc
            extras.add(metric)
    config = config.model_copy(update={"dataset_metric": [[d.name, m] for d in catalog.datasets.values() for m in d.spec.metrics if m not in extras]})
    plan = build_plan(config, tmp_path / "c.yaml")
    assert {d.name for d, _ in plan.pairs} == set(catalog.datasets)
    assert {"bleu", "chrf", "llm_judge_binary", "llm_judge_detailed", "word_error_rate"} <= {m for _, m in plan.pairs}


@pytest.mark.parametrize("value", ["au_harness", "somebody:task", ":task"])
def test_reproduces_must_name_a_known_peer_and_a_task(tmp_path, value):
    write(tmp_path / "a" / "t.json", {"x": entry(reproduces=value)})
    with pytest.raises(UserError, match=r"t.json: dataset 'x': reproduces must be '<peer>:<task>' with peer one of au_harness, lmms, lmms_v0.3, kimi"):
        Catalog.load([tmp_path])
    write(tmp_path / "a" / "t.json", {"x": entry(reproduces="lmms_v0.3:librispeech_test_clean")})
    assert Catalog.load([tmp_path]).datasets["x"].spec.reproduces == "lmms_v0.3:librispeech_test_clean"
