"""pass@k against brute-force enumeration, and the paired bootstrap on a known difference."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from training.bootstrap import paired_bootstrap
from training.passk import ks_to_report, mean_pass_at_k, pass_at_k


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """The share of all k-subsets of n samples (c correct) that contain at least one correct sample."""
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_brute_force_for_every_c_and_k(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_closed_form_and_edges():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(200, 13, 100) == pytest.approx(1 - math.comb(187, 100) / math.comb(200, 100))
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    with pytest.raises(ValueError, match="k=6"):
        pass_at_k(5, 1, 6)
    with pytest.raises(ValueError, match="c=7"):
        pass_at_k(5, 7, 1)


def test_pass_at_k_matches_monte_carlo_on_random_tasks():
    rng = random.Random(3)
    counts = [(8, rng.randint(0, 8)) for _ in range(40)]
    k = 3
    draws = []
    for _ in range(4000):
        hits = []
        for n, c in counts:
            idx = rng.sample(range(n), k)
            hits.append(any(i < c for i in idx))
        draws.append(sum(hits) / len(hits))
    assert mean_pass_at_k(counts, k) == pytest.approx(np.mean(draws), abs=0.01)


def test_ks_to_report():
    assert ks_to_report(1) == [1]
    assert ks_to_report(8) == [1, 2, 4, 8]
    assert ks_to_report(5) == [1, 2, 4, 5]


def test_paired_bootstrap_finds_a_known_difference():
    rng = np.random.default_rng(0)
    difficulty = rng.uniform(0, 1, 400)
    a = (rng.uniform(0, 1, 400) > difficulty).astype(float)
    # B solves every task A solves plus ~15% more of the rest: a true improvement of about 0.07
    b = np.maximum(a, (rng.uniform(0, 1, 400) < 0.15).astype(float))
    res = paired_bootstrap(a, b, n_resamples=4000, seed=1)
    true_delta = float(b.mean() - a.mean())
    assert res.delta == pytest.approx(true_delta)
    assert res.ci_low < true_delta < res.ci_high
    assert res.ci_low > 0 and res.significant and res.p_not_better < 0.01


def test_paired_bootstrap_no_difference_interval_covers_zero():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 2, 300).astype(float)
    same = paired_bootstrap(a, a.copy(), n_resamples=2000)
    assert same.delta == 0 and same.ci_low == 0 and same.ci_high == 0 and not same.significant
    b = a.copy()
    swap = rng.choice(300, 40, replace=False)
    b[swap] = 1 - b[swap]  # 40 random flips in both directions: no systematic difference
    res = paired_bootstrap(a, b, n_resamples=2000, seed=2)
    assert res.ci_low < 0 < res.ci_high and not res.significant


def test_paired_is_tighter_than_unpaired_when_tasks_vary():
    rng = np.random.default_rng(7)
    base = rng.uniform(0, 1, 200)
    a = base + rng.normal(0, 0.02, 200)
    b = base + 0.03 + rng.normal(0, 0.02, 200)
    res = paired_bootstrap(a, b, n_resamples=2000)
    unpaired_se = math.sqrt(a.var() / 200 + b.var() / 200)
    assert (res.ci_high - res.ci_low) < 2 * 1.96 * unpaired_se / 3
    assert res.significant


def test_paired_bootstrap_rejects_mismatched_input():
    with pytest.raises(ValueError, match="equal length"):
        paired_bootstrap([1, 0], [1])
