// libFuzzer target: any bytes as a hardware description (a .toml file of hardware/). Reading must never
// crash or hang and must report any problem as a located error; a description that reads must
// print (format_hardware) and read back to the same text, and the model must price a small
// derivation on it at finite, positive times (issue 15: fractional or huge SM counts gave NaN or
// negative times). Built by tests/fuzz/CMakeLists.txt, run by tests/fuzz/run.sh.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "derive/derivation.hpp"
#include "diagrams/verify.hpp"
#include "tests/fuzz/fuzz_target.hpp"
#include "hardware/hardware.hpp"

using namespace napkin;

namespace {
using fuzz::Target;
using fuzz::make;
bool finite_positive(double t) { return std::isfinite(t) && t > 0; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Small, so that the search stays cheap: a contraction (tensor-core and SMEM terms) and a
  // softmax (row strategy, special-function and HBM terms).
  static const Target targets[] = {
      make("diagram mm\naxis i = 128\naxis j = 128\naxis k = 64\nin A[i,k] : bf16\nin B[k,j] : bf16\nC[i,j] = contract(A, B; k)\nout C : bf16\n"),
      make("diagram sm\naxis r = 64\naxis c = 256\nin X[r,c] : fp16\nY[r,c] = softmax(X; c)\nout Y : fp16\n"),
  };
  const std::string text(reinterpret_cast<const char*>(data), size);
  SourceManager sm;
  DiagnosticEngine diags;
  auto hw = parse_hardware(*sm.add("fuzz.toml", text), diags);
  const std::string rendered = diags.render();
  if (!hw) {
    if (!diags.has_errors() || rendered.find("fuzz.toml:") != 0) std::abort();  // rejected: a located error first
    return 0;
  }
  const std::string printed = format_hardware(*hw, "fuzz");
  DiagnosticEngine d2;
  auto again = parse_hardware(*sm.add("again.toml", printed), d2);
  if (!again || format_hardware(*again, "fuzz") != printed) std::abort();
  for (const auto& t : targets) {
    try {
      Derivation dv = derive(*t.program, *t.diagram, t.sizes, *hw);
      if (!finite_positive(dv.chosen.cost.t_total) || !finite_positive(dv.unfused.cost.t_total)) std::abort();
      for (const auto& k : dv.chosen.kernels)
        if (!finite_positive(k.cost.t_total)) std::abort();
    } catch (const UserError&) {
      // nothing fits this hardware (tiny SMEM, few registers): a clean user error
    }
  }
  return 0;
}
