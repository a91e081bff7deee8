"""IdentityMemo finds a value by the very objects it was worked out from."""

from __future__ import annotations

import numpy as np

from fabricops.core.identity_memo import IdentityMemo


def test_a_value_is_found_by_the_same_objects_only_and_the_memo_stays_bounded() -> None:
    memo: IdentityMemo[str] = IdentityMemo(max_entries=2)
    a, b = np.arange(3), np.arange(3)
    memo.put((a,), "from a")
    assert memo.get(a) == "from a"
    assert memo.get(b) is None  # equal values, another array
    memo.put((a, b), "from a and b")
    assert memo.get(a, b) == "from a and b"
    assert memo.get(b, a) is None
    memo.put((b,), "from b")  # a third entry: the memo starts over
    assert len(memo) == 1
    assert memo.get(a) is None
    assert memo.get(b) == "from b"
