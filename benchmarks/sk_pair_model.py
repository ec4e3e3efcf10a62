"""A timeline model of the Stream-K walk with and without sk_pair (issue 16, session 25): each
block walks its parts in the recipe's order (gemm_recipe_gpu.cpp, simt_tma_ws.cpp), a part costs
its K tiles, a part that adds another's sum waits until that sum is stored (+ `ovh` K tiles for a
store or a read-back). It prints the makespan (K tiles), the longest and the mean wait of a block.

    python benchmarks/sk_pair_model.py [TILES ...] [--tiles-k 16] [--workers 132]

It explained the first two device runs (benchmarks/recorded/issue16-h100-sk-dsmem-session25.md):
with the odd block's head always adding the even block's tail ('A'), or the seam's direction
chosen but the even block's tail not walked last when it has no pair part ('swap, early tail'),
some blocks wait most of a tile (152 tiles: 29-31 K tiles against 19.6), as measured (1.6-1.7x).
"""
import sys


def model(tiles, tk, W, pair=True, mode="swap", ovh=0.3):
    I = tiles * tk
    begin = lambda w: w * I // W  # noqa: E731

    def swap_of(o):
        if mode == "A" or o < 0 or o + 1 >= W:
            return False
        hi_o, hi_e = begin(o + 1), begin(o + 2)
        bx, room = hi_o % tk, (hi_e - hi_o) - hi_e % tk
        return 0 < bx <= room

    units = {}
    for g in range(W):
        lo_g, hi_g = begin(g), begin(g + 1)
        parts = [(t, max(lo_g, t * tk), min(hi_g, (t + 1) * tk)) for t in range(lo_g // tk, -(-hi_g // tk))]
        parts = [(t, lo, hi, lo == t * tk, hi < (t + 1) * tk) for t, lo, hi in parts]
        n, odd, last = len(parts), g % 2 == 1, len(parts) - 1
        sw = pair and swap_of(g if odd else g - 1)
        order = list(range(n))
        if pair and n:
            tail0, head_last = lo_g % tk != 0, hi_g % tk != 0
            if mode in ("A", "swap, early tail"):  # the forms measured in runs 1 and 3
                tail0, head_last = True, True
            rot = [(u + 1) % n for u in range(n)]
            if odd:
                order = [last if u == 0 else 0 if u == last else u for u in range(n)] if sw else (rot if tail0 else order)
            elif sw:
                order = [u + 1 if u < last - 1 else last if u == last else 0 for u in range(n)] if head_last else rot
        units[g] = ([parts[i] for i in order], sw, odd)
    t_block, ptr, produced, waits = [0.0] * W, [0] * W, {}, [0.0] * W
    progress = True
    while progress:
        progress = False
        for g in range(W):
            seq, sw, odd = units[g]
            while ptr[g] < len(seq):
                t, lo, hi, head, has_next = seq[ptr[g]]
                end = t_block[g] + (hi - lo)
                need, produce = None, False
                if head and has_next:
                    if pair and not odd:
                        need = (t, "p")
                    elif pair and sw:
                        produce = "x"
                    else:
                        need = (t, "x")
                elif not head:
                    produce = "p" if pair and odd else "x"
                    if pair and not odd and sw:
                        need, produce = (t, "x"), False
                if need:
                    if need not in produced:
                        break
                    w = max(0.0, produced[need] - end)
                    waits[g] += w
                    end += w + ovh
                if produce:
                    end += ovh
                    produced[(t, produce)] = end
                t_block[g], ptr[g], progress = end, ptr[g] + 1, True
    stuck = [g for g in range(W) if ptr[g] < len(units[g][0])]
    assert not stuck, f"blocks {stuck[:8]} never finish"
    return max(t_block), max(waits), sum(waits) / W


def main():
    args = sys.argv[1:]
    tk = int(args[args.index("--tiles-k") + 1]) if "--tiles-k" in args else 16
    W = int(args[args.index("--workers") + 1]) if "--workers" in args else 132
    tiles = [int(a) for i, a in enumerate(args) if a.isdigit() and (i == 0 or not args[i - 1].startswith("--"))] or [133, 136, 144, 152, 165, 198]
    for n in tiles:
        row = [f"{n} tiles x {tk} K tiles, {W} workers: no pair {model(n, tk, W, False)[0]:.1f}"]
        for mode in ("A", "swap, early tail", "swap"):
            mk, mx, mean = model(n, tk, W, True, mode)
            row.append(f"{mode}: {mk:.1f} (longest wait {mx:.1f}, mean {mean:.2f})")
        print(" | ".join(row))


if __name__ == "__main__":
    main()
