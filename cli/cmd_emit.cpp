// napkin emit: the derived (or given) schedule as pseudocode, a C++ loop nest or CUDA; or the plain
// diagram as a PyTorch module (the eager and torch.compile reference).
#include <fmt/core.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "emit/cpu_emitter.hpp"
#include "emit/cuda_emitter.hpp"
#include "emit/pseudo_emitter.hpp"
#include "emit/torch_emitter.hpp"

namespace napkin::cli {

Runner setup_emit(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto hw = std::make_shared<std::string>("h100");
  auto target = std::make_shared<std::string>("pseudo");
  auto out = std::make_shared<std::string>();
  auto schedule = std::make_shared<std::string>();
  args->add_to(sub);
  sub.add_option("--schedule", *schedule, "Emit this schedule file (checked first) instead of the derived schedule");
  sub.add_option("--hw", *hw, "Hardware the schedule is derived for")->capture_default_str();
  sub.add_option("--target", *target, "pseudo (looped pseudocode), cpu (compilable C++), cuda (a .cu file with a C entry point) or torch "
                 "(a Python module computing the plain diagram with PyTorch: the eager reference)")
      ->check(CLI::IsMember({"pseudo", "cpu", "cuda", "torch"}))
      ->capture_default_str();
  sub.add_option("-o,--output", *out, "Output file (default: standard output)");
  return [=] {
    auto l = load_checked(*args);
    if (!l) return 1;
    if (*target == "torch") {  // the plain diagram: no schedule
      if (!schedule->empty()) throw UserError("--schedule does not apply to --target torch: the module computes the plain diagram");
      DiagnosticEngine diags;
      std::string text = emit_torch(*l->program, *l->diagram, l->sizes, diags);
      if (diags.has_errors()) {
        std::cerr << diags.render();
        return 1;
      }
      write_output(*out, text);
      return 0;
    }
    Hardware h = load_hardware(*hw);
    std::optional<SearchResult> given;
    if (!schedule->empty() && !(given = load_schedule(*schedule, *l, h))) return 1;
    Derivation dv = given ? derive_given(*l->program, *l->diagram, l->sizes, h, std::move(*given)) : derive(*l->program, *l->diagram, l->sizes, h);
    const Diagram& d = dv.diagram(*l->diagram);  // as derive rewrote it (contraction order)
    std::string text = *target == "cpu"    ? emit_cpu(*l->program, d, dv)
                       : *target == "cuda" ? emit_cuda(*l->program, d, dv, h)
                                           : emit_pseudo(*l->program, d, dv, h);
    write_output(*out, text);
    return 0;
  };
}

}  // namespace napkin::cli
