# SDPA backward times (flash = FA2, cuDNN) at B4 H16 N4096 d128 bf16, causal and not, and of
# grouped-query attention at the training block's shape (Llama-3-8B: 32 query heads, 8 key/value
# heads, d 128, causal, s 2048) on the device: the references of napkin grad's attention and
# gqa_attention backwards (docs/benchmarks.md, sessions 14, 15 and 19). Run: python3 tools/device/sdpa_bwd.py
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.manual_seed(0)
D = 128


def inputs(b, hq, hkv, n):
    q = torch.randn(b, hq, n, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(b, hkv, n, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    return q, k, v, torch.randn(b, hq, n, D, device="cuda", dtype=torch.bfloat16)


def bench(backend, q, k, v, do, causal, gqa=False):
    """Median of 20 timed backwards (after 5 warm-up ones), microseconds."""
    with sdpa_kernel(backend):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **({"enable_gqa": True} if gqa else {}))
        ts = []
        for i in range(25):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); torch.autograd.grad(o, (q, k, v), do, retain_graph=True); e.record(); torch.cuda.synchronize()
            ts.append(s.elapsed_time(e) * 1e3)
        ts = sorted(ts[5:]); return ts[len(ts) // 2]


backends = (("flash (FA2)", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION))
mha = inputs(4, 16, 16, 4096)
for causal in (False, True):
    for name, b in backends:
        tag = "causal " if causal else ""
        try: print(f"SDPA {tag}backward {name}: {bench(b, *mha, causal):.1f} us (B4 H16 N4096 d{D} bf16, median of 20)")
        except Exception as ex: print(tag + name, "failed:", ex)
print(torch.__version__, torch.cuda.get_device_name())
gqa = inputs(1, 32, 8, 2048)
for name, b in backends:
    try: print(f"SDPA GQA causal backward {name}: {bench(b, *gqa, True, gqa=True):.1f} us (B1 Hq32 Hkv8 N2048 d{D} bf16, median of 20)")
    except Exception as ex: print("GQA", name, "failed:", ex)
