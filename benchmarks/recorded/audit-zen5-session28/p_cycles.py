import numpy as np, coopjit, threading
from coopjit import _core
print('before any call', _core._gemm_cycles(), _core._tsc())
print('reset false', _core._gemm_cycles(False))
a = np.random.rand(64, 300).astype(np.float32); b = np.random.rand(300, 70).astype(np.float32)
ref = a.astype(np.float64)@b
def chk(tag, plan, **kw):
    try:
        r = coopjit.gemm(a, b, plan=plan, **kw)
        err = np.abs(r-ref*kw.get('alpha',1)).max()
        print(tag, plan, 'err', err)
    except Exception as e:
        print(tag, plan, 'ERR', type(e).__name__, e)
for plan in ({'cycles':1}, {'cycles':1,'pack':1}, {'cycles':1,'pack':1,'threads':17}, {'cycles':1,'pack':1,'threads':2,'shares':4},
             {'cycles':1,'pack':1,'split':'sk','threads':3}, {'cycles':1,'pack':1,'split':'sk+dp','threads':5},
             {'cycles':1,'pack':1,'ksplit':2}, {'cycles':1,'order':'k_outer','ksplit':4},{'cycles':2,'pack':1},{'cycles':-1,'pack':1},
             {'cycles':1,'pack':1,'own_a':1,'threads':3},{'cycles':1,'pack':1,'c_prefetch':1},{'c_prefetch':1},{'c_prefetch':2},
             {'cycles':True,'pack':True,'threads':16,'shares':64}):
    chk('plain', plan)
    chk('alpha', plan, alpha=2.5)
d = _core._gemm_cycles(); print('slots', len(d['slots']), 'calls', d['calls'], d['fields'])
# fused epilogue with cycles
try:
    r = coopjit.matmul(a, b, bias=np.ones(70, np.float32), activation='relu', plan={'cycles':1,'pack':1,'threads':3})
    print('fused err', np.abs(r - np.maximum(ref+1,0)).max())
except Exception as e: print('fused ERR', e)
# after a failed call
try: coopjit.gemm(a, b[:5], plan={'cycles':1,'pack':1})
except Exception as e: print('failed call', type(e).__name__)
print(_core._gemm_cycles()['calls'])
# concurrent
errs=[]
def worker(i):
    for j in range(30):
        r = coopjit.gemm(a, b, plan={'cycles':1,'pack':1,'threads':1+i%3})
        if np.abs(r-ref).max()>1e-3: errs.append(i)
        if j%5==0: _core._gemm_cycles(j%2==0)
ts=[threading.Thread(target=worker,args=(i,)) for i in range(6)]
[t.start() for t in ts]; [t.join() for t in ts]
print('concurrent errs', errs, _core._gemm_cycles()['calls'])
# batched with cycles
A = np.random.rand(3, 20, 30).astype(np.float32); B = np.random.rand(3, 30, 40).astype(np.float32)
try:
    r = coopjit.matmul(A, B, plan={'cycles':1,'pack':1,'threads':4}); print('batched err', np.abs(r - A.astype(float)@B).max())
except Exception as e: print('batched ERR', e)
for dt in ('bfloat16','int8','float64','float16'):
    import ml_dtypes
    t = getattr(ml_dtypes, dt, None) or np.dtype(dt)
    x = (np.random.rand(40, 600)*4).astype(t); y = (np.random.rand(600, 50)*4).astype(t)
    for thr in (1, 2, 5, 17):
        try:
            r = coopjit.matmul(x, y, plan={'cycles':1,'pack':1,'threads':thr})
            print(dt, thr, 'err', np.abs(r.astype(np.float64) - x.astype(np.float64)@y.astype(np.float64)).max())
        except Exception as e: print(dt, thr, 'ERR', e)
d=_core._gemm_cycles(); print('slots', len(d['slots']), d['calls'])
