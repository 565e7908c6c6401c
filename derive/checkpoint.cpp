// Recompute or save (contract: checkpoint.hpp).
#include "derive/checkpoint.hpp"

#include <algorithm>

#include "diagrams/grad.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/verify.hpp"

namespace napkin {

namespace {

/** Predicted seconds of the forward plus the backward that differentiate(save) writes, and the
 *  gradient itself: both diagrams loaded back from their text and derived at `sizes`. */
struct Priced {
  GradResult grad;
  double seconds = 0;
  SizeMap sizes;  ///< of the forward with calls inlined
};

Priced price(const Program& p, const Diagram& d, const std::vector<std::string>& wrt, const std::vector<std::string>& save,
             const SizeMap& sizes, const Hardware& hw) {
  Priced out;
  out.grad = differentiate(p, d, wrt, save);
  DiagnosticEngine diags;
  auto gp = load_program_text("<napkin grad>", print_file(out.grad.file), diags);
  if (!diags.has_errors()) verify_program(*gp, diags);
  NAPKIN_ASSERT(!diags.has_errors()) << "the gradient of " << d.name << " does not verify:\n" << diags.render();
  // Only the axes declared by a literal take the overrides; products (a call's twin axes) follow.
  for (const auto& diagram : gp->main_file().diagrams) {
    SizeMap overrides;
    for (const auto* a : diagram.axes())
      if (sizes.count(a->name) && a->size.size() == 1 && a->size[0].axis.empty()) overrides[a->name] = sizes.at(a->name);
    auto resolved = resolve_sizes(diagram, overrides, diags);
    NAPKIN_ASSERT(resolved) << diags.render();
    out.seconds += derive(*gp, diagram, *resolved, hw).chosen.cost.t_total;
    out.sizes = *resolved;
  }
  return out;
}

/** One pass of local search over `plan` (checkpoint.hpp): each fitting candidate added to the
 *  set or taken out of it, kept where the predicted time falls. The set stays in candidate order. */
void refine(const Program& p, const Diagram& d, const std::vector<std::string>& wrt, const SizeMap& sizes, const Hardware& hw,
            CheckpointPlan& plan) {
  for (const auto& c : plan.candidates) {
    if (!c.fits) continue;
    const bool in = std::find(plan.save.begin(), plan.save.end(), c.array) != plan.save.end();
    if (!in && plan.saved_bytes + c.bytes > plan.budget_bytes) continue;
    std::vector<std::string> trial;
    for (const auto& o : plan.candidates)
      if (o.array == c.array ? !in : std::find(plan.save.begin(), plan.save.end(), o.array) != plan.save.end()) trial.push_back(o.array);
    const double t = trial.empty() ? plan.seconds_recompute : price(p, d, wrt, trial, sizes, hw).seconds;
    if (t >= plan.seconds) continue;
    plan.save = trial;
    plan.saved_bytes += in ? -c.bytes : c.bytes;
    plan.seconds = t;
    ++plan.refined;
  }
}

}  // namespace

CheckpointPlan plan_checkpointing(const Program& p, const Diagram& d, const std::vector<std::string>& wrt,
                                  const SizeMap& sizes, const Hardware& hw, double budget_bytes) {
  NAPKIN_ASSERT(budget_bytes >= 0) << "memory budget " << budget_bytes;
  CheckpointPlan plan;
  plan.budget_bytes = budget_bytes;
  const Priced base = price(p, d, wrt, {}, sizes, hw);
  plan.seconds_recompute = plan.seconds = base.seconds;
  const Diagram& fwd = base.grad.file.diagrams.front();
  const DType activation = fwd.outputs().empty() ? DType::fp32 : fwd.outputs().front()->dtype;
  for (const auto& a : base.grad.recomputed) {
    const Statement* s = fwd.find_statement(a);
    CheckpointCandidate c;
    c.array = a;
    c.bytes = static_cast<double>(product(base.sizes, s->axes)) * dtype_bits(s->dtype.value_or(activation)) / 8;
    c.fits = c.bytes <= budget_bytes;
    c.seconds = c.fits ? price(p, d, wrt, {a}, sizes, hw).seconds : base.seconds;
    plan.candidates.push_back(c);
  }
  std::vector<const CheckpointCandidate*> order;
  for (const auto& c : plan.candidates)
    if (c.fits && c.seconds < base.seconds) order.push_back(&c);
  std::sort(order.begin(), order.end(), [&](const auto* x, const auto* y) {
    return (base.seconds - x->seconds) / std::max(x->bytes, 1.0) > (base.seconds - y->seconds) / std::max(y->bytes, 1.0);
  });
  std::vector<std::string> save;
  double bytes = 0;
  for (const auto* c : order)
    if (bytes + c->bytes <= budget_bytes) save.push_back(c->array), bytes += c->bytes;
  if (!save.empty()) {
    const double together = price(p, d, wrt, save, sizes, hw).seconds;
    if (together < base.seconds) plan.save = save, plan.saved_bytes = bytes, plan.seconds = together;
  }
  refine(p, d, wrt, sizes, hw, plan);
  for (auto& c : plan.candidates) c.chosen = std::find(plan.save.begin(), plan.save.end(), c.array) != plan.save.end();
  return plan;
}

}  // namespace napkin
