#!/usr/bin/env python3
"""A Llama-style pre-norm transformer block trained for a few steps with napkin's operators, beside
the same block in eager PyTorch (same initial weights, same data): prints both losses per step and
the median time of a training step (forward, backward, AdamW) of each.

    X2 = X + Wo(gqa_attention(rmsnorm(X) Wq, rmsnorm(X) Wk, rmsnorm(X) Wv))
    Y  = X2 + mlp_swiglu(rmsnorm(X2), W1, W3, W2)

--mode ops (default): napkin's rmsnorm, causal GQA attention and SwiGLU MLP operators
(diagrams/library/rmsnorm.napkin, gqa_attention_bshd.napkin, mlp_swiglu.napkin), the projections as
torch matmuls. --mode block: the whole block as one napkin operator
(diagrams/library/transformer_block.napkin). The eager block uses F.rms_norm (or its primitive
ops), SDPA (is_causal) and the matmuls. Weights are bf16, stored in the diagram's layouts.

On a GPU (defaults: Llama-3-8B widths, s = 2048):
    python3 python/examples/train_block.py --napkin build/cli/napkin [--compile] [--steps 20]
Small and on CPU (runs napkin's emitted PyTorch modules, no timing claim):
    python3 python/examples/train_block.py --device cpu --small
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
import napkin_torch  # noqa: E402

LIB = os.path.join(REPO, "diagrams", "library")


def init_weights(m, g, r, d, f, device, seed=0):
    """The block's weights (bf16, leaves), in transformer_block.napkin's input order and layouts."""
    gen = torch.Generator().manual_seed(seed)

    def w(*shape, fan_in, scale=1.0):
        return (torch.randn(shape, generator=gen) * scale / math.sqrt(fan_in)).to(device, torch.bfloat16).requires_grad_()

    ones = lambda: torch.ones(m, device=device, dtype=torch.bfloat16, requires_grad=True)  # noqa: E731
    return [ones(), w(m, g, r, d, fan_in=m), w(m, g, d, fan_in=m), w(m, g, d, fan_in=m), w(g, r, d, m, fan_in=g * r * d, scale=0.5),
            ones(), w(m, f, fan_in=m), w(m, f, fan_in=m), w(f, m, fan_in=f, scale=0.5)]


def rms_norm(x, w, eps=1e-5):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def causal_attention(q, k, v):
    """q [b, H, s, d], k and v [b, H, s, d]: SDPA where torch has it."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (scores.softmax(-1).to(q.dtype) @ v)


def eager_block(x, n1, wq, wk, wv, wo, n2, w1, w3, w2):
    """The block in eager PyTorch: x [b, s, m] bf16 -> [b, s, m]."""
    b, s, m = x.shape
    g, r, d = wq.shape[1:]
    h = rms_norm(x, n1)
    q = (h @ wq.reshape(m, -1)).reshape(b, s, g * r, d).transpose(1, 2)
    k = (h @ wk.reshape(m, -1)).reshape(b, s, g, 1, d).expand(b, s, g, r, d).reshape(b, s, g * r, d).transpose(1, 2)
    v = (h @ wv.reshape(m, -1)).reshape(b, s, g, 1, d).expand(b, s, g, r, d).reshape(b, s, g * r, d).transpose(1, 2)
    a = causal_attention(q, k, v).transpose(1, 2).reshape(b, s, g * r * d)
    x2 = x + a @ wo.reshape(g * r * d, m)
    h2 = rms_norm(x2, n2)
    return x2 + (F.silu(h2 @ w1) * (h2 @ w3)) @ w2


def napkin_ops_block(ops):
    """The block with napkin's rmsnorm, GQA attention and SwiGLU MLP operators."""
    norm, attn, mlp = ops

    def block(x, n1, wq, wk, wv, wo, n2, w1, w3, w2):
        b, s, m = x.shape
        g, r, d = wq.shape[1:]
        h = norm(x.reshape(b * s, m), n1).reshape(b, s, m)
        # gqa_attention_bshd.napkin takes Q [b, s, g, r, d] and K, V [b, s, g, d] as the projections
        # write them, and returns O [b, s, g, r, d]: no transposes (copies) on either side.
        q = (h @ wq.reshape(m, -1)).reshape(b, s, g, r, d)
        k = (h @ wk.reshape(m, -1)).reshape(b, s, g, d)
        v = (h @ wv.reshape(m, -1)).reshape(b, s, g, d)
        a = attn(q, k, v).reshape(b, s, g * r * d)
        x2 = x + a @ wo.reshape(g * r * d, m)
        h2 = norm(x2.reshape(b * s, m), n2)
        return x2 + mlp(h2, w1, w3, w2).reshape(b, s, m)

    return block


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def train(name, block, weights, data, steps, lr, device, opt=None, first=0):
    """Trains `weights` on `data` (x, target) with AdamW for `steps` (numbered from `first`),
    continuing `opt` where given; returns (losses, step ms, the optimizer)."""
    opt = opt or torch.optim.AdamW(weights, lr=lr, weight_decay=0.0)
    x, target = data
    losses, times = [], []
    for i in range(first, first + steps):
        sync(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        y = block(x, *weights)
        loss = F.mse_loss(y.float(), target)
        loss.backward()
        opt.step()
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())
        print(f"  {name:>8} step {i:2d}: loss {losses[-1]:.5f}  {times[-1]:8.2f} ms", flush=True)
    return losses, times, opt


def profile_step(name, block, weights, data, lr, top):
    """One training step of `block` under torch.profiler: its `top` costliest GPU kernels (total
    time, calls) and the step's GPU time, so that the gap between two blocks is found per kernel."""
    from torch.profiler import ProfilerActivity, profile
    opt = torch.optim.AdamW(weights, lr=lr, weight_decay=0.0)
    x, target = data
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(block(x, *weights).float(), target)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0)) > 0]
    dev_time = lambda e: getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0))  # noqa: E731
    total = sum(dev_time(e) for e in rows)  # CUDA activity only: the rows are kernels, copies and fills
    print(f"\nprofile of one {name} step: GPU kernels {total / 1e3:.2f} ms; the {top} costliest:")
    for e in sorted(rows, key=dev_time, reverse=True)[:top]:
        print(f"  {dev_time(e) / 1e3:8.3f} ms  {e.count:4d} x  {e.key[:110]}")
    print_idle(prof, top)


def print_idle(prof, top):
    """Where the GPU waited for the host in the profiled step: the span from the first kernel's
    start to the last one's end, the time no kernel ran in it, and its `top` longest gaps with the
    kernels on either side (a gap is host time the GPU did not hide: launches, Python, syncs)."""
    from torch.autograd import DeviceType
    spans = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                   if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start)
    if not spans:
        return
    gaps, end, before = [], spans[0][1], spans[0][2]
    for start, stop, name in spans[1:]:
        if start > end:
            gaps.append((start - end, before, name))
        if stop >= end:
            end, before = stop, name
    idle = sum(g for g, _, _ in gaps)
    print(f"  GPU span {(end - spans[0][0]) / 1e3:.3f} ms, idle {idle / 1e3:.3f} ms in {len(gaps)} gaps; the longest:")
    for g, a, b in sorted(gaps, reverse=True)[:top]:
        print(f"  {g:8.1f} us  after {a[:60]}  before {b[:60]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--napkin", help="napkin CLI (default: $NAPKIN_BIN, PATH, build/cli/napkin)")
    ap.add_argument("--hw", default="h100", help="napkin hardware the kernels are derived for (h100, h200, a100, ...)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--mode", choices=("ops", "block"), default="ops")
    ap.add_argument("--compile", action="store_true", help="torch.compile(fullgraph=True) both blocks")
    ap.add_argument("--small", action="store_true", help="tiny widths (s=32, m=64, g=2, r=2, d=16, f=128)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2, help="steps left out of the median time")
    ap.add_argument("--rounds", type=int, default=1, help="interleave the two blocks' steps in this many rounds")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--memory-budget", type=float, default=4e9, metavar="BYTES",
                    help="napkin grad --memory-budget of each operator: what its forward may keep for its backward, chosen by "
                         "the model's time (eager PyTorch keeps every activation autograd needs); 0 recomputes everything")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after training, profile one step of each block and print its N costliest GPU kernels")
    args = ap.parse_args()
    b, s, m, g, r, d, f = args.batch, args.seq, 4096, 8, 4, 128, 14336
    if args.small:
        s, m, g, r, d, f = 32, 64, 2, 2, 16, 128
    dev = args.device
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name(0) if dev.startswith('cuda') else dev}, "
          f"b={b} s={s} m={m} g={g} r={r} d={d} f={f}, mode {args.mode}{', compiled' if args.compile else ''}, "
          f"memory budget {args.memory_budget:.3g} bytes per operator")

    t0 = time.time()
    budget = args.memory_budget if args.memory_budget > 0 else None
    load = lambda fname: napkin_torch.load(os.path.join(LIB, fname), hw=args.hw, napkin=args.napkin, memory_budget=budget)  # noqa: E731
    if args.mode == "ops":
        ops = [load("rmsnorm.napkin"), load("gqa_attention_bshd.napkin"), load("mlp_swiglu.napkin")]
        block = napkin_ops_block(ops)
    else:
        whole = load("transformer_block.napkin")
        block = lambda x, *w: whole(x, *w)  # noqa: E731
    weights = init_weights(m, g, r, d, f, dev)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(b, s, m, generator=gen).to(dev, torch.bfloat16)
    target = (0.5 * torch.roll(x.float(), 1, dims=1) + 0.1 * torch.randn(b, s, m, generator=gen).to(dev)).detach()
    # First call builds every kernel (napkin emit + nvcc per operator, forward and backward; cached on disk).
    out = block(x, *weights)
    out.float().sum().backward()
    sync(dev)
    print(f"napkin operators ready in {time.time() - t0:.1f} s (builds included; cache {napkin_torch.cache_root()})")

    nap_w = [w.detach().clone().requires_grad_() for w in weights]
    eag_w = [w.detach().clone().requires_grad_() for w in weights]
    nap_block, eag_block = block, eager_block
    if args.compile:
        nap_block = torch.compile(block, fullgraph=True)
        eag_block = torch.compile(eager_block, fullgraph=True)
    # Interleaved rounds (--rounds): each block trains its next steps in turn, so that a drift of
    # the GPU's clocks over the run weighs on both alike.
    nap_loss, nap_ms, eag_loss, eag_ms, nap_opt, eag_opt = [], [], [], [], None, None
    per_round = -(-args.steps // max(1, args.rounds))
    for first in range(0, args.steps, per_round):
        n = min(per_round, args.steps - first)
        losses, ms, nap_opt = train("napkin", nap_block, nap_w, (x, target), n, args.lr, dev, nap_opt, first)
        nap_loss += losses; nap_ms += ms
        losses, ms, eag_opt = train("eager", eag_block, eag_w, (x, target), n, args.lr, dev, eag_opt, first)
        eag_loss += losses; eag_ms += ms
    skip = min(args.warmup, args.steps - 1)
    tn, te = statistics.median(nap_ms[skip:]), statistics.median(eag_ms[skip:])
    print(f"\nloss: napkin {nap_loss[0]:.5f} -> {nap_loss[-1]:.5f}, eager {eag_loss[0]:.5f} -> {eag_loss[-1]:.5f} "
          f"(largest relative gap between the two curves {max(abs(a - e) / abs(e) for a, e in zip(nap_loss, eag_loss)):.2e})")
    if args.profile > 0 and dev.startswith("cuda"):
        for name, blk, w in (("napkin", nap_block, nap_w), ("eager", eag_block, eag_w)):
            profile_step(name, blk, w, (x, target), args.lr, args.profile)
    if dev.startswith("cuda"):  # which road the eager calls took (napkin_torch/fastpath.py)
        from napkin_torch import fastpath
        loaded = ops if args.mode == "ops" else [whole]
        road = f"{sum(op.fast_calls for op in loaded)} calls on the C++ road" if fastpath.module() else f"the Python road ({fastpath.reason()})"
        print(f"napkin_torch: {road}")
    label = "torch.compile'd eager" if args.compile else "eager"
    print(f"training step, median of {len(nap_ms) - skip}: napkin {tn:.2f} ms, {label} PyTorch {te:.2f} ms: "
          f"napkin {te / tn:.2f}x {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
