"""The checked kernel cache (rnngraph/codegen/kernel_cache.py) outside the simulator, without a GPU:
an unreadable entry is dropped (no exception), the index key carries rnngraph's toolchain key, and a
generated module's kernels get the cache while its device functions do not. Loading real kernels
from the cache in a second process needs a GPU: tests/test_gpu_kernel_cache.py."""
from conftest import run_outside_simulator

SCRIPT = r'''
import json, logging, os, pickle, sys, tempfile, types
import numba
from numba import cuda, types as nt

records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger("rnngraph.compile").addHandler(Keep())

from rnngraph.codegen import module
from rnngraph.codegen.kernel_cache import compile_stats, toolchain_key

source = """from numba import cuda

@cuda.jit(device=True)
def twice(v):
    return v + v

@cuda.jit
def double_all(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = twice(x[i])
"""
m = module.load(source)
kernel_cache = type(m.double_all._cache).__name__
device_cache = type(getattr(m.twice, "_cache", None)).__name__

c = m.double_all._cache
codegen = types.SimpleNamespace(magic_tuple=lambda: ("nvptx64-nvidia-cuda", "sm_90", ""))
ctx = types.SimpleNamespace(refresh=lambda: None, codegen=lambda: codegen)
sig = (nt.float32[::1],)
key = c._index_key(sig, codegen)
c._impl.locator.ensure_cache_path()
c._cache_file.save(key, {"payload": list(range(1000))})
data = [os.path.join(c._cache_path, f) for f in os.listdir(c._cache_path) if f.endswith(".nbc")]
with open(data[0], "r+b") as f:  # truncated mid-pickle, as a killed writer or a full disk leaves it
    f.truncate(50)
loaded = c.load_overload(sig, ctx)
index_after = c._cache_file._load_index()
print(json.dumps({"kernel_cache": kernel_cache, "device_cache": device_cache, "key_tail": list(key[-1]),
                  "toolchain": toolchain_key(), "loaded": loaded, "index_after": len(index_after),
                  "warned": [r for r in records if "could not be read" in r],
                  "stats": [(r.name, r.hits, r.misses) for r in compile_stats()]}))
'''


def test_unreadable_cache_entry_is_dropped_and_the_key_carries_the_toolchain(tmp_path):
    out = run_outside_simulator(SCRIPT, cache_dir=tmp_path)
    assert out["kernel_cache"] == "CheckedCache"
    assert out["device_cache"] != "CheckedCache"  # device functions compile inside their kernels
    assert out["key_tail"] == ["rnngraph", out["toolchain"]] and len(out["toolchain"]) == 16
    assert out["loaded"] is None  # compiled again, no exception
    assert out["index_after"] == 0  # the unreadable entry is gone from the index
    assert len(out["warned"]) == 1 and "double_all" in out["warned"][0]
    assert out["stats"] == []  # nothing loaded or compiled yet
