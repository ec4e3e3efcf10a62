"""The README's table of the operations of seeds/002 and 003 ("Operations of the documents, by
target") says what the lowerings build: each row's marks against coopjit.conformance, which
compiles each operation's probe kernel for the CPU, SPIR-V (spirv-val) and NVPTX."""
import re
from pathlib import Path

import pytest

from coopjit import conformance, spirv

README = Path(__file__).resolve().parents[1] / "README.md"
COLUMNS = {"cpu": "cpu", "opencl / level zero": "spirv", "cuda": "ptx"}
BUILT = {"cpu": "yes", "spirv": "yes", "ptx": "PTX generated, not run here"}


def table_rows():
    text = README.read_text()
    m = re.search(r"<!-- operation-table -->\n(.*?)\n<!-- /operation-table -->", text, re.S)
    assert m, "the README has no operation table"
    lines = m.group(1).strip().splitlines()
    split = lambda line: [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
    head = split(lines[0])
    assert head[:3] == ["doc", "operation", "probe"] and [COLUMNS.get(h) for h in head[3:]] == ["cpu", "spirv", "ptx"], head
    return [dict(zip(head, split(line))) for line in lines[2:]]


@pytest.fixture(scope="module")
def support():
    if "error" in spirv.tools()["spirv-val"]:
        pytest.skip("no spirv-val (SPIRV-Tools): the SPIR-V column cannot be checked here")
    return {p: {t: conformance.support(p, t) for t in conformance.TARGETS} for p in conformance.probes()}


def test_every_probe_has_a_row_and_every_row_a_document():
    rows = table_rows()
    probes = {r["probe"].strip("`") for r in rows if r["probe"] != "—"}
    assert probes == set(conformance.probes())
    assert {r["doc"] for r in rows} == {"002", "003"}
    assert len({(r["doc"], r["operation"]) for r in rows}) == len(rows), "one row per operation"


def test_the_marks_are_what_the_lowerings_build(support):
    wrong = []
    for r in table_rows():
        probe = r["probe"].strip("`")
        for col, target in COLUMNS.items():
            mark = r[col]
            if r["probe"] == "—":  # the IR cannot express it: nothing to build anywhere
                if mark != "not built":
                    wrong.append(f"{r['operation']} / {col}: '{mark}' but there is no probe (say 'not built')")
                continue
            why = support[probe][target]
            want = BUILT[target] if why == "" else "no"
            if mark != want:
                wrong.append(f"{r['operation']} / {col}: the table says '{mark}', the lowering says "
                             f"{'it builds' if why == '' else repr(why[:160])}")
    assert not wrong, "\n".join(wrong)


def test_unknown_probe_and_target_are_errors():
    with pytest.raises(ValueError, match="unknown operation probe 'nope'.*load_tensor"):
        conformance.support("nope", "cpu")
    with pytest.raises(ValueError, match="unknown target 'gpu'.*cpu, spirv, ptx"):
        conformance.support("splat", "gpu")


def test_a_refusal_says_why(support):
    """Where a target does not build an operation, the reason is the lowering's own message."""
    refusals = {(p, t): why for p, d in support.items() for t, why in d.items() if why}
    for (p, t), why in refusals.items():
        assert len(why) > 20 and ("SIMT lowering" in why or "support" in why or "scope" in why), (p, t, why)
