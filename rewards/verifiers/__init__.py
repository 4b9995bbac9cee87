"""The studio's built-in verifiers. Each is a configured, callable, picklable pydantic model returning a binary
RewardResult (score 1.0/0.0, `passed`, components, reason); configuration is part of the reward version.

| name | class | checks |
|---|---|---|
| exact_match | `ExactMatch` | extracted answer == reference, explicit normalisation options |
| numeric_match | `NumericMatch` | number equal to the reference, exact unless `abs_tol`/`rel_tol` |
| regex_match | `RegexMatch` | answer matches a pattern (config or row field) |
| json_schema | `JsonSchemaMatch` | output is JSON valid against a schema (config or row field) |
| pydantic_model | `PydanticMatch` | output is JSON valid as a pydantic model |
| tool_call_match | `ToolCallMatch` | BFCL-style AST match of tool calls, order-free parallel calls |
| code_tests | `CodeTests` | code passes unit tests in an isolated child process |
| llm_judge | `LLMJudge` | optional YES/NO judge on the embedded model |
| workplace_state | `WorkplaceState` | workplace environment final-state match (trajectory-aware) |
"""

from rewards.verifiers.base import Verifier, verdict
from rewards.verifiers.code import CodeTests
from rewards.verifiers.judge import LLMJudge
from rewards.verifiers.structured import JsonSchemaMatch, PydanticMatch
from rewards.verifiers.text import ExactMatch, NumericMatch, RegexMatch
from rewards.verifiers.tool_calls import ToolCallMatch
from rewards.verifiers.workplace import WorkplaceState

__all__ = ["CodeTests", "ExactMatch", "JsonSchemaMatch", "LLMJudge", "NumericMatch", "PydanticMatch", "RegexMatch",
           "ToolCallMatch", "Verifier", "WorkplaceState", "verdict"]
