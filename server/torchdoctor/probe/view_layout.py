""".view() on a non-contiguous tensor: does it work for every shape of the same layout?

Loaded by runner/ from the file next to it; pure Python (sizes and strides are plain ints),
so it needs neither torch nor this package.

`view` never copies: it succeeds when every output dimension is made of input dimensions that
are adjacent in memory (torch's `computeStride`). A view that only *splits* dimensions, or
merges dimensions that are adjacent in memory, works whatever the sizes are: nanoGPT's
`q.view(B, T, nh, hs)` after `split` of the last dimension splits one dimension and is fine for
every B, T, C. A view that succeeds only because a merged dimension has size 1 (torch ignores
the stride of a size-1 dimension) raises as soon as that dimension is larger:
`x.mean(1, keepdim=True).transpose(1, 2).view(B, -1)` works for one step and fails for two.
Those are the views worth reporting; everything else is quiet. Such a tensor may even count as
contiguous at this shape (torch ignores size-1 dimensions there), so the check looks at every
view of a non-contiguous tensor or of one with a size-1 dimension.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FragileMerge:
    """Input dimensions that one output dimension merges although they are not adjacent in
    memory; the view works only while `size_one_dim` has size 1."""

    input_dims: tuple[int, ...]
    size_one_dim: int


def _adjacent(sizes: Sequence[int], strides: Sequence[int], outer: int, inner: int) -> bool:
    """Dimension `outer` steps over exactly one run of dimension `inner` (inner = outer + 1)."""
    return strides[outer] == strides[inner] * sizes[inner]


def _groups(
    in_sizes: Sequence[int], out_sizes: Sequence[int]
) -> list[tuple[list[int], list[int]]] | None:
    """Order-preserving alignment of the input's dimensions of size > 1 to the output's, by
    running products: each group is (input dims, output dims) with equal products. None when
    the element counts do not line up (the view would not be valid at all)."""
    ins = [d for d, size in enumerate(in_sizes) if size != 1]
    outs = [d for d, size in enumerate(out_sizes) if size != 1]
    groups: list[tuple[list[int], list[int]]] = []
    i = o = 0
    while i < len(ins) and o < len(outs):
        group_in, group_out = [ins[i]], [outs[o]]
        in_product, out_product = in_sizes[ins[i]], out_sizes[outs[o]]
        i, o = i + 1, o + 1
        while in_product != out_product:
            if in_product < out_product:
                if i == len(ins):
                    return None
                group_in.append(ins[i])
                in_product *= in_sizes[ins[i]]
                i += 1
            else:
                if o == len(outs):
                    return None
                group_out.append(outs[o])
                out_product *= out_sizes[outs[o]]
                o += 1
        groups.append((group_in, group_out))
    if i != len(ins) or o != len(outs):
        return None
    return groups


def fragile_merges(
    in_sizes: Sequence[int], in_strides: Sequence[int], out_sizes: Sequence[int]
) -> list[FragileMerge]:
    """The merges of `tensor.view(out_sizes)` that hold only because a dimension has size 1.

    Every group of the alignment merges a run of consecutive input dimensions (the size-1
    dimensions between its members included); a size-1 input dimension outside every group
    either meets a size-1 output dimension at the same place or is absorbed by a neighbouring
    group. Each merge is checked as if every size-1 dimension were larger: its stride must then
    place it right next to its neighbour. An empty list means the view is valid for every
    shape of this layout.
    """
    if len(in_sizes) != len(in_strides) or 0 in in_sizes:
        return []
    groups = _groups(in_sizes, out_sizes)
    if groups is None:
        return []
    found: list[FragileMerge] = []
    for group_in, _ in groups:
        run = list(range(group_in[0], group_in[-1] + 1))
        for outer, inner in zip(run, run[1:], strict=False):
            # a pair of larger dimensions that is not adjacent would have made view raise
            # (unless the strides coincide for these sizes, which this check cannot see)
            ones = [d for d in (outer, inner) if in_sizes[d] == 1]
            if ones and not _adjacent(in_sizes, in_strides, outer, inner):
                found.append(FragileMerge(tuple(run), ones[0]))
                break
    found.extend(_fragile_loose_dims(in_sizes, in_strides, out_sizes, groups))
    return found


def _fragile_loose_dims(
    in_sizes: Sequence[int],
    in_strides: Sequence[int],
    out_sizes: Sequence[int],
    groups: list[tuple[list[int], list[int]]],
) -> list[FragileMerge]:
    """Size-1 input dimensions outside every group's run. While the view keeps as many size-1
    dimensions outside its groups, each is just moved (a `keepdim` dimension that is always 1
    may go anywhere). When it keeps fewer, some are merged into a neighbouring group, which
    only works for every size where the dimension's stride is adjacent to that group's edge."""
    inside_in = {d for g_in, _ in groups for d in range(g_in[0], g_in[-1] + 1)}
    inside_out = {d for _, g_out in groups for d in range(g_out[0], g_out[-1] + 1)}
    loose = [d for d, size in enumerate(in_sizes) if size == 1 and d not in inside_in]
    free_out = [d for d, size in enumerate(out_sizes) if size == 1 and d not in inside_out]
    if len(loose) <= len(free_out):
        return []
    found: list[FragileMerge] = []
    for dim in loose:
        before = max((d for d in inside_in if d < dim), default=None)
        after = min((d for d in inside_in if d > dim), default=None)
        joins_before = before is not None and all(
            _adjacent(in_sizes, in_strides, d, d + 1) for d in range(before, dim)
        )
        joins_after = after is not None and all(
            _adjacent(in_sizes, in_strides, d, d + 1) for d in range(dim, after)
        )
        edge = before if before is not None else after
        if not (joins_before or joins_after) and edge is not None:
            found.append(FragileMerge(tuple(sorted({dim, edge})), dim))
    return found


def describe(
    in_sizes: Sequence[int], in_strides: Sequence[int], out_sizes: Sequence[int],
    merge: FragileMerge,
) -> str:
    """The finding's message: which dimensions, why it works now, when it raises."""
    dims = ", ".join(str(d) for d in merge.input_dims)
    return (
        f".view({list(out_sizes)}) of a tensor of shape {list(in_sizes)} "
        f"(strides {list(in_strides)}) merges dimensions {dims}, which are not adjacent in "
        f"memory: it works only because dimension {merge.size_one_dim} has size 1 and raises "
        "'view size is not compatible with input tensor's size and stride' once it is larger. "
        "Use .reshape() or .contiguous().view()"
    )
