// libFuzzer target: any bytes as a diagram file. Checks, for every input, that napkin neither
// crashes nor hangs, and that whatever parses and verifies also round-trips through the printer,
// renders to DOT and, at small sizes, evaluates. Built and run by tests/fuzz/run.sh.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "derive/derivation.hpp"
#include "diagrams/eval.hpp"
#include "emit/cpu_emitter.hpp"
#include "emit/pseudo_emitter.hpp"
#include "emit/relabelled_dot.hpp"
#include "diagrams/parser.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/to_dot.hpp"
#include "diagrams/verify.hpp"

using namespace napkin;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    DiagnosticEngine diags;
    auto p = load_program_text("fuzz.napkin", text, diags);
    (void)diags.render();
    if (p->main_file().diagrams.empty()) return 0;
    const Diagram& d = p->main_file().diagrams.back();
    verify_program(*p, diags, &d);
    (void)diags.render();
    if (diags.has_errors()) return 0;
    // Round trip: the canonical text parses back to the same value, and is a fixpoint.
    std::string once = print_file(p->main_file());
    DiagnosticEngine d2;
    SourceManager sm;
    File again = parse_file(*sm.add("again.napkin", once), d2).file;
    if (d2.has_errors() || !(again == p->main_file()) || print_file(again) != once) std::abort();
    auto sizes = resolve_sizes(d, {}, diags);
    if (!sizes) return 0;
    (void)diagram_to_dot(*p, d, *sizes);
    if (estimate_work(*p, d, *sizes) < 1e6) {
      std::map<std::string, Tensor> in;
      for (const auto* i : d.inputs()) in[i->name] = random_input(*i, *sizes, 1);
      (void)evaluate(*p, d, *sizes, in);
    }
    // Derivation and emission of small diagrams: the search, the model, the passes and the emitters.
    // Small in statements and in work: the search at the bundled diagrams' sizes takes seconds
    // under the sanitizers (mlp_swiglu: 8 s), past the hang timeout; mutated sizes reach it.
    if (d.statements().size() <= 6 && estimate_work(*p, d, *sizes) < 1e10) {
      static const Hardware hw = load_hardware("h100");
      Derivation dv = derive(*p, d, *sizes, hw);
      const Diagram& scheduled = dv.diagram(d);  // contractions of 3+ operands split
      (void)emit_cpu(*p, scheduled, dv);
      (void)emit_pseudo(*p, scheduled, dv, hw);
      DotRelabelling labels = relabelling_of(dv.chosen);
      (void)diagram_to_dot(*p, scheduled, *sizes, &labels);
    }
  } catch (const UserError&) {
    // a user error raised as an exception (limits, sizes): fine
  }
  return 0;  // InternalError and anything else escape and are reported as crashes
}
