"""Deployment limits: hostile model specs are refused and env vars set the caps."""
import pytest

from specviz.ui.runtime.limits import Limits, check_model_spec, check_run_settings, count_params_from_config


@pytest.mark.parametrize("spec", ["../../etc/passwd", "/etc", "~/secrets", "a;rm -rf /", "$(reboot)",
                                  "x" * 300, "owner/na me", "a/b/c", "..", "bad\x00id", "", "   "])
def test_hostile_specs_are_refused(spec):
    """Path traversal, local paths, shell characters, NUL and over-long ids raise ValueError."""
    with pytest.raises(ValueError):
        check_model_spec(spec, Limits())


def test_valid_specs_pass_and_local_needs_the_flag(tmp_path):
    """Hub ids and the bundled model pass; a local folder passes only when local models are allowed."""
    for spec in ["bundled", "gpt2", "HuggingFaceTB/SmolLM2-360M-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"]:
        assert check_model_spec(spec, Limits()) == spec
    with pytest.raises(ValueError, match="SPECVIZ_ALLOW_LOCAL_MODELS"):
        check_model_spec(str(tmp_path), Limits())
    assert check_model_spec(str(tmp_path), Limits(allow_local=True)) == str(tmp_path)


def test_allow_list_and_env(monkeypatch):
    """SPECVIZ_ALLOWED_MODELS restricts hub ids; numeric env vars set the caps."""
    monkeypatch.setenv("SPECVIZ_ALLOWED_MODELS", "gpt2, distilgpt2")
    monkeypatch.setenv("SPECVIZ_MAX_K", "5")
    limits = Limits.from_env()
    assert limits.max_k == 5 and limits.allowed_models == {"gpt2", "distilgpt2"}
    assert check_model_spec("gpt2", limits) == "gpt2"
    with pytest.raises(ValueError, match="not on this server's model list"):
        check_model_spec("gpt2-xl", limits)
    with pytest.raises(ValueError, match="SPECVIZ_MAX_K"):
        check_run_settings(limits, k=6, max_new_tokens=10)
    monkeypatch.setenv("SPECVIZ_MAX_K", "lots")
    with pytest.raises(ValueError, match="SPECVIZ_MAX_K"):
        Limits.from_env()


def test_param_count_from_config_needs_no_weights():
    """The parameter count is read from a config on the meta device and matches a real model."""
    from specviz.loading.loader import tiny_random

    tiny = tiny_random()
    assert count_params_from_config(tiny.model.config) == tiny.n_params


def test_queue_positions_go_out_on_a_timer_unless_asked_for_on_every_start(monkeypatch):
    """By default the page's queue sends waiting visitors their position once a second, not each
    time any event starts (Gradio's "auto"); SPECVIZ_STATUS_UPDATE_S=0 (or less) asks for "auto", and a
    value that is not a number is refused with the variable's name."""
    from specviz.ui import page
    from specviz.ui.runtime import state

    demo = page.build_demo()
    assert demo._queue.live_updates is False and demo._queue.update_intervals == 1.0
    for auto in ("0", "-1"):
        monkeypatch.setenv("SPECVIZ_STATUS_UPDATE_S", auto)
        monkeypatch.setattr(state, "LIMITS", Limits.from_env())
        assert page.build_demo()._queue.live_updates is True
    monkeypatch.setenv("SPECVIZ_STATUS_UPDATE_S", "often")
    with pytest.raises(ValueError, match="SPECVIZ_STATUS_UPDATE_S"):
        Limits.from_env()
