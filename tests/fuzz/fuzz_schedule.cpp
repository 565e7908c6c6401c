// libFuzzer target: any bytes as a schedule for the bundled attention diagram and for a two-kernel
// diagram. Parsing and checking must never crash or hang; a schedule that checks must also cost,
// print and parse back to itself. Built and run by tests/fuzz/run.sh.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "derive/check_schedule.hpp"
#include "diagrams/verify.hpp"
#include "tests/fuzz/fuzz_target.hpp"

using namespace napkin;

namespace {
using fuzz::Target;
using fuzz::make;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Target targets[] = {
      make("diagram attention\naxis b = 1\naxis h = 32\naxis q = 8192\naxis x = 8192\naxis d = 128\nin Q[b,h,q,d] : bf16\n"
           "in K[b,h,x,d] : bf16\nin V[b,h,x,d] : bf16\nS[b,h,q,x] = mask(contract(Q, K; d) * rsqrt(d), causal(q, x))\n"
           "P[b,h,q,x] = softmax(S; x)\nO[b,h,q,d] = contract(P, V; x)\nout O : bf16\n"),
      make("diagram mlp\naxis t = 300\naxis m = 64\naxis f = 96\nin X[t,m] : fp16\nin W[m,f] : fp16\nin U[f,m] : fp16\n"
           "N[t,m] = layernorm(X; m)\nH[t,f] = gelu(contract(N, W; m))\nY[t,m] = contract(H, U; f) + mean(X; m)\nout Y : fp16\n"),
  };
  static const Hardware hw = load_hardware("h100");
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    SourceManager sm;
    DiagnosticEngine diags;
    auto s = parse_schedule(*sm.add("fuzz.schedule", text), diags);
    (void)diags.render();
    if (!s) return 0;
    std::string printed = print_schedule(*s);
    DiagnosticEngine d2;
    auto again = parse_schedule(*sm.add("again.schedule", printed), d2);
    if (!again || !(*again == *s) || print_schedule(*again) != printed) std::abort();
    for (const auto& t : targets) {
      Schedule retargeted = *s;
      retargeted.diagram = t.diagram->name;
      DiagnosticEngine d3;
      (void)check_schedule(*t.program, *t.diagram, retargeted, t.sizes, hw, {}, d3);
      (void)d3.render();
    }
  } catch (const UserError&) {
  }
  return 0;
}
