"""Row ids of a slice of a table, without materialising every row id first."""
from __future__ import annotations

from typing import Optional, Union

import torch
from torch import Tensor


def slice_ids(rows: slice, num_rows: int, device: Optional[Union[str, torch.device]] = None) -> Tensor:
    """``torch.arange(num_rows)[rows]`` (int64, on ``device``) in O(len) memory, not
    O(num_rows). A negative step raises, as slicing a tensor does."""
    start, stop, step = rows.indices(num_rows)
    if step < 0:
        raise ValueError('step must be greater than zero')
    return torch.arange(start, max(start, stop), step, device=device)
