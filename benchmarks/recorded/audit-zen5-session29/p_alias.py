"""gemm with c sharing memory with a (c = a's first columns, c = a's rows with another stride) on
K-split float products with a large alpha / beta that take the check's recomputation: against
NumPy in float64 from the values before, only c written."""
import numpy as np
import coopjit

bad = 0
for dt in (np.float32, np.float64):
    for how in ("cols", "stride", "whole"):
        for alpha, beta in ((1e33 if dt == np.float32 else 1e300, 0.5), (1.0, 2.0**27), (2.0, 0.0)):
            k = 8192
            x = 2.0**20 if dt == np.float32 else 2.0**500
            buf = np.zeros((8, 2 * k), dt)
            a = buf[:, :k]
            a[...] = 1.0
            b = np.empty((k, 8), dt)
            b[: k // 2] = x
            b[k // 2:] = -x
            b[-1] = -x + (4096.0 if dt == np.float32 else 2.0**460)
            if how == "cols":
                c = buf[:, :8]            # a's first 8 columns
            elif how == "stride":
                c = buf[:, k:k + 16:2]    # beside a, another stride (apart)
                c[...] = 3.0
            else:
                c = buf[:, ::k][:, :8] if False else buf[:, 0:8 * 1024:1024]  # a's columns 0, 1024, ...
            a0, c0 = a.copy(), c.copy()
            other = buf.copy()
            with np.errstate(all="ignore"):
                want = (alpha * (a0.astype(np.float64) @ b.astype(np.float64)) + beta * c0.astype(np.float64)).astype(dt)
            coopjit.gemm(a, b, c, alpha=alpha, beta=beta)
            ok = np.allclose(c, want, rtol=1e-6)
            mask = np.ones(buf.shape, bool)
            mask[np.ix_(range(8), np.arange(buf.shape[1])[np.isin(np.arange(buf.shape[1]), [c.__array_interface__["data"][0] // buf.itemsize - buf.__array_interface__["data"][0] // buf.itemsize + j * c.strides[1] // buf.itemsize for j in range(8)])])] = False
            ok = ok and np.array_equal(buf[mask], other[mask])
            bad += not ok
            print(np.dtype(dt).name, how, alpha, beta, "ok" if ok else f"WRONG {c[0, :3]} want {want[0, :3]}")
print("wrong:", bad)
