"""specviz.passes.fastpath on tiny random Llamas: our own forward gives the modules' logits bit for
bit, wherever the engine uses it, and the modules run wherever it does not apply."""
import copy
import logging
import os
import threading
from pathlib import Path

import pytest
import torch

import specviz
from specviz.decoding.engine import generate
from specviz.decoding.targets import LocalTarget
from specviz.drafting.tree import DraftTree
from specviz.loading.loader import derive_draft, tiny_random
from specviz.passes import fastcheck, fastpath, speedups, verdicts
from specviz.passes.kvcache import new_cache, rollback
from tests.helpers.drafts import drafted
from tests.helpers.tiny import PROMPTS

pytestmark = pytest.mark.skipif(not speedups._onednn_works(), reason="this torch build has no oneDNN linear")


def tuned(family="llama", **kw):
    """A tiny model of `family` with the CPU speed-ups applied, as `load` gives it."""
    loaded = tiny_random(family=family, **kw)
    speedups.apply(loaded.model)
    return loaded


def modules_pass(model, ids, cache, position_ids=None, mask=None, keep=0):
    """(logits, final-norm output) of transformers' own modules, the reference."""
    kept = []
    hook = model.model.norm.register_forward_hook(lambda m, a, out: kept.append(out))
    try:
        with torch.inference_mode():
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, position_ids=position_ids,
                        attention_mask=mask, **({"logits_to_keep": keep} if keep else {}))
    finally:
        hook.remove()
    return out.logits, kept[-1]


@pytest.mark.parametrize("kv_heads", [2, 4])
def test_every_kind_of_pass_has_the_modules_bits(kv_heads):
    """A prefill (last row only, as the engine asks), one-token steps, a chain and a draft tree with
    its mask and positions: our forward's logits and final hidden states equal the modules' bit for
    bit, and the two caches hold the same keys after every pass (grouped and plain attention)."""
    target = tuned(kv_heads=kv_heads, layers=3, seed=3)
    model = target.model
    assert fastpath.of(model) is not None
    ours, theirs = new_cache(), new_cache()

    def both(tokens, **kw):
        ids = torch.tensor([tokens])
        got = fastpath.forward(model, ids, ours, **kw)
        want = modules_pass(model, ids, theirs, **kw)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        for a, b in zip(ours.layers, theirs.layers):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
        return got[0]

    both(PROMPTS[2], keep=1)
    both([5])
    both([6, 7])
    both([8, 9, 10, 11, 12])
    tree = DraftTree([3, 4, 5, 6, 7], [-1, -1, 0, 0, 2])
    past = ours.get_seq_length()
    mask = tree.model_mask(ours, model.config, torch.float32)
    logits = both([13] + tree.tokens, position_ids=tree.position_ids(past), mask=mask)
    assert logits.shape == (1, 6, target.vocab_size)
    rollback(ours, past)
    rollback(theirs, past)
    both([14, 15])


@pytest.mark.drafts
def test_decoding_is_the_same_with_and_without_it(monkeypatch):
    """Greedy runs of AR, prompt lookup and a draft tree, and sampled runs with a seed (AR, and a
    draft model whose own steps take our forward too), commit the same tokens and draw the same
    way with our forward as with the modules (the engine's passes go through LocalTarget, the
    draft model's through draft_model._plain)."""
    target = tuned(seed=5)
    draft = derive_draft(target, noise=0.05, seed=9)
    runs = [dict(method="ar"), dict(method="pld", k=4), dict(method="logitspec", k=4),
            dict(method="ar", temperature=0.8, seed=11),
            dict(method="draft", draft=draft, k=3, temperature=0.8, seed=12, plan=False)]  # sent: c ≈ 1 sends none

    def tokens():
        done = [generate(target, PROMPTS[0] * 3, max_new_tokens=16, **kw) for kw in runs]
        assert all(drafted(run) > 0 for run in done[1:3] + done[4:]), "a drafting run sent no draft"
        return [run.token_ids for run in done]

    assert fastpath.of(target.model) is not None and fastpath.of(draft.model) is not None
    fast = tokens()
    monkeypatch.setattr(fastpath, "SUPPORTED", ())
    fastpath._BUILT.clear()
    assert fastpath.of(target.model) is None
    assert tokens() == fast


def test_local_target_returns_the_hidden_rows_the_head_reads():
    """LocalTarget.forward's hidden states (what the draft head reads) are the final norm's output
    rows, the same as the hook on the modules gives, for a full pass and a last-row prefill."""
    target = tuned(seed=2)
    local = LocalTarget(target)
    cache, theirs = new_cache(), new_cache()
    logits, hidden = local.forward(PROMPTS[2], cache, last_only=True, hidden=True)
    want_logits, want_hidden = modules_pass(target.model, torch.tensor([PROMPTS[2]]), theirs, keep=1)
    assert torch.equal(logits, want_logits[0]) and torch.equal(hidden, want_hidden[0])
    assert hidden.shape == (len(PROMPTS[2]), target.model.config.hidden_size)


@pytest.mark.parametrize("family", ["qwen2", "gemma3", "gpt2"])
def test_other_families_run_their_modules(family):
    """Only Llama has our forward; other families (biases, sliding layers, another layout) run
    transformers' modules, and forward() says so with None."""
    target = tuned(family=family)
    assert fastpath.of(target.model) is None
    assert fastpath.forward(target.model, torch.tensor([[1, 2]]), new_cache()) is None


def test_no_fast_forward_without_the_packed_linears():
    """A model loaded without the CPU speed-ups (SPECVIZ_NO_SPEEDUPS=1), after `speedups.remove`, or
    in training mode runs its modules: the fast forward reads the speed-ups' packed weights. The
    answer follows the model: the speed-ups applied later turn it on."""
    plain = tiny_random(seed=1)
    assert fastpath.of(plain.model) is None
    speedups.apply(plain.model)  # decided again once the speed-ups are on
    assert fastpath.of(plain.model) is not None
    plain.model.train()
    assert fastpath.of(plain.model) is None
    target = tuned(seed=1)
    assert fastpath.of(target.model) is not None
    speedups.remove(target.model)
    assert fastpath.of(target.model) is None


@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_an_edited_weight_is_used_at_once(how):
    """A weight edited in place after the fast forward was built (a test's noise, a fine-tune), or
    replaced by another tensor, is packed again before the next pass, so its logits are still the
    modules' (and differ from before the edit)."""
    target = tuned(seed=4)
    model = target.model
    ids = torch.tensor([PROMPTS[0]])
    before = fastpath.forward(model, ids, new_cache())[0]
    with torch.no_grad():
        if how == "in place":
            model.model.layers[1].mlp.up_proj.weight.mul_(1.5)
            model.model.layers[0].self_attn.k_proj.weight.add_(0.01)
        else:
            down = model.model.layers[1].mlp.down_proj
            down.weight = torch.nn.Parameter(down.weight * 1.5)
    got = fastpath.forward(model, ids, new_cache())
    want = modules_pass(model, ids, new_cache())
    assert torch.equal(got[0], want[0]) and not torch.equal(got[0], before)


def test_a_forward_that_differs_is_never_used(monkeypatch):
    """The check at first use compares logits bit for bit: a forward whose rotary embedding is off
    by one part in a million is refused, and the engine's passes run the modules."""
    target = tuned(seed=6)
    right = fastpath._rotate
    monkeypatch.setattr(fastpath, "_rotate", lambda x, cos, sin: right(x, cos, sin) * (1 + 1e-6))
    assert fastpath.FastForward(target.model).check() is not None
    assert fastpath.of(target.model) is None
    local = LocalTarget(target)
    logits, _ = local.forward(PROMPTS[0], new_cache())
    assert torch.equal(logits, modules_pass(target.model, torch.tensor([PROMPTS[0]]), new_cache())[0][0])


def test_copies_of_a_model_get_their_own():
    """Each model object has its own fast forward (built from its own weights): a deep copy with
    other weights does not reuse the original's."""
    target = tuned(seed=7)
    other = copy.deepcopy(target)
    with torch.no_grad():
        for p in other.model.parameters():
            p.mul_(0.9)
    ids = torch.tensor([PROMPTS[1]])
    assert fastpath.of(target.model) is not fastpath.of(other.model)
    assert torch.equal(fastpath.forward(other.model, ids, new_cache())[0],
                       modules_pass(other.model, ids, new_cache())[0])


def fallbacks(caplog) -> list[logging.LogRecord]:
    """What fastpath logged at WARNING or above."""
    return [r for r in caplog.records if r.name == fastpath.log.name and r.levelno >= logging.WARNING]


FALLBACKS = {  # why the modules run: (the model, set up; what the warning says)
    "not Llama": (lambda mp: tuned(family="qwen2").model, "covers LlamaForCausalLM, not Qwen2ForCausalLM"),
    "not packed": (lambda mp: tiny_random(seed=1).model, "its linear layers are not packed"),
    "training": (lambda mp: tuned(seed=1).model.train(), "training mode"),
    "dtype": (lambda mp: tuned(seed=1).model.to(torch.bfloat16), "its dtype is torch.bfloat16"),
    "device": (lambda mp: tuned(seed=1).model.to("meta"), "on the device meta"),
    "attention": (lambda mp: _eager(tuned(seed=1).model), "its attention is 'eager', not SDPA"),
    "check": (lambda mp: _off_by_a_millionth(mp, tuned(seed=1).model),
              "its logits on a 7-token prefill differ from the modules' (max abs difference "),
    "build": (lambda mp: _unbuildable(mp, tuned(seed=1).model),
              "building or checking it failed (RuntimeError: a layout it does not know)"),
}


def _eager(model):
    model.set_attn_implementation("eager")
    return model


def _unbuildable(monkeypatch, model):
    def refuse(layer):
        raise RuntimeError("a layout it does not know")

    monkeypatch.setattr(fastpath, "_Layer", refuse)
    return model


def _off_by_a_millionth(monkeypatch, model):
    right = fastpath._rotate
    monkeypatch.setattr(fastpath, "_rotate", lambda x, cos, sin: right(x, cos, sin) * (1 + 1e-6))
    return model


@pytest.mark.parametrize("why", list(FALLBACKS))
def test_a_fallback_is_a_warning_that_says_why(why, monkeypatch, caplog):
    """Wherever the modules run instead of our forward (not a Llama, linears not packed, training
    mode, another dtype or device, another attention, the check at first use finding other bits,
    or building it failing), fastpath logs one WARNING naming the model's class and the reason
    (for the check: which pass differed and the max abs difference), once per decision."""
    model = FALLBACKS[why][0](monkeypatch)
    with caplog.at_level(logging.WARNING, logger=fastpath.log.name):
        assert fastpath.of(model) is None
        assert fastpath.of(model) is None  # decided: not logged again
    [record] = fallbacks(caplog)
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert type(model).__name__ in message and "runs its modules, not our fast forward" in message
    assert FALLBACKS[why][1] in message, message
    if why == "check":
        assert float(message.split("max abs difference ")[1].split(")")[0]) > 0


def test_the_check_makes_verify_passes_as_the_engine_does(monkeypatch):
    """The check at first use makes draft-tree passes as a verify pass is made: 17 and 33 rows
    ([root] + nodes), each with the 4-D float mask and the explicit position ids that DraftTree
    (model_mask, position_ids) gives the engine over the cache as it stands, through our forward
    and through the modules alike."""
    model = tuned(seed=10).model
    ours, trees = fastpath.FastForward.__call__, []

    def spy(self, ids, cache, position_ids=None, mask=None, keep=0):
        if mask is not None:
            tree = DraftTree(ids[0, 1:].tolist(), list(fastcheck.TREES[len(trees)]))
            assert mask.dim() == 4 and position_ids is not None
            assert torch.equal(mask, tree.model_mask(cache, model.config, torch.float32))
            assert torch.equal(position_ids, tree.position_ids(cache.get_seq_length()))
            trees.append(ids.shape[1])
        return ours(self, ids, cache, position_ids, mask, keep)

    masks = []
    model.register_forward_pre_hook(lambda m, args, kw: masks.append(kw.get("attention_mask")), with_kwargs=True)
    monkeypatch.setattr(fastpath.FastForward, "__call__", spy)
    assert fastpath.of(model) is not None
    assert trees == [17, 33]
    assert [m.shape[-2] for m in masks if m is not None and m.dim() == 4] == [17, 33]


@pytest.mark.parametrize("rows", [17, 33])
def test_a_forward_that_differs_only_on_a_tree_pass_is_never_used(rows, monkeypatch, caplog):
    """The check compares each tree pass bit for bit: a forward with the modules' bits on the
    prefill, the steps and the chains, but one logit of one tree pass (the 17-row one, or the
    33-row one) one float step off, is refused with a WARNING naming that pass, and the engine's
    passes run the modules."""
    target = tuned(seed=11)
    ours = fastpath.FastForward.__call__

    def one_step_off(self, ids, cache, position_ids=None, mask=None, keep=0):
        logits, hidden = ours(self, ids, cache, position_ids, mask, keep)
        if mask is not None and ids.shape[1] == rows:
            logits = logits.clone()
            logits[0, -1, 0] = torch.nextafter(logits[0, -1, 0], torch.tensor(float("inf")))
        return logits, hidden

    monkeypatch.setattr(fastpath.FastForward, "__call__", one_step_off)
    with caplog.at_level(logging.WARNING, logger=fastpath.log.name):
        assert fastpath.of(target.model) is None
    [record] = fallbacks(caplog)
    assert f"its logits on a {rows}-row tree pass with its 4-D mask differ" in record.getMessage()
    assert fastpath.forward(target.model, torch.tensor([[1, 2]]), new_cache()) is None


class _WatchedLock:
    """A lock that tells when a second caller has come to wait on it."""

    def __init__(self):
        self._lock, self.callers, self.second = threading.Lock(), 0, threading.Event()

    def __enter__(self):
        self.callers += 1
        if self.callers == 2:
            self.second.set()
        self._lock.acquire()

    def __exit__(self, *exc):
        self._lock.release()


def test_threads_that_ask_together_build_it_once(monkeypatch):
    """of() decides again under its lock (double-checked locking): a thread that waited there while
    another built and checked the model's fast forward takes that one instead of building its own."""
    model = tuned(seed=12).model
    lock, building, built = _WatchedLock(), threading.Event(), []
    build = fastpath.FastForward.build

    def slow_build(m):
        built.append(threading.current_thread().name)
        building.set()
        assert lock.second.wait(30), "the second thread never came to the lock"
        return build(m)

    monkeypatch.setattr(fastpath, "_LOCK", lock)
    monkeypatch.setattr(fastpath.FastForward, "build", staticmethod(slow_build))
    got = {}
    first = threading.Thread(target=lambda: got.setdefault("first", fastpath.of(model)), name="first")
    second = threading.Thread(target=lambda: got.setdefault("second", fastpath.of(model)), name="second")
    first.start()
    assert building.wait(30)
    second.start()
    first.join(60)
    second.join(60)
    assert built == ["first"]
    assert got["first"] is not None and got["second"] is got["first"]


@pytest.mark.bundled
def test_the_bundled_model_takes_the_fast_path(bundled_target, monkeypatch, caplog):
    """The bundled model, as `load` gives it with this transformers, passes the check at first use
    (its tree passes included) with no WARNING, and a real run's passes (an AR run's prefill and
    steps, a LogitSpec run's verify passes over draft trees with their 4-D masks) all go through
    our forward: the model's own forward and its decoder layers are never called."""
    model = bundled_target.model
    fastpath._BUILT.pop(model, None)  # decide again now, whatever an earlier test left
    with caplog.at_level(logging.WARNING, logger=fastpath.log.name):
        assert fastpath.of(model) is not None
    assert fallbacks(caplog) == []

    ours, passes, modules = fastpath.FastForward.__call__, [], []

    def counted(self, ids, cache, position_ids=None, mask=None, keep=0):
        passes.append((ids.shape[1], None if mask is None else mask.dim(), position_ids is not None))
        return ours(self, ids, cache, position_ids, mask, keep)

    monkeypatch.setattr(fastpath.FastForward, "__call__", counted)
    hooks = [m.register_forward_pre_hook(lambda *a: modules.append(1)) for m in (model, model.model.layers[0])]
    try:
        prompt = "Write a Python function that returns the sum of a list of numbers."
        ar = specviz.generate(bundled_target, prompt, method="ar", max_new_tokens=8, chat=True, record=False)
        assert len(passes) == ar.metrics["new_tokens"] == 8  # the prefill, then a step per token
        passes.clear()
        tree = specviz.generate(bundled_target, prompt, method="logitspec", k=8, top_k=8, capacity=24,
                                min_ngram=1, lone_cands=True, max_new_tokens=16, chat=True, record=False)
        assert tree.metrics["new_tokens"] == 16
        assert len(passes) == 1 + tree.metrics["cycles"]
        assert any(rows > 1 and dims == 4 and positions for rows, dims, positions in passes)
    finally:
        for hook in hooks:
            hook.remove()
    assert modules == []


@pytest.fixture
def remembering(tmp_path, monkeypatch):
    """The app's start: passed verdicts kept in a fresh cache folder (the file's path is returned)."""
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path))
    verdicts.remember_checks()
    yield tmp_path / verdicts.FILE_NAME
    verdicts.remember_checks(False)


def counted_checks(monkeypatch) -> list:
    """Every FastForward.check made from now on, counted (the real check still runs)."""
    made = []
    real = fastpath.FastForward.check

    def check(self):
        made.append(self)
        return real(self)

    monkeypatch.setattr(fastpath.FastForward, "check", check)
    return made


def test_a_passed_check_is_trusted_again_only_where_the_app_asks(tmp_path, monkeypatch):
    """Without remember_checks (a test process, a CLI run) every new model is checked and nothing is
    written; with it (the app's start) the first model is checked, its verdict written to the
    cache folder, and a second model object with the same weights takes our forward without a
    check, its logits still the modules' bit for bit."""
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path))
    made = counted_checks(monkeypatch)
    target = tuned(seed=8)
    assert fastpath.of(target.model) is not None and fastpath.of(copy.deepcopy(target).model) is not None
    assert len(made) == 2 and not (tmp_path / verdicts.FILE_NAME).exists()
    verdicts.remember_checks()
    try:
        first, second = copy.deepcopy(target), copy.deepcopy(target)
        assert fastpath.of(first.model) is not None and len(made) == 3
        [entry] = verdicts.read_cache_file(tmp_path / verdicts.FILE_NAME).values()
        assert entry["passed"] is True and entry["check_s"] > 0
        assert fastpath.of(second.model) is not None and len(made) == 3
    finally:
        verdicts.remember_checks(False)
    ids = torch.tensor([PROMPTS[1]])
    assert torch.equal(fastpath.forward(second.model, ids, new_cache())[0],
                       modules_pass(second.model, ids, new_cache())[0])


CHANGES = {  # what a kept verdict must not outlive: a change that can move the last bits
    "other weights": lambda mp, model: model.model.layers[0].mlp.down_proj.weight.data.mul_(0.5),
    "threads": lambda mp, model: mp.setattr(torch, "get_num_threads", lambda: 97),
    "instruction set": lambda mp, model: mp.setattr(speedups, "cpuinfo", lambda: "model name : X\nflags : sse2\n"),
    # a value other than the run's own: a run under ONEDNN_MAX_CPU_ISA=AVX2 stands in for an AVX2 CPU
    "kernel setting": lambda mp, model: mp.setenv(
        "ONEDNN_MAX_CPU_ISA", "SSE41" if os.environ.get("ONEDNN_MAX_CPU_ISA") == "AVX2" else "AVX2"),
    "torch": lambda mp, model: mp.setattr(torch, "__version__", "0.0.1"),
    "configuration": lambda mp, model: setattr(model.config, "rms_norm_eps", 1e-3),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_kept_verdict_is_for_its_own_machine_software_and_model(change, remembering, monkeypatch):
    """A verdict kept for one model is not trusted for a model with other weights, nor under another
    thread count, instruction set, oneDNN setting, torch version or configuration: each is
    checked again (its key differs); the same model object under the first key is not."""
    made = counted_checks(monkeypatch)
    target = tuned(seed=9)
    fastpath.of(copy.deepcopy(target).model)
    again, same = copy.deepcopy(target), copy.deepcopy(target)
    kept = verdicts.verdict_key(target.model)
    assert fastpath.of(same.model) is not None and len(made) == 1  # trusted: the same key
    assert verdicts.verdict_key(again.model) == kept
    CHANGES[change](monkeypatch, again.model)
    assert verdicts.verdict_key(again.model) != kept
    fastpath.of(again.model)
    assert len(made) == 2


def test_our_own_code_changed_is_checked_again(remembering, monkeypatch, tmp_path):
    """The key holds our fast forward's source (and the speed-ups' and its own): the same model under
    an edited copy of passes/fastpath.py has another key, so an edit to the code is checked, not trusted."""
    model = tuned(seed=10).model
    before = verdicts.verdict_key(model)
    edited = tmp_path / "fastpath.py"
    edited.write_text(Path(fastpath.__file__).read_text() + "\n# an edit\n")
    monkeypatch.setattr(verdicts, "SOURCES", (edited, *verdicts.SOURCES[1:]))
    assert verdicts.verdict_key(model) != before


def test_a_failed_check_is_never_kept(remembering, monkeypatch, caplog):
    """A check that finds other bits is not written down: with the same broken forward a second model
    object is checked again and refused again, each time with its warning."""
    made = counted_checks(monkeypatch)
    target = tuned(seed=11)
    _off_by_a_millionth(monkeypatch, target.model)
    with caplog.at_level(logging.WARNING, logger=fastpath.log.name):
        assert fastpath.of(target.model) is None
        assert fastpath.of(copy.deepcopy(target).model) is None
    assert len(made) == 2 and len(fallbacks(caplog)) == 2
    assert verdicts.read_cache_file(remembering) == {}


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"x": 3}'])
def test_a_damaged_verdict_file_costs_a_check_not_a_start(content, remembering, monkeypatch):
    """A verdict file that is not JSON, not an object, or holds another key only is read as nothing
    kept: the model is checked, takes our forward, and the file is written again with its verdict."""
    remembering.write_text(content)
    made = counted_checks(monkeypatch)
    model = tuned(seed=12).model
    assert fastpath.of(model) is not None and len(made) == 1
    assert verdicts.read_cache_file(remembering)[verdicts.verdict_key(model)]["passed"] is True


def test_a_key_that_cannot_be_made_costs_the_check_not_the_fast_forward(remembering, monkeypatch):
    """Where the verdict's key cannot be made (here: reading the configuration fails), the model is
    checked as without kept verdicts, takes our forward, and nothing is written."""
    made = counted_checks(monkeypatch)

    def unreadable(model):
        raise ValueError("an unreadable configuration")

    monkeypatch.setattr(verdicts, "verdict_key", unreadable)
    assert fastpath.of(tuned(seed=13).model) is not None and len(made) == 1
    assert not remembering.exists()
