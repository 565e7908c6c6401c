# SDPA forward times (flash = FA2, cuDNN) at B4 H16 N4096 d128 bf16 on the device: the references of
# the forward napkin grad writes (attention_fwd: O and its logsumexp P_lse), causal and not.
# Run: python3 tools/device/sdpa_fwd.py
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.manual_seed(0)
B, H, N, D = 4, 16, 4096, 128
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
def bench(backend, causal):
    with sdpa_kernel(backend):
        ts = []
        for i in range(25):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); F.scaled_dot_product_attention(q, k, v, is_causal=causal); e.record(); torch.cuda.synchronize()
            ts.append(s.elapsed_time(e) * 1e3)
        ts = sorted(ts[5:]); return ts[len(ts) // 2]
for causal in (False, True):
    for name, b in (("flash (FA2)", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        tag = "causal " if causal else ""
        try: print(f"SDPA {tag}forward {name} (requires_grad: saves logsumexp): {bench(b, causal):.1f} us (B{B} H{H} N{N} d{D} bf16, median of 20)")
        except Exception as ex: print(tag + name, "failed:", ex)
print(torch.__version__, torch.cuda.get_device_name())
