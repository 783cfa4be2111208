"""`LoadedModel`, a causal LM plus what decoding needs to know about it, and `wrap`, which builds one.

Every module here that makes or times a model uses these, so they live apart from the loader:
loader.py, families.py, costs.py and timing.py all import this module, and it imports nothing
else of specviz.models, so no two of them import each other. No UI libraries here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

EMPTY_PROMPT = "The prompt is empty: type some text to continue."


@dataclass
class LoadedModel:
    """A causal LM in eval mode plus what decoding needs to know about it."""
    model: "torch.nn.Module"
    tokenizer: object | None
    name: str
    device: torch.device
    dtype: torch.dtype
    vocab_size: int
    eos_ids: set[int]
    max_positions: int | None
    n_params: int
    _texts: dict[int, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    # a target served elsewhere (served/remote.py: its VllmServer), None for a model in this process
    remote: object | None = field(default=None, init=False, repr=False, compare=False)

    def token_text(self, token_id: int) -> str:
        """The text of one token, special tokens included; cached because the UI asks often."""
        token_id = int(token_id)
        text = self._texts.get(token_id)
        if text is None:
            if self.tokenizer is None:
                text = f"<{token_id}>"
            else:
                text = self.tokenizer.decode([token_id], skip_special_tokens=False)
            self._texts[token_id] = text
        return text

    def encode(self, prompt: str | list[int], chat: bool = True) -> list[int]:
        """Token ids for a prompt; with chat=True the chat template and generation prompt are applied."""
        if isinstance(prompt, (list, tuple)):
            return self._check_ids(list(prompt))
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(EMPTY_PROMPT)
        tok = self.tokenizer
        if tok is None:
            raise ValueError(f"Model '{self.name}' has no tokenizer: pass the prompt as a list of token ids.")
        if chat and getattr(tok, "chat_template", None):
            text = tok.apply_chat_template([{"role": "user", "content": prompt}],
                                           add_generation_prompt=True, tokenize=False)
            # The template already holds any BOS text; adding specials again would double it.
            ids = tok(text, add_special_tokens=False)["input_ids"]
        else:
            ids = tok(prompt)["input_ids"]
        return self._check_ids(list(ids))

    def _check_ids(self, ids: list[int]) -> list[int]:
        if not ids:
            raise ValueError(EMPTY_PROMPT)
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.vocab_size:
                raise ValueError(f"Token id {i!r} is not valid for model '{self.name}': "
                                 f"ids must be integers from 0 to {self.vocab_size - 1}.")
        if self.max_positions is not None and len(ids) > self.max_positions:
            raise ValueError(f"The prompt is {len(ids)} tokens long, but model '{self.name}' handles at "
                             f"most {self.max_positions} positions: shorten the prompt.")
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        """Text of a token sequence; special tokens such as EOS are left out unless asked for."""
        ids = [int(i) for i in ids]
        if self.tokenizer is None:
            return "".join(self.token_text(i) for i in ids)
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


def wrap(model, tokenizer, name: str) -> LoadedModel:
    """Build a LoadedModel from an eval-mode model, reading sizes and EOS ids off it."""
    model.eval()
    first = model.get_input_embeddings().weight
    out = model.get_output_embeddings()
    vocab = out.weight.shape[0] if out is not None else model.config.vocab_size
    eos: set[int] = set()
    gen = getattr(model, "generation_config", None)
    gen_eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    if gen_eos is not None:
        eos.update(int(e) for e in (gen_eos if isinstance(gen_eos, (list, tuple, set)) else [gen_eos]))
    if tokenizer is not None and getattr(tokenizer, "eos_token_id", None) is not None:
        eos.add(int(tokenizer.eos_token_id))
    max_pos = getattr(model.config, "max_position_embeddings", None)
    n_params = sum(p.numel() for p in model.parameters())
    return LoadedModel(model=model, tokenizer=tokenizer, name=name, device=first.device, dtype=first.dtype,
                       vocab_size=int(vocab), eos_ids=eos, max_positions=max_pos, n_params=n_params)
