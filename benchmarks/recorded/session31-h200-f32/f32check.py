"""Lead, session 30: the FMA pipeline's f32 / f64 products on the GPU against float64, over the
forms the row-major panels change: transposes, odd shapes (edge tiles, K remainders), named tile
variants, batches, strided C, alpha / beta."""
import itertools, sys
import numpy as np, torch, coopjit
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator(device="cuda").manual_seed(7)
bad = runs = 0
PLANS = [None, {"kb": 4}, {"kb": 16}, {"sg_m": 4, "sg_n": 2}]
for dt, (m, n, k), ta, tb, plan in itertools.product((torch.float32, torch.float64),
        [(4096, 4096, 512), (1000, 333, 517), (64, 48, 40), (129, 67, 200), (7, 5, 3), (256, 1024, 36), (513, 129, 700)],
        (0, 1), (0, 1), PLANS):
    if dt == torch.float64 and plan is not None:
        continue
    a = torch.randn((k, m) if ta else (m, k), device="cuda", dtype=dt, generator=g)
    b = torch.randn((n, k) if tb else (k, n), device="cuda", dtype=dt, generator=g)
    A, B = (a.T if ta else a), (b.T if tb else b)
    c0 = torch.randn(m, n, device="cuda", dtype=dt, generator=g)
    c = c0.clone()
    try:
        coopjit.gemm(a, b, c, alpha=-1.5, beta=0.5, trans_a=bool(ta), trans_b=bool(tb), device="cuda:0", plan=plan)
    except Exception as e:  # noqa: BLE001
        if plan is None:
            print("ERROR", dt, m, n, k, ta, tb, plan, str(e)[:200]); bad += 1
        continue
    torch.cuda.synchronize()
    ref = -1.5 * (A.double() @ B.double()) + 0.5 * c0.double()
    bound = (1.5 * (A.double().abs() @ B.double().abs()) + 0.5 * c0.double().abs()) * (k + 2) * (6e-8 if dt == torch.float32 else 1.2e-16) * 4
    err = (c.double() - ref).abs()
    runs += 1
    if runs % 20 == 0: print("progress", runs, bad, flush=True)
    if not bool((err <= bound).all()) or not bool(torch.isfinite(c).all()):
        bad += 1
        print("WRONG", dt, m, n, k, ta, tb, plan, "max err", err.max().item(), "max bound", bound.max().item(), flush=True)
# batched stacks and strided / column-major outputs through matmul
for dt in (torch.float32, torch.float64):
    a = torch.randn(3, 200, 96, device="cuda", dtype=dt, generator=g); b = torch.randn(3, 96, 136, device="cuda", dtype=dt, generator=g)
    out = coopjit.matmul(a, b, device="cuda:0"); torch.cuda.synchronize(); runs += 1
    ref = a.double() @ b.double(); e = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    if e > (1e-5 if dt == torch.float32 else 1e-13): bad += 1; print("WRONG batched", dt, e)
    big = torch.full((300, 400), float("nan"), device="cuda", dtype=dt); cv = big[::2, 1::2][:128, :150]
    a2 = torch.randn(128, 64, device="cuda", dtype=dt, generator=g); b2 = torch.randn(64, 150, device="cuda", dtype=dt, generator=g)
    coopjit.gemm(a2, b2, cv, device="cuda:0"); torch.cuda.synchronize(); runs += 1
    ref = a2.double() @ b2.double(); e = ((cv.double() - ref).abs().max() / ref.abs().max()).item()
    untouched = big.clone(); untouched[::2, 1::2][:128, :150] = 0
    if e > (1e-5 if dt == torch.float32 else 1e-13) or bool((~torch.isnan(untouched) & (untouched != 0)).any()):
        bad += 1; print("WRONG strided C", dt, e)
print(f"f32check: {runs} products checked against float64, {bad} wrong", flush=True)
sys.exit(1 if bad else 0)
