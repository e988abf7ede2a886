"""The reference of C7's uniform-token threshold, computed without the stream (issue 52).

The case measures the threshold of its "uniform random" token stream: metrics.py draws the
stream, estimates its Shannon entropy H and lag-1 correlation r, and applies the source's
formula max(0.4, 0.85 (1 - H/8 (1 - |r|))). This module gives the number that stream must
show if it is what its name says: the formula written again here, at the entropy the
generator was given (log2 of the vocabulary, at most log2 of the number of draws) and r = 0.
It imports nothing of the suite (the ledger's `independent_of` names metrics.py and
keys_case.py), so a stream, an estimator or a formula that is off disagrees with it.
"""

from __future__ import annotations

import math


def uniform_threshold(vocab_size: int, draws: int) -> float:
    """The threshold of i.i.d. uniform draws over `vocab_size` token ids, `draws` of them."""
    h = min(math.log2(vocab_size), math.log2(draws or 1))
    r = 0.0
    return max(0.4, 0.85 * (1 - (h / 8) * (1 - abs(r))))
