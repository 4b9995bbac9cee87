"""The Rewards page's shaping tab: a binary verifier plus weighted signals, with dominance shown as you edit.

The numbers come from `rewards.shaping` itself: the page builds `Signal`s from the table and constructs a
`ShapedReward` (its constructor computes the worst cases, auto-scales the weights or refuses with an explanation),
so what the page shows is exactly what training will get. Saving writes a small Python file into rewards/ that
builds the same `ShapedReward` around the verifier file next to it, so the shaped reward is a reward like any other
(versioned, audited, pickable in training configs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import streamlit as st

from studio.workspace import Workspace

SOURCES = ["component", "overlong"]
APPLIES = ["all", "fail", "pass"]


def _placeholder_verifier(completion: str, **_: Any) -> float:
    """Stands in for the verifier while only the composition's arithmetic is computed (never called)."""
    raise RuntimeError("placeholder verifier: not for scoring")


def default_signals(components: list[str] | None = None) -> pd.DataFrame:
    """One partial-credit row per component the verifier reported on the last scored samples (else `format_ok`),
    plus DAPO's overlong penalty."""
    rows = [{"name": c, "source": "component", "component": c, "weight": 0.3, "low": 0.0, "high": 1.0,
             "applies_to": "fail", "clip": False} for c in (components or ["format_ok"])]
    rows.append({"name": "overlong", "source": "overlong", "component": "", "weight": 0.5, "low": -1.0, "high": 0.0,
                 "applies_to": "all", "clip": False})
    return pd.DataFrame(rows)


def last_components(spec: str) -> list[str] | None:
    """Component names of the verifier's results from the Run tab, when it was run on this reward."""
    got = st.session_state.get("_reward_results")
    if not got or got[0] != spec:
        return None
    names = sorted({k for r in got[3] for k in r.components} - {"passed", "overlong"})
    return names or None


def build_signals(table: pd.DataFrame, max_length: int, cache_length: int, unit: str = "chars") -> list[Any]:
    """`Signal`s from the edited table (pydantic validates each; the error names the row)."""
    from rewards.shaping import Signal, component_signal, overlong_signal

    out: list[Signal] = []
    for i, row in enumerate(table.to_dict("records")):
        name = str(row.get("name") or "").strip()
        if not name:
            continue
        try:
            if row.get("source") == "overlong":
                out.append(overlong_signal(max_length, cache_length, weight=float(row["weight"]), unit=unit, name=name))
            else:
                out.append(component_signal(str(row.get("component") or name), float(row["weight"]),
                                            low=float(row["low"]), high=float(row["high"]), clip=bool(row.get("clip")),
                                            applies_to=str(row.get("applies_to") or "all"), name=name))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"signal row {i} ({name}): {exc}") from exc
    return out


def render_shaping(ws: Workspace, spec: str) -> None:
    from rewards.shaping import ShapedReward, ShapingError, dominance_bounds

    st.caption(f"verifier: `{ws.rel(Path(spec.rsplit(':', 1)[0]))}:{spec.rsplit(':', 1)[1]}` (its binary verdict "
               "decides pass/fail; signals only order samples within each group)")
    c1, c2, c3, c4 = st.columns(4)
    pass_score = c1.number_input("pass score", value=1.0, key="sh_pass")
    fail_score = c2.number_input("fail score", value=0.0, key="sh_fail")
    scale = c3.selectbox("weights", ["auto", "none"], key="sh_scale",
                         help="auto: scale all weights down until dominance holds with a margin; none: refuse")
    margin = c4.number_input("margin", min_value=0.01, max_value=0.9, value=0.1, key="sh_margin")
    c5, c6, c7 = st.columns(3)
    unit = c5.selectbox("overlong: length unit", ["chars", "tokens"], key="sh_unit",
                        help="tokens load the embedded tokenizer inside each sandbox worker (slow first call)")
    max_length = c6.number_input(f"overlong: max {unit}", min_value=2, value=1024 if unit == "chars" else 256,
                                 key=f"sh_maxlen::{unit}")
    cache_length = c7.number_input(f"overlong: ramp ({unit})", min_value=1, value=256 if unit == "chars" else 64,
                                   key=f"sh_cache::{unit}")
    table = st.data_editor(
        default_signals(last_components(spec)), num_rows="dynamic", hide_index=True, width="stretch",
        key=f"sh_signals::{spec}",
        column_config={
            "source": st.column_config.SelectboxColumn(options=SOURCES, required=True),
            "applies_to": st.column_config.SelectboxColumn(options=APPLIES, required=True),
            "weight": st.column_config.NumberColumn(format="%.3f"),
        },
    )
    try:
        signals = build_signals(table, int(max_length), int(cache_length), unit)
    except ValueError as exc:
        st.error(str(exc))
        return
    declared = {s.name: s.weight for s in signals}
    raw = dominance_bounds(signals, declared, float(pass_score), float(fail_score))
    try:
        shaped = ShapedReward(_placeholder_verifier, signals, name="shaped", pass_score=float(pass_score),
                              fail_score=float(fail_score), scale=scale, margin=float(margin))
    except ShapingError as exc:
        st.error(f"refused: {exc}")
        _bounds_chart(raw.max_fail, raw.min_pass, float(pass_score), float(fail_score))
        return
    b = shaped.bounds
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("highest failing score", f"{b.max_fail:.3f}", help="fail score + the most the signals can add")
    m2.metric("lowest passing score", f"{b.min_pass:.3f}", help="pass score + the most the signals can take away")
    m3.metric("dominance", "holds" if b.holds else "BROKEN")
    m4.metric("weight scale", f"{b.scale:.3f}", help="1 = as declared; below 1 = auto-scaled to keep dominance")
    if not raw.holds:
        st.warning(f"as declared the weights break dominance (a failing sample could reach {raw.max_fail:.3f}, "
                   f"a passing one drop to {raw.min_pass:.3f}); auto-scaled by {b.scale:.3f}")
    st.dataframe(pl.DataFrame([{"signal": n, "declared weight": declared[n], "effective weight": w}
                               for n, w in shaped.weights.items()]).to_pandas(), hide_index=True)
    _bounds_chart(b.max_fail, b.min_pass, float(pass_score), float(fail_score))
    name = st.text_input("save as reward named", value=f"{spec.rsplit(':', 1)[1]}_shaped", key=f"sh_name::{spec}")
    if st.button("Save shaped reward", key="sh_save"):
        target = save_shaped(ws, spec, name, table, int(max_length), int(cache_length), float(pass_score),
                             float(fail_score), scale, float(margin), unit)
        st.success(f"saved `{ws.rel(target)}:{name}`: pick it as the reward file to run, audit or train it")


def _bounds_chart(max_fail: float, min_pass: float, pass_score: float, fail_score: float) -> None:
    """Worst-case score ranges of failing vs passing samples: the two bars must not overlap."""
    frame = pd.DataFrame([
        {"group": "failing samples", "bound": "worst case", "score": max_fail},
        {"group": "passing samples", "bound": "worst case", "score": min_pass},
        {"group": "failing samples", "bound": "no signal", "score": fail_score},
        {"group": "passing samples", "bound": "no signal", "score": pass_score},
    ])
    st.bar_chart(frame, x="group", y="score", color="bound", stack=False, height=220)


def save_shaped(ws: Workspace, spec: str, name: str, table: pd.DataFrame, max_length: int, cache_length: int,
                pass_score: float, fail_score: float, scale: str, margin: float, unit: str = "chars") -> Path:
    """Write rewards/<name>.py building this ShapedReward around the verifier file beside it."""
    if not name.isidentifier():
        raise ValueError(f"{name!r} is not a Python identifier")
    vpath = Path(spec.rsplit(":", 1)[0])
    vfn = spec.rsplit(":", 1)[1]
    target = ws.resolve(f"{name}.py", base="rewards")
    if vpath.resolve() == target.resolve():
        raise ValueError("the shaped reward needs its own file name (not the verifier's)")
    lines = []
    for row in table.to_dict("records"):
        n = str(row.get("name") or "").strip()
        if not n:
            continue
        if row.get("source") == "overlong":
            lines.append(f"    overlong_signal({max_length}, {cache_length}, weight={float(row['weight'])!r}, "
                         f"unit={unit!r}, name={n!r}),")
        else:
            lines.append(f"    component_signal({str(row.get('component') or n)!r}, {float(row['weight'])!r}, "
                         f"low={float(row['low'])!r}, high={float(row['high'])!r}, clip={bool(row.get('clip'))!r}, "
                         f"applies_to={str(row.get('applies_to') or 'all')!r}, name={n!r}),")
    code = f'''"""Shaped reward `{name}`, built in the studio: the binary verdict of `{vpath.name}:{vfn}` plus weighted signals.

Dominance (every passing sample above every failing one) is enforced by rewards.shaping when this file loads.
"""

from pathlib import Path

from rewards.loading import load_reward
from rewards.shaping import ShapedReward, component_signal, overlong_signal

_verifier = load_reward(str(Path(__file__).with_name({vpath.name!r})) + ":{vfn}")

{name} = ShapedReward(_verifier, [
{chr(10).join(lines)}
], name={name!r}, pass_score={pass_score!r}, fail_score={fail_score!r}, scale={scale!r}, margin={margin!r})
'''
    compile(code, str(target), "exec")
    target.write_text(code, encoding="utf-8")
    return target
