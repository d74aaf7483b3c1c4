"""bench/kernel_trace.py's trace reading (the tracing itself needs a GPU and torch): kernel names
made readable, iterations split, busy and idle time from overlapping and gapped events."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from kernel_trace import gpu_events, short_name, split_iterations, summarize  # noqa: E402

MANGLED = ("_ZN6cudapy8rnngraph7codegen13optim_kernels12_fill_kernelB2v1B96cw51cXTLSUwv1sCUt9Uw1VEUQQA_3dE5Array"
           "IfLi1E1C7mutable7alignedEf")


def test_short_names():
    assert short_name(MANGLED) == "optim_kernels._fill_kernel"
    assert short_name("rnngraph_generated_0459e88b::loop0_bwd_2[abi:v21][abi:cw51c]") == \
        "rnngraph_generated_0459e88b.loop0_bwd_2"
    cublas = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off"
    assert short_name(cublas) == cublas[:60]


def _event(name, ts, dur, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


def test_iterations_busy_and_idle(tmp_path):
    # two iterations of (a, memset, b); in the second, b starts before the memset ends (overlap
    # counted once) and a gap of 10 us follows a
    events = [_event("a", 0, 100), _event("Memset (Device)", 100, 20, "gpu_memset"), _event("b", 130, 50),
              _event("a", 1000, 100), _event("Memset (Device)", 110 + 1000, 20, "gpu_memset"),
              _event("b", 1125, 50), {"ph": "X", "cat": "cpu_op", "name": "host", "ts": 5, "dur": 3}]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events[::-1]}))
    got = gpu_events(str(path))
    assert [e["name"] for e in got] == ["a", "Memset (Device)", "b"] * 2  # host events dropped, sorted by start
    first, second = (summarize(it) for it in split_iterations(got, 2))
    assert first["span_ms"] == pytest.approx(0.180) and first["busy_ms"] == pytest.approx(0.170)
    assert first["idle_ms"] == pytest.approx(0.010)
    assert second["span_ms"] == pytest.approx(0.175) and second["busy_ms"] == pytest.approx(0.165)
    assert second["kernels"] == pytest.approx({"a": 0.1, "Memset (Device)": 0.02, "b": 0.05})
    with pytest.raises(ValueError, match="7 GPU events do not split into 2"):
        split_iterations(got + [got[0]], 2)
