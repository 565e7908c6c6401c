# SDPA backward times (flash = FA2, cuDNN) at B4 H16 N4096 d128 bf16, and of grouped-query attention (B1 Hq32 Hkv8 N2048, causal) on the device: the references of
# napkin grad's attention backward (docs/benchmarks.md, sessions 14 and 15), causal and not. Run: python3 tools/device/sdpa_bwd.py
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.manual_seed(0)
B, H, N, D = 4, 16, 4096, 128
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
do = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16)
def bench(backend, causal):
    with sdpa_kernel(backend):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        ts = []
        for i in range(25):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); torch.autograd.grad(o, (q, k, v), do, retain_graph=True); e.record(); torch.cuda.synchronize()
            ts.append(s.elapsed_time(e) * 1e3)
        ts = sorted(ts[5:]); return ts[len(ts) // 2]
for causal in (False, True):
    for name, b in (("flash (FA2)", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        tag = "causal " if causal else ""
        try: print(f"SDPA {tag}backward {name}: {bench(b, causal):.1f} us (B{B} H{H} N{N} d{D} bf16, median of 20)")
        except Exception as ex: print(tag + name, "failed:", ex)
print(torch.__version__, torch.cuda.get_device_name())
# Grouped-query attention's backward at the training block's shape (Llama-3-8B: 32 query heads,
# 8 key/value heads, d 128, causal, s 2048): the reference of napkin grad's gqa_attention_bwd.
B, HQ, HKV, N = 1, 32, 8, 2048
q = torch.randn(B, HQ, N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
k, v = (torch.randn(B, HKV, N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
do = torch.randn(B, HQ, N, D, device="cuda", dtype=torch.bfloat16)
def bench_gqa(backend):
    with sdpa_kernel(backend):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        ts = []
        for i in range(25):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); torch.autograd.grad(o, (q, k, v), do, retain_graph=True); e.record(); torch.cuda.synchronize()
            ts.append(s.elapsed_time(e) * 1e3)
        ts = sorted(ts[5:]); return ts[len(ts) // 2]
for name, b in (("flash (FA2)", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
    try: print(f"SDPA GQA causal backward {name}: {bench_gqa(b):.1f} us (B{B} Hq{HQ} Hkv{HKV} N{N} d{D} bf16, median of 20)")
    except Exception as ex: print("GQA", name, "failed:", ex)
