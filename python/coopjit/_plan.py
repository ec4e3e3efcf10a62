"""A kernel's plan as a value: `Kernel.config` is a Plan (a dict of typed fields) that `plan=` takes back.

The core describes a plan as strings (see GemmPlan::fields / GpuGemmPlan::fields); here each field
gets its type: ints, bools, and enums by the names `plan=` takes ('row' / 'col', 'dp' / 'sk' /
'sk+dp', 'no' / 'yes' / 'emulated', ...). What a field's value means in words (why the planner chose
it, which instruction it stands for) moves to `Plan.notes`, which the printed and HTML forms of a
kernel show beside the value.
"""
from __future__ import annotations

import re

#: The core's words for the AMX mode -> the names plan= takes.
_AMX_WORDS = {"none": "no", "tiles": "yes", "emulated": "emulated"}
#: Fields that are facts of the problem or of the target, not choices: shown, never passed back.
_FACTS = frozenset({"dtype", "a_type", "b_type", "c_type", "unit_stride_a", "unit_stride_a_k", "unit_stride_b",
                    "unit_stride_c", "accumulate", "work_group_size", "macro_tile", "source",
                    "epilogue"})
#: config's name of a field -> the plan= name of the same choice.
_PLAN_NAME = {"fixed_shape": "fixed"}
_INT = re.compile(r"-?\d+")


class Plan(dict):
    """The plan of a compiled kernel: field -> value (int, bool or an enum's name as plan= takes it).

    `compile_gemm(..., plan=kernel.config)` and `matmul(a, b, plan=kernel.config)` plan the same
    kernel again (the fields that are choices are passed back; facts of the problem such as
    dtype are shown but not passed). `notes` holds, per field, what the value means
    in words; `overrides()` the choices alone as a plain dict.
    """

    def __init__(self, fields: dict, notes: dict | None = None, target: str = "cpu") -> None:
        super().__init__(fields)
        self.notes = dict(notes or {})
        #: "cpu" or "gpu": which devices' plan= takes this plan.
        self.target = target

    def overrides(self) -> dict:
        """The plan's choices as plan= takes them (facts of the problem left out)."""
        out = {}
        for key, value in self.items():
            # a device's vnni and subgroup width: facts (a CPU plan's simd_width is a choice: full or
            # half-width vectors)
            if key in _FACTS or (key in ("vnni", "simd_width") and self.target != "cpu"):
                continue
            if self.target != "cpu":
                # A device plan's choices as the GPU planner takes them back (they failed for
                # Hopper plans before session 22): epi_smem shows the bytes staged a warp, plan=
                # takes 'yes' / 'no'; an 8-bit product's mma.sync is the pipeline's consequence of
                # its types (plan mma= is for 16-bit inputs); key / code_key are names, not choices.
                if key == "epi_smem" and isinstance(value, int) and value > 1:
                    value = "yes"
                # tma and wgmma keep their description in the value ("yes: cp.async.bulk.tensor
                # ..."): plan= takes the word
                if isinstance(value, str) and value.partition(":")[0].strip() in ("no", "yes", "emulated"):
                    value = value.partition(":")[0].strip()
                if key == "mma" and self.get("a_type") in ("i8", "u8"):
                    continue
                if key in ("key", "code_key"):
                    continue
            out[_PLAN_NAME.get(key, key)] = value
        return out

    def __repr__(self) -> str:
        return f"Plan({dict.__repr__(self)})"

    def _repr_pretty_(self, p, cycle) -> None:  # IPython: one field a line
        p.text(repr(self) if cycle else "Plan(" + ", ".join(f"{k}={v!r}" for k, v in self.items()) + ")")


def _typed(key: str, text: str) -> tuple[object, str]:
    """(value, note) of one of the core's fields."""
    if text in ("true", "false"):
        return text == "true", ""
    if key == "amx":
        return _AMX_WORDS.get(text, text), ""
    if key == "grid_m" and text == "auto":
        return 0, "0: the grid is chosen at run time"
    m = _INT.match(text)
    if m and (m.end() == len(text) or not text[m.end()].isalnum()):
        rest = text[m.end():].lstrip(" :")
        return int(m.group()), rest if rest else ""
    if key in ("mma", "vnni", "dpas", "block2d", "ws", "persistent", "epi_alias", "sk_flags", "sk_down", "sk_trace", "sk_prefetch", "sk_stage", "sk_stage_store", "sk_one_release", "sk_pair", "cluster") and ":" in text:
        word, _, rest = text.partition(":")
        return word.strip(), rest.strip()
    return text, ""


def from_core(fields: dict, target: str = "cpu") -> Plan:
    """A Plan from the core's string fields (a kernel's `_core.config`)."""
    values, notes = {}, {}
    for key, text in fields.items():
        if key == "source":  # where the tile sizes come from: words only
            notes[key] = text
            continue
        value, note = _typed(key, str(text))
        values[key] = value
        if note:
            notes[key] = note
    return Plan(values, notes, target)
