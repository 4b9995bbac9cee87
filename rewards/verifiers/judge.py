"""An optional LLM-judge verifier: asks a model (the embedded SmolLM2 by default) whether an answer is correct.

Why optional and last resort: a 135M judge is weak and every judge can be talked round; prefer a programmatic
verifier wherever the answer is checkable. The judge is asked for YES or NO; anything else is an *error result*
(the judge failed to give a verdict), never a silent pass or fail.

`generate(messages) -> str` may be injected (any chat model: a server, a larger local model). When omitted, the
embedded model is loaded on first use through `training` (resolved at call time, so importing `rewards` never
imports `training`) and the verdict is read from its next-token logits: P(YES) vs P(NO), kept as `judge_p_yes`.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, ClassVar

from pydantic import PrivateAttr

from rewards.verifiers.base import Verifier, verdict
from schemas.rewards import RewardResult

Generate = Callable[[list[dict[str, str]]], str]
_MODELS: dict[str, Any] = {}

SYSTEM = "You are a strict grader. Reply with exactly one word: YES or NO."
TEMPLATE = ("Question:\n{question}\n\nReference answer:\n{reference}\n\nCandidate answer:\n{candidate}\n\n"
            "Rubric: {rubric}\n\nIs the candidate answer correct according to the rubric? Reply YES or NO.")


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict) and m.get("role") == "user")
    return ""


class LLMJudge(Verifier):
    """YES/NO judge. `rubric` says what correct means; `reference_field` (optional) gives the reference answer."""

    name: ClassVar[str] = "llm_judge"
    rubric: str = "The candidate gives the same final answer as the reference."
    model: str = "default"
    reference_field: str | None = "answer"
    max_candidate_chars: int = 2000
    _generate: Generate | None = PrivateAttr(default=None)

    def __init__(self, generate: Generate | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self._generate = generate

    def _yes_probability(self, messages: list[dict[str, str]]) -> float:
        """P(YES) against P(NO) from the embedded model's next-token logits after the chat prompt.

        Why logits and not sampled text: a small model asked for one word often starts a sentence instead ("The
        candidate answer is..."); comparing the two verdict tokens always gives a verdict and its confidence.
        """
        import torch

        if self.model not in _MODELS:
            _MODELS[self.model] = importlib.import_module("training.model").load_model(self.model)
        model, tok = _MODELS[self.model]
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        input_ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        with torch.no_grad():
            logits = model(input_ids=input_ids).logits[0, -1].float()

        def best(words: tuple[str, ...]) -> torch.Tensor:
            firsts = {tok.encode(w, add_special_tokens=False)[0] for w in words}
            return torch.stack([logits[i] for i in firsts]).logsumexp(0)

        yes, no = best(("YES", "Yes", "yes", " YES", " Yes")), best(("NO", "No", "no", " NO", " No"))
        return float(torch.sigmoid(yes - no))

    def verify(self, completion: Any, fields: dict[str, Any]) -> RewardResult:
        if not isinstance(completion, str):
            raise TypeError(f"llm_judge needs a text completion, got {type(completion).__name__}")
        reference = str(fields.get(self.reference_field, "")) if self.reference_field else "(none)"
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": TEMPLATE.format(
                        question=_prompt_text(fields.get("prompt"))[:2000], reference=reference[:1000],
                        candidate=completion[:self.max_candidate_chars], rubric=self.rubric)}]
        if self._generate is None:
            p_yes = self._yes_probability(messages)
            return verdict(p_yes > 0.5, f"judge P(YES) = {p_yes:.3f}", judge_yes=float(p_yes > 0.5), judge_p_yes=p_yes)
        reply = self._generate(messages).strip()
        word = reply.split()[0].strip(".,:;!\"'").upper() if reply.split() else ""
        if word not in ("YES", "NO"):
            raise ValueError(f"the judge gave no verdict (expected YES or NO, got {reply[:80]!r})")
        return verdict(word == "YES", f"judge said {word}", judge_yes=float(word == "YES"))
