"""Times the reference kernels napkin's are to be measured against (issue 4), at the shapes of the
bundled diagrams: PyTorch SDPA (flash, cuDNN, efficient back ends) and naive attention for
attention.napkin and causal_attention.napkin (B=1, H=32, N=8192, d=128, bf16), and the cuBLAS GEMM
of matmul.napkin (8192 x 14336 x 4096, bf16). Checks each attention back end against an fp32
reference on fresh random inputs before timing (relative error printed). Median of 20 timed runs
after warm-up, CUDA events. Prints `name seconds tflops` lines. Run on a GPU machine with PyTorch:
    python3 kernels/reference/torch_references.py
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_seconds(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return sorted(times)[reps // 2]


def naive(q, k, v, causal):
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, device=s.device, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


def main():
    torch.manual_seed(0)
    print("device", torch.cuda.get_device_name(), "torch", torch.__version__, "cudnn", torch.backends.cudnn.version())
    B, H, N, D = 1, 32, 8192, 128
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        flops = 4 * B * H * N * N * D / (2 if causal else 1)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                err = ((out.float() - ref).norm() / ref.norm()).item()
                t = median_seconds(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            print(f"attention{'_causal' if causal else ''}_{name} {t:.6g} {flops / t / 1e12:.1f} relerr {err:.2e}")
        out = naive(q, k, v, causal)
        err = ((out.float() - ref).norm() / ref.norm()).item()
        t = median_seconds(lambda: naive(q, k, v, causal))
        print(f"attention{'_causal' if causal else ''}_naive {t:.6g} {flops / t / 1e12:.1f} relerr {err:.2e}")
    a = torch.randn(8192, 14336, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(14336, 4096, device="cuda", dtype=torch.bfloat16)
    t = median_seconds(lambda: a @ b)
    print(f"matmul_cublas {t:.6g} {2 * 8192 * 14336 * 4096 / t / 1e12:.1f}")


if __name__ == "__main__":
    main()
