"""Deployment limits, read from environment variables (documented in docs/CONFIGURATION.md).

A session keeps at most max_new_tokens cycles, since every cycle commits at least one token;
that is the cap on a session's trace. The defaults suit a free CPU Space (2 vCPU, 16 GB): a 1.7 B
fp32 model fits in memory, and a run of 256 tokens at ~15 tokens/s finishes in well under a minute.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from specviz.loading.loader import HUB_ID, OFFLINE
from specviz.served.remote import PREFIX as REMOTE_PREFIX
from specviz.ui.runtime.zerogpu import on_zero_gpu

# On ZeroGPU each call runs in its own worker on its own GPU slice and mostly waits for one, so
# several at once serve several visitors' Steps side by side; on 2 CPU cores one at a time is fastest.
ZERO_GPU_CONCURRENCY = 4
ZERO_GPU_PRELOAD = ("bundled",)  # ZeroGPU documents loading models at start-up, in the main process


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(float(raw))
    except ValueError:
        raise ValueError(f"environment variable {name} must be a number, got {raw!r}") from None


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"environment variable {name} must be a number, got {raw!r}") from None


def _list(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list; unset means `default`, set but empty means none."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    return tuple(s.strip() for s in raw.split(",") if s.strip())


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Limits:
    max_prompt_tokens: int = 2048  # SPECVIZ_MAX_PROMPT_TOKENS: prefill cost grows with it
    max_new_tokens: int = 256  # SPECVIZ_MAX_NEW_TOKENS
    max_k: int = 16  # SPECVIZ_MAX_K: beyond this a verify pass costs more than it wins on CPU
    max_params: int = 2_000_000_000  # SPECVIZ_MAX_MODEL_PARAMS, checked from the config before loading
    # SPECVIZ_ALLOWED_MODELS (comma list; empty = any)
    allowed_models: frozenset[str] = field(default_factory=frozenset)
    allow_local: bool = False  # SPECVIZ_ALLOW_LOCAL_MODELS=1 lets users name folders on the server
    session_idle_s: int = 1800  # SPECVIZ_SESSION_IDLE_S: a session's run state is dropped after this
    cache_idle_s: int = 120  # SPECVIZ_CACHE_IDLE_S: an untouched run's KV caches are freed after this
    # SPECVIZ_CONCURRENCY: model events running at once. Many: a class's Steps wait together and
    # share verify passes (decoding/targets.py), so one student's Run no longer holds the only slot;
    # the passes themselves still run one at a time. Timings taken meanwhile say they were under load.
    # A lecture hall's 100 first Steps in one wave: at 32 they went in four, whose tails varied
    # (p95 4.1-5.7 s on the page's defaults, 2 cores); at 100, 4.3-4.6 s (docs/bench/2026-12-06.md).
    concurrency: int = 100
    live_runs: int = 110  # SPECVIZ_LIVE_RUNS: runs whose KV caches stay in memory (a lecture hall of 100, and some)
    # SPECVIZ_SESSIONS: visitors whose runs are kept (a lecture hall of 100, and tabs opened again);
    # one pushed out by newer ones starts its run again at its next Step. Run states only: their KV
    # caches are live_runs'. Side by side keeps two a visitor (ui/side_by_side/handlers.py).
    sessions: int = 160
    # SPECVIZ_QUEUE_SIZE: events waiting at once, for every visitor together. A class of 30 pressing
    # Step and Run fits four times over; Gradio on ZeroGPU would otherwise hold one (blocks.queue()).
    queue_size: int = 128
    # SPECVIZ_STATUS_UPDATE_S: how often a waiting visitor's queue position and estimate are sent
    # (0 or less: Gradio's "auto", to every waiting visitor each time any event starts, which for a hall of
    # 100 is some 2,300 messages a round, all encoded on the server's one event-loop thread)
    status_update_s: float = 1.0
    preload: tuple[str, ...] = ()  # SPECVIZ_PRELOAD: models loaded at start-up, in the main thread
    # SPECVIZ_WARM_UP=0: app.py does not make, at start-up, what the first Step needs (ui/runtime/warmup.py:
    # the model, its cost profile and batched pass costs, the head's price, the example prefills)
    warm_up: bool = True

    @classmethod
    def from_env(cls) -> "Limits":
        allowed = os.environ.get("SPECVIZ_ALLOWED_MODELS", "")
        zero = on_zero_gpu()
        return cls(
            max_prompt_tokens=_int("SPECVIZ_MAX_PROMPT_TOKENS", cls.max_prompt_tokens),
            max_new_tokens=_int("SPECVIZ_MAX_NEW_TOKENS", cls.max_new_tokens),
            max_k=_int("SPECVIZ_MAX_K", cls.max_k),
            max_params=_int("SPECVIZ_MAX_MODEL_PARAMS", cls.max_params),
            allowed_models=frozenset(s.strip() for s in allowed.split(",") if s.strip()),
            allow_local=_flag("SPECVIZ_ALLOW_LOCAL_MODELS"),
            session_idle_s=_int("SPECVIZ_SESSION_IDLE_S", cls.session_idle_s),
            cache_idle_s=_int("SPECVIZ_CACHE_IDLE_S", cls.cache_idle_s),
            concurrency=_int("SPECVIZ_CONCURRENCY", ZERO_GPU_CONCURRENCY if zero else cls.concurrency),
            queue_size=_int("SPECVIZ_QUEUE_SIZE", cls.queue_size),
            status_update_s=_float("SPECVIZ_STATUS_UPDATE_S", cls.status_update_s),
            live_runs=_int("SPECVIZ_LIVE_RUNS", cls.live_runs),
            sessions=_int("SPECVIZ_SESSIONS", cls.sessions),
            warm_up=os.environ.get("SPECVIZ_WARM_UP", "1").strip() != "0" and not zero,
            preload=_list("SPECVIZ_PRELOAD", ZERO_GPU_PRELOAD if zero else ()),
        )




def check_model_spec(spec: str, limits: Limits) -> str:
    """Refuse a model spec a public user should not be able to ask for; return it stripped."""
    spec = (spec or "").strip()
    if not spec:
        raise ValueError("Choose a model: the model box is empty.")
    if "\x00" in spec or len(spec) > 200:
        raise ValueError("That model name is not valid: use a Hugging Face id like 'owner/name'.")
    if spec in OFFLINE or spec.startswith("tiny-random"):
        return spec
    if spec.startswith(REMOTE_PREFIX):  # a URL: never typed by a visitor, only picked from the list
        if spec not in limits.allowed_models:
            raise ValueError("Targets served by vLLM come from this server's configuration only: pick one "
                             "from the target list (the admin adds them to SPECVIZ_ALLOWED_MODELS).")
        return spec
    if limits.allowed_models and spec not in limits.allowed_models:
        raise ValueError(f"'{spec}' is not on this server's model list. Allowed: "
                         + ", ".join(sorted(limits.allowed_models)))
    looks_local = spec.startswith(("/", ".", "~")) or "\\" in spec or Path(spec).is_dir()
    if looks_local:
        if not limits.allow_local:
            raise ValueError("Local folders are not allowed on this server; use a Hugging Face model id "
                             "(the admin can set SPECVIZ_ALLOW_LOCAL_MODELS=1).")
        return spec
    if not HUB_ID.match(spec):
        raise ValueError(f"'{spec}' is not a valid Hugging Face model id: use 'owner/name' with letters, "
                         "digits, '.', '_' or '-'.")
    return spec


def served_targets(limits: Limits) -> list[tuple[str, str]]:
    """(label, spec) of the vLLM-served targets this deployment lists (SPECVIZ_ALLOWED_MODELS)."""
    out = []
    for spec in sorted(s for s in limits.allowed_models if s.startswith(REMOTE_PREFIX)):
        url = spec[len(REMOTE_PREFIX):].split("|")[0]
        out.append((f"served by vLLM at {url}", spec))
    return out


def count_params_from_config(config) -> int:
    """Parameters a model would have, built on the meta device (no memory, no weights)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def check_model_size(spec: str, limits: Limits) -> None:
    """Refuse a hub model over the parameter limit, reading only its config."""
    if spec in OFFLINE or spec.startswith(("tiny-random", REMOTE_PREFIX)):
        return  # a served target's size is the server's business; the offline ones are small
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(spec, trust_remote_code=False)
    except Exception:  # noqa: BLE001 -- AutoConfig fails in many ways; the loader, run next, reports them
        return  # the loader gives the better message (not found, offline, …)
    n = count_params_from_config(config)
    if n > limits.max_params:
        raise ValueError(f"'{spec}' has {n / 1e9:.1f} B parameters; this server allows at most "
                         f"{limits.max_params / 1e9:.1f} B (SPECVIZ_MAX_MODEL_PARAMS).")


# Parameters of the offline models, known without loading them (their load prints these counts)
OFFLINE_PARAMS = {"bundled": 134_515_008, "gemma3-270m": 268_098_176}
# bytes a loaded parameter holds on a CPU: float32, and as much again for the packed copies of the
# linear weights the CPU speed-ups make (passes/speedups.py)
CPU_BYTES_PER_PARAM = 8


def available_bytes() -> int | None:
    """Memory this machine has available now (the speed-ups' own reading), or None where unknown."""
    from specviz.passes.speedups import _available_bytes

    found = _available_bytes()
    return None if found == float("inf") else int(found)


def params_of(spec: str) -> int | None:
    """A model's parameters from its name, or from its config where this machine already has it (never
    a download: `check_model_size` fetches configs, and an unreachable hub would make this wait);
    None when unknown here."""
    if spec in OFFLINE_PARAMS:
        return OFFLINE_PARAMS[spec]
    if spec.startswith(("tiny-random", REMOTE_PREFIX)):
        return 0  # milliseconds of memory, or the server's
    from transformers import AutoConfig

    try:
        return count_params_from_config(AutoConfig.from_pretrained(spec, trust_remote_code=False,
                                                                   local_files_only=True))
    except Exception:  # noqa: BLE001 -- offline, unknown or odd: the loader gives the better message
        return None


def check_pair_memory(target: str, draft: str | None, loaded=lambda spec: False, available: int | None = None) -> None:
    """Refuse, before loading anything, a target and draft that together will not fit in the memory
    this machine has available (models already `loaded` count as there; on a GPU this is not the
    limit, so nothing is checked)."""
    import torch

    if torch.cuda.is_available():
        return
    to_load = {"target": target} if not loaded(target) else {}
    if draft and draft != target and not loaded(draft):
        to_load["draft"] = draft
    if not to_load:
        return
    available = available_bytes() if available is None else available
    sizes = {role: params_of(spec) for role, spec in to_load.items()}
    if available is None or any(n is None for n in sizes.values()):
        return
    need = sum(sizes.values()) * CPU_BYTES_PER_PARAM
    if need > available:
        parts = " and ".join(f"the {role} '{to_load[role]}' ({sizes[role] / 1e6:,.0f} M parameters)" for role in sizes)
        raise ValueError(f"Not enough memory for this pair: {parts} need about {need / 2**30:.1f} GB here, and this "
                         f"machine has {available / 2**30:.1f} GB available. Pick a smaller draft or target; "
                         "your current run is kept.")


def check_prompt_text(prompt: str, limits: Limits) -> None:
    """Refuse text no tokenizer should see: NUL bytes, broken UTF-8, or far too much of it."""
    if "\x00" in prompt:
        raise ValueError("The prompt contains NUL characters (\\x00); remove them and try again.")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("The prompt is not valid UTF-8 text (it has broken characters); "
                         "paste it again as plain text.") from None
    # a token is rarely under one character, so this refuses a huge paste before tokenising it
    if len(prompt) > 8 * limits.max_prompt_tokens:
        raise ValueError(f"The prompt is {len(prompt):,} characters; this server takes about "
                         f"{limits.max_prompt_tokens} tokens (SPECVIZ_MAX_PROMPT_TOKENS). Shorten it.")


def check_run_settings(limits: Limits, k: int, max_new_tokens: int, prompt_tokens: int | None = None) -> None:
    """The server's caps on top of the engine's own checks."""
    if k > limits.max_k:
        raise ValueError(f"K = {k} is above this server's limit of {limits.max_k} (SPECVIZ_MAX_K).")
    if max_new_tokens > limits.max_new_tokens:
        raise ValueError(f"max new tokens = {max_new_tokens} is above this server's limit of "
                         f"{limits.max_new_tokens} (SPECVIZ_MAX_NEW_TOKENS).")
    if prompt_tokens is not None and prompt_tokens > limits.max_prompt_tokens:
        raise ValueError(f"The prompt is {prompt_tokens} tokens; this server takes at most "
                         f"{limits.max_prompt_tokens} (SPECVIZ_MAX_PROMPT_TOKENS). Shorten it.")
