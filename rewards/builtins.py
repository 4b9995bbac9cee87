"""Registration of the studio's built-in verifiers under their names, with default configurations.

Row-field conventions of the defaults: `answer` (exact/numeric/judge), `pattern` (regex), `schema` (json_schema),
`ground_truth_calls` + `tools` (tool calls), `tests` (code). A different configuration is a different reward
version: construct the class (`rewards.verifiers`) with options and register or load it from a file.
"""

from __future__ import annotations

SUMMARY = {
    "exact_match": "answer == reference (normalised)",
    "numeric_match": "number == reference (exact)",
    "regex_match": "answer matches a pattern",
    "json_schema": "JSON valid against a schema",
    "tool_call_match": "tool calls match (BFCL AST)",
    "code_tests": "code passes unit tests",
    "llm_judge": "YES/NO from a judge model",
    "workplace_state": "workplace final state matches",
}


def register_builtins() -> None:
    """Register each built-in verifier with its default configuration (labelled "builtin")."""
    from rewards.registry import register_reward
    from rewards.verifiers import (CodeTests, ExactMatch, LLMJudge, JsonSchemaMatch, NumericMatch, RegexMatch,
                                   ToolCallMatch, WorkplaceState)

    for verifier in (ExactMatch(), NumericMatch(), RegexMatch(pattern_field="pattern"),
                     JsonSchemaMatch(schema_field="schema"), ToolCallMatch(), CodeTests(), LLMJudge(),
                     WorkplaceState()):
        register_reward(verifier.name, verifier, label="builtin", replace=True)
