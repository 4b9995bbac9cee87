"""Registration of the studio's built-in verifiers under their names, with default configurations.

Row-field conventions of the defaults: `answer` (exact/numeric/judge), `pattern` (regex), `schema` (json_schema),
`ground_truth_calls` + `tools` (tool calls), `tests` (code). A different configuration is a different reward
version: construct the class (`rewards.verifiers`) with options and register or load it from a file.
"""

from __future__ import annotations


def register_builtins() -> None:
    """Register each built-in verifier with its default configuration (labelled "builtin")."""
    from rewards.registry import register_reward
    from rewards.verifiers import (CodeTests, ExactMatch, LLMJudge, JsonSchemaMatch, NumericMatch, RegexMatch,
                                   ToolCallMatch, WorkplaceState)

    for verifier in (ExactMatch(), NumericMatch(), RegexMatch(pattern_field="pattern"),
                     JsonSchemaMatch(schema_field="schema"), ToolCallMatch(), CodeTests(), LLMJudge(),
                     WorkplaceState()):
        register_reward(verifier.name, verifier, label="builtin", replace=True)
