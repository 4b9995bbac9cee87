"""pass@k: the unbiased estimator of Chen et al. (2021) and the aggregates evaluation reports.

Why the estimator and not "any of the first k passed": with n >= k samples per task and c of them correct, the
probability that k samples drawn without replacement contain at least one correct one is
1 - C(n-c, k) / C(n, k). Averaging that over tasks is unbiased for pass@k, while taking the first k samples throws
away n-k of them and has a higher variance. Computed as a running product so it never overflows.
"""

from __future__ import annotations

from typing import Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with `n` samples of which `c` passed.

    `1 - prod_{i=n-c+1}^{n} (1 - k / i)` equals `1 - C(n-c, k) / C(n, k)` without computing large binomials.
    """
    if n < 1:
        raise ValueError(f"pass@k needs at least one sample per task, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"number correct c={c} must be between 0 and n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of samples n={n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """Mean of `pass_at_k` over tasks given (n, c) per task; tasks with fewer than k samples are an error."""
    if not counts:
        raise ValueError("pass@k over zero tasks is undefined")
    short = [i for i, (n, _) in enumerate(counts) if n < k]
    if short:
        raise ValueError(f"{len(short)} task(s) have fewer than k={k} samples (first at index {short[0]})")
    return sum(pass_at_k(n, c, k) for n, c in counts) / len(counts)


def ks_to_report(n: int) -> list[int]:
    """The k values worth reporting for n samples per task: 1, powers of two below n, and n itself."""
    ks = [1]
    k = 2
    while k < n:
        ks.append(k)
        k *= 2
    if n > 1:
        ks.append(n)
    return ks
