"""The vLLM rollout backend (`rollout.backend: vllm`), for GPU machines with the `vllm` extra installed.

Imported only when a config selects it (`training.rollout.make_backend`), so CPU installs never pay vLLM's import
or its CUDA torch. The engine runs colocated with the trainer on the same GPU; after every optimizer step the
trainer calls `sync_weights()`, which loads the policy's current weights into the engine in place. Sampling
log-probs come from vLLM (used for metrics; the loss recomputes them with the training forward, as on-policy
GRPO needs).

Not exercised by the CPU test suite (vLLM needs a GPU); the selection logic and the error without vLLM are.
"""

from __future__ import annotations

from typing import Any

import torch

from training.rollout import RolloutBatch, SamplingParams, end_token_ids, left_pad


class VLLMUnavailable(RuntimeError):
    """vLLM is not installed or cannot start here; the message says what to do."""


class VLLMBackend:
    def __init__(self, model: Any, tokenizer: Any, gpu_memory_utilization: float = 0.3, **_: Any):
        try:
            import vllm  # noqa: PLC0415 - optional, GPU only
        except ImportError as exc:
            raise VLLMUnavailable(
                "rollout.backend: vllm needs vLLM: on a GPU machine install the extra "
                "(TORCH_SPEC=... EXTRAS=dev,vllm make setup), or set rollout.backend: transformers"
            ) from exc
        if not torch.cuda.is_available():
            raise VLLMUnavailable("rollout.backend: vllm needs a CUDA GPU; set rollout.backend: transformers on CPU")
        self.vllm = vllm
        self.model = model
        self.tokenizer = tokenizer
        path = getattr(getattr(model, "config", None), "_name_or_path", None) or getattr(model, "name_or_path", None)
        if not path:
            raise VLLMUnavailable("the vLLM backend needs a model loaded from a folder (model.name or a checkpoint)")
        self.llm = vllm.LLM(model=str(path), dtype="bfloat16", gpu_memory_utilization=gpu_memory_utilization,
                            enable_prefix_caching=True)
        self.eos_ids = end_token_ids(tokenizer, model)

    def sync_weights(self) -> None:
        """Load the trainer's current weights into the engine (in place, no reload)."""
        state = {k: v.detach() for k, v in self.model.state_dict().items()}
        engine_model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        engine_model.load_weights(state.items())
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()

    def generate_ids(self, prompt_ids: list[list[int]], num_generations: int, params: SamplingParams) -> RolloutBatch:
        sp = self.vllm.SamplingParams(
            n=num_generations, temperature=max(params.temperature, 0.0), top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1, max_tokens=params.max_new_tokens, logprobs=0,
            seed=params.seed,
        )
        prompts = [{"prompt_token_ids": p} for p in prompt_ids]
        outs = self.llm.generate(prompts, sp, use_tqdm=False)
        rows, comps, lps, ended, groups = [], [], [], [], []
        for gi, (p, out) in enumerate(zip(prompt_ids, outs)):
            for c in out.outputs:
                ids = list(c.token_ids)
                rows.append(p)
                comps.append(ids)
                lps.append([next(iter(d.values())).logprob if d else 0.0 for d in (c.logprobs or [{}] * len(ids))])
                ended.append(bool(ids) and ids[-1] in self.eos_ids)
                groups.append(gi)
        pad = self.tokenizer.pad_token_id
        p_ids, p_mask = left_pad(rows, pad)
        width = max(1, max(len(c) for c in comps))
        c_ids = torch.full((len(comps), width), pad, dtype=torch.long)
        c_mask = torch.zeros((len(comps), width), dtype=torch.long)
        c_lp = torch.zeros((len(comps), width))
        for i, (c, lp) in enumerate(zip(comps, lps)):
            c_ids[i, :len(c)] = torch.tensor(c, dtype=torch.long)
            c_mask[i, :len(c)] = 1
            c_lp[i, :len(lp)] = torch.tensor(lp)
        texts = [self.tokenizer.decode(c, skip_special_tokens=True) for c in comps]
        return RolloutBatch(p_ids, p_mask, c_ids, c_mask, c_mask.clone(), c_lp, ~torch.tensor(ended), texts, groups,
                            [{} for _ in comps])

    def generate(self, prompts: list[list[dict[str, Any]]], num_generations: int, params: SamplingParams) -> RolloutBatch:
        from training.rollout import render_prompts

        return self.generate_ids(render_prompts(self.tokenizer, prompts), num_generations, params)
