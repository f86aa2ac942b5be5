"""Sampling helpers for the workload model; every draw comes from a Generator passed in.

- `lognormal(rng, spec, n)`: lognormal with a median and sigma, clipped to [low, high].
- `negative_binomial_r(mean, median)`: the NB shape for "1 + NB(r, p)" tasks per job with
  the given mean and median (the trace has mean 52.5, median 1: a very skewed law).
- `DiurnalClock`: maps gaps drawn in "operational time" (rate 1) to simulated time under
  the rate factor 1 + A cos(2 pi (t - peak) / period), so the arrival stream keeps the
  Weibull gap law locally and follows the diurnal curve globally.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from .scenario import Diurnal, LogNormal

__all__ = ["lognormal", "negative_binomial_r", "tasks_per_job", "DiurnalClock"]

FloatArray = npt.NDArray[np.float64]


def lognormal(rng: np.random.Generator, spec: LogNormal, n: int) -> FloatArray:
    """`n` draws of a lognormal with median `spec.median` and sigma `spec.sigma`, clipped."""
    out = rng.lognormal(math.log(spec.median), spec.sigma, n) if spec.sigma > 0 else \
        np.full(n, spec.median)
    return np.clip(out, spec.low, spec.high)


def _nb_cdf(k: int, r: float, p: float) -> float:
    """P(NB(r, p) <= k), NB counting failures before the r-th success (numpy's law)."""
    total = 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    for i in range(k + 1):
        total += math.exp(math.lgamma(i + r) - math.lgamma(r) - math.lgamma(i + 1)
                          + r * log_p + i * log_q)
    return total


def negative_binomial_r(mean: float, median: int) -> float:
    """Shape r such that X = 1 + NB(r, p) has mean `mean` and median `median`.

    p follows from the mean (p = r / (r + mean - 1)); r is found by bisection so that
    P(X <= median) = 1/2. Pure and deterministic.
    """
    m = mean - 1.0
    if m <= 0:
        return 1.0
    lo, hi = 1e-6, 1e6

    def below(r: float) -> float:
        return _nb_cdf(median - 1, r, r / (r + m)) - 0.5

    if below(lo) < 0:  # even the most skewed law cannot put half its mass that low
        return lo
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if below(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-12:
            break
    return math.sqrt(lo * hi)


def tasks_per_job(rng: np.random.Generator, r: float, mean: float, cap: int) -> int:
    """One draw of min(cap, 1 + NB(r, r / (r + mean - 1)))."""
    m = mean - 1.0
    if m <= 0:
        return 1
    return int(min(cap, 1 + int(rng.negative_binomial(r, r / (r + m)))))


class DiurnalClock:
    """Operational time -> simulated time under a diurnal rate curve."""

    __slots__ = ("_a", "_w", "_peak")

    def __init__(self, diurnal: Diurnal) -> None:
        self._a = diurnal.amplitude
        self._w = 2 * math.pi / diurnal.period_s
        self._peak = diurnal.peak_s

    def rate(self, t: float) -> float:
        return 1.0 + self._a * math.cos(self._w * (t - self._peak))

    def _integral(self, t: float) -> float:
        return t + self._a / self._w * math.sin(self._w * (t - self._peak))

    def advance(self, t: float, gap: float) -> float:
        """The time t' > t at which `gap` units of operational time have passed."""
        if self._a == 0.0 or gap <= 0.0:
            return t + max(gap, 0.0)
        target = self._integral(t) + gap
        lo, hi = t, t + gap / (1.0 - self._a)  # the rate is at least 1 - A
        x = min(max(t + gap / self.rate(t), lo), hi)
        for _ in range(50):  # Newton, kept inside the bracket (bisection if it leaves)
            f = self._integral(x) - target
            if abs(f) < 1e-9:
                break
            if f > 0:
                hi = x
            else:
                lo = x
            nxt = x - f / self.rate(x)
            x = nxt if lo < nxt < hi else (lo + hi) / 2
        return x
