#include "derive/pipeline.hpp"

#include "derive/registry.hpp"

namespace napkin {

KernelPipeline run_kernel_pipeline(const PassContext& c, const KernelPlan& params, const KernelChoice* priced, bool keep_after) {
  KernelPipeline out;
  KernelCandidate k(params, priced);
  for (const auto& pass : pass_registry()) {
    if (!pass.per_kernel) continue;
    auto steps = pass.run(c, k, out.labelled);  // derive-fusion, the first, replaces the empty diagram with the kernel's
    if (!k.refused.empty()) {
      out.refused = std::move(k.refused);
      out.refused_by = pass.name;
      return out;
    }
    out.steps.insert(out.steps.end(), steps.begin(), steps.end());
    if (keep_after) out.after.push_back(out.labelled);
  }
  out.lemmas = std::move(k.lemmas);
  return out;
}

}  // namespace napkin
