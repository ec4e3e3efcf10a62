import resource, numpy as np, coopjit
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
a = np.ones((2048, 2048), np.float32); b = np.ones((2048, 2048), np.float32)
for plan, kw in (({'order':'k_outer','ksplit':512,'kt':4,'pack':0}, {}), ({'order':'k_outer','ksplit':512,'kt':4,'pack':0}, {'bias': np.ones(2048, np.float32)}),
                 ({'order':'m_inner','ksplit':512,'kt':4,'pack':0}, {})):
    try:
        coopjit.gemm(a, b, plan=plan, **kw); print('ran?')
    except MemoryError as e: print('MemoryError', e)
import ml_dtypes
x = a.astype(ml_dtypes.bfloat16)
try: coopjit.gemm(x, x, plan={'order':'k_outer','ksplit':512,'kt':4,'pack':0})
except MemoryError as e: print('MemoryError', e)
print(coopjit.gemm(a[:4], b[:, :5], plan={'order':'k_outer','ksplit':4})[0, 0], coopjit.gemm(a, b)[0, 0])
