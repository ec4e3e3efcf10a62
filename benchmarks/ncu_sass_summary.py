"""Where a kernel's warps wait, from an ncu report's source page (issue 16, session 17): the
instructions with the most warp-stall samples (their top stall reasons) and the samples of each
block of N consecutive SASS instructions (with the block's commonest opcodes), so that the K loop,
the epilogue, the Stream-K fix-up and the producer's code can be told apart.

    ncu -k regex:gemm --launch-skip 1 --launch-count 1 --set full -o rep python benchmarks/cuda_sk_profile.py skdp
    ncu --import rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python benchmarks/ncu_sass_summary.py sass.csv [--top 30] [--block 100]
"""
import argparse
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--block", type=int, default=100)
    args = ap.parse_args()
    rows = list(csv.reader(open(args.csv)))
    hdr, data = rows[1], rows[2:]
    src, samp, ex = hdr.index("Source"), hdr.index("Warp Stall Sampling (All Samples)"), hdr.index("Instructions Executed")
    stalls = [j for j, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    num = lambda r, j: float(r[j] or 0)  # noqa: E731
    total = sum(num(r, samp) for r in data)
    print(f"{rows[0][1] if len(rows[0]) > 1 else ''}\n{total:.0f} samples, {len(data)} instructions\n\ntop instructions:")
    for i in sorted(sorted(range(len(data)), key=lambda i: -num(data[i], samp))[:args.top]):
        r = data[i]
        why = sorted(((num(r, j), hdr[j][6:]) for j in stalls), reverse=True)[:3]
        print(f"{i:5d} {num(r, samp) / total * 100:5.1f}%  {r[src].strip()[:70]:70s} " + " ".join(f"{n}:{v:.0f}" for v, n in why if v))
    print(f"\nblocks of {args.block} instructions:")
    for a in range(0, len(data), args.block):
        blk = data[a:a + args.block]
        ops = {}
        for r in blk:
            w = r[src].strip().split()
            if w:
                o = (w[1] if w[0].startswith("@") and len(w) > 1 else w[0]).split(".")[0]
                ops[o] = ops.get(o, 0) + 1
        common = ",".join(f"{k}{v}" for k, v in sorted(ops.items(), key=lambda x: -x[1])[:6])
        print(f"{a:5d}-{a + len(blk) - 1:5d} {sum(num(r, samp) for r in blk) / total * 100:5.1f}% of samples, "
              f"executed {sum(num(r, ex) for r in blk):10.0f}  {common}")


if __name__ == "__main__":
    main()
