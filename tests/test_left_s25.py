"""Session 24's closing note left these as they were (`issues stops`, "Left as is" and "Review of
the change"); each test failed before its fix (session 25, helper hleft2): out= dtypes of fused
products, the arrays a compiled kernel keeps, dtype names, reductions' masked-array message."""
import numpy as np
import pytest

import coopjit


# ---- reduce's masked-array message named numpy.matmul ---------------------------------------------
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint8])
def test_masked_array_refusal_of_a_reduction_names_the_reduction(op, dtype):
    # reduce(masked) said "coopjit does not apply masks (numpy.matmul refuses them too): pass
    # a.filled(0)": the wrong function, and a fill that changes a min / max / prod.
    data = (np.arange(24).reshape(4, 6) % 7 + 1).astype(dtype)
    m = np.ma.masked_array(data, mask=(np.arange(24).reshape(4, 6) % 5 == 0))
    for call, where in ((lambda: coopjit.reduce(m, 1, op), "reduce"), (lambda: coopjit.reduce2x2(m, op), "reduce2x2")):
        with pytest.raises(TypeError, match="masked array") as e:
            call()
        msg = str(e.value)
        assert "matmul" not in msg and msg.startswith(f"{where}: a ") and repr(op) in msg, msg
        # the fill the message names leaves numpy.ma's result (which skips masked elements)
        fill = msg.split("a.filled(", 1)[1].split(")", 1)[0]
        filled = m.filled(eval(fill, {"numpy": np}))  # noqa: S307 - the message's own expression
        want = getattr(np.ma, {"sum": "sum", "prod": "prod", "min": "min", "max": "max"}[op])(m, axis=1)
        with np.errstate(over="ignore"):
            got = coopjit.reduce(filled, 1, op)
        np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype))
    out = np.ma.masked_array(np.zeros(4, coopjit.reduce(data, 1, op).dtype))
    with pytest.raises(TypeError, match=f"reduce: out is a masked array.*op='{op}'"):
        coopjit.reduce(data, 1, op, out=out)
