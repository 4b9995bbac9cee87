"""Write the arithmetic example tasks (tasks.jsonl): small additions and subtractions, seeded, train and test."""

from __future__ import annotations

import random
from pathlib import Path

from generators.task_io import write_tasks
from schemas.task import TaskRow

INSTRUCTION = "Put only the final number inside <answer></answer> tags, for example <answer>7</answer>."


def make(n_train: int = 400, n_test: int = 100, seed: int = 0) -> list[TaskRow]:
    rng = random.Random(seed)
    rows = []
    for i in range(n_train + n_test):
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        op = rng.choice("+-")
        value = a + b if op == "+" else a - b
        rows.append(TaskRow(
            id=f"arith-{i:04d}", split="train" if i < n_train else "test",
            prompt=[{"role": "user", "content": f"What is {a} {op} {b}? {INSTRUCTION}"}],
            answer=str(value), metadata={"op": op},
        ))
    return rows


def demonstrations(tasks: list[TaskRow]) -> list[dict]:
    """SFT rows for the train split: the prompt and the answer in the expected format."""
    return [{"task_id": t.id, "messages": [*(m.model_dump(exclude_none=True) for m in t.prompt),
                                           {"role": "assistant", "content": f"<answer>{t.answer}</answer>"}]}
            for t in tasks if t.split == "train"]


if __name__ == "__main__":
    import json

    here = Path(__file__).parent
    tasks = make()
    write_tasks(tasks, here / "tasks.jsonl")
    (here / "demonstrations.jsonl").write_text("".join(json.dumps(d) + "\n" for d in demonstrations(tasks)))
    print(f"wrote {here / 'tasks.jsonl'} and {here / 'demonstrations.jsonl'}")
