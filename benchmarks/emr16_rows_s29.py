"""The 16-core host's rows still behind torch after session 28 (issue 14, session 29): f32 64 / 16 x
4096 x 4096 and int8 64x4096x4096 with the packed nest's B packed by its reader (inline_b) in shares
(each share a range of column panels, its own slot of B; the pool hands them out after a launch that
packs A) and B's rows prefetched further on in K as they are packed (b_prefetch on inline_b plans);
f32 513x129x700, 100x37x250, 1x4096x4096, 32 x 128^3; f32 4096^3 (and 2048^3) blocking variants
against coopjit.peak().

Method as benchmarks/emr16_rows_s28.py (whose measure() it uses): every coopjit variant goes in
through the tuned-plan table on the product's signature (plan=None calls), each library / variant
timed in its own block of calls after a pause, the order reversed every other round; medians
[min-max] over the rounds; every result checked against NumPy in float64 first (int8 exactly).

  python benchmarks/emr16_rows_s29.py [NAME ...]     (default: every row)
  ROUNDS=5 PAUSE=0.2 BLOCK_S=0.08 SHRINK=1 (SHRINK=8: a dry run on smaller shapes), JSON=FILE
Recorded: benchmarks/recorded/issue14-emr16-rows-session29.txt."""
import json
import os
import sys

os.environ.setdefault("PAUSE", "0.2")
os.environ.setdefault("BLOCK_S", "0.08")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emr16_rows_s28 as r28  # noqa: E402

import coopjit  # noqa: E402

r28.ROWS.update({
    "f32_16x4096x4096": ("float32", 0, 16, 4096, 4096),
    "f32_100x37x250": ("float32", 0, 100, 37, 250),
    "f32_32x128x128x128": ("float32", 32, 128, 128, 128),
    "f32_2048x2048x2048": ("float32", 0, 2048, 2048, 2048),
})
IB = {"inline_b": 1}
VARIANTS = {
    "f32_64x4096x4096": [("planner", None), ("ib shares2", dict(IB, shares=2)), ("ib shares4", dict(IB, shares=4)),
                         ("ib pf4096", dict(IB, b_prefetch=4096)),
                         ("ib shares4 pf4096", dict(IB, shares=4, b_prefetch=4096)),
                         ("ib shares4 pf1024", dict(IB, shares=4, b_prefetch=1024)),
                         ("ib shares4 pf4096 kt256", dict(IB, shares=4, b_prefetch=4096, kt=256))],
    "f32_16x4096x4096": [("planner", None), ("ib shares4", dict(IB, shares=4)), ("ib pf4096", dict(IB, b_prefetch=4096)),
                         ("ib shares4 pf4096", dict(IB, shares=4, b_prefetch=4096)),
                         ("ib shares4 pf4096 mr4", dict(IB, shares=4, b_prefetch=4096, mr=4))],
    "int8_64x4096x4096": [("planner", None), ("ib shares2", dict(IB, shares=2)), ("ib shares4", dict(IB, shares=4)),
                          ("ib pf4096", dict(IB, b_prefetch=4096)),
                          ("ib shares4 pf4096", dict(IB, shares=4, b_prefetch=4096))],
    "f32_513x129x700": [("planner", None), ("sk+dp", {"split": "sk+dp"}), ("t12", {"threads": 12}),
                        ("shares2", {"shares": 2}), ("mr6 nr64", {"mr": 6, "nr": 64})],
    "f32_100x37x250": [("planner", None), ("t8", {"threads": 8}), ("sk", {"split": "sk"}), ("mr4", {"mr": 4})],
    "f32_1x4096x4096": [("planner", None)],
    "f32_32x128x128x128": [("planner", None), ("shares2", {"shares": 2}), ("t8", {"threads": 8})],
    "f32_2048x2048x2048": [("planner", None), ("shares8", {"shares": 8}), ("kt512", {"kt": 512})],
    "f32_4096x4096x4096": [("planner", None), ("shares16", {"shares": 16}), ("kt512", {"kt": 512}),
                           ("mr8 nr48", {"mr": 8, "nr": 48})],
}
r28.SLOW.update({"f32_2048x2048x2048": 3})
ORDER = ["f32_64x4096x4096", "f32_16x4096x4096", "int8_64x4096x4096", "f32_513x129x700", "f32_100x37x250",
         "f32_1x4096x4096", "f32_32x128x128x128", "f32_2048x2048x2048", "f32_4096x4096x4096"]


def main():
    names = sys.argv[1:] or ORDER
    r28.header("rows s29")
    results = {}
    for name in names:
        if name == "f32_4096x4096x4096" and r28.SHRINK == 1:
            fma = coopjit.peak()["f32_fma"]
            print(f"  peak() f32 FMA: one thread {fma['single']:.1f}, all {fma['all']:.1f} GF/s ({fma['threads']} threads)",
                  flush=True)
        r28.measure(name, VARIANTS[name], results)
    out = os.environ.get("JSON")
    if out:
        with open(out, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
