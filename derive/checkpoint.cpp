// Recompute or save (contract: checkpoint.hpp).
#include "derive/checkpoint.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

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

/** Threads the machine runs at once (at least 1). */
std::size_t hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

/** price(...).seconds of each save set of `sets`, the sets priced on up to the machine's hardware
 *  threads at once (each a derive of the forward and the backward, independent of the others:
 *  derive keeps no shared mutable state). An empty set is `recompute` seconds, not priced again.
 *  The first exception in set order is rethrown after every thread has ended. */
std::vector<double> price_sets(const Program& p, const Diagram& d, const std::vector<std::string>& wrt, const std::vector<std::vector<std::string>>& sets,
                               const SizeMap& sizes, const Hardware& hw, double recompute) {
  std::vector<double> seconds(sets.size(), recompute);
  std::vector<std::exception_ptr> errors(sets.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < sets.size(); i = next++) {
      if (sets[i].empty()) continue;
      try {
        seconds[i] = price(p, d, wrt, sets[i], sizes, hw).seconds;
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const std::size_t threads = std::min(sets.size(), hardware_threads());
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return seconds;
}

/** One pass of local search over `plan` (checkpoint.hpp): each fitting candidate in turn added to
 *  the set or taken out of it, the first change that lowers the predicted time kept, and the pass
 *  going on after it from the current set. The set stays in candidate order. The next trials, one
 *  per hardware thread, are priced together (price_sets); after a kept change those behind it are
 *  priced again against the new set, so the result is the sequential pass's (and one thread prices
 *  exactly what the sequential pass did). */
void refine(const Program& p, const Diagram& d, const std::vector<std::string>& wrt, const SizeMap& sizes, const Hardware& hw,
            CheckpointPlan& plan) {
  std::size_t from = 0;
  while (from < plan.candidates.size()) {
    std::vector<std::size_t> index;  // the next candidates from `from` with a trial, one per hardware thread
    std::vector<bool> was_in;        // each of them in the set before its trial (the trial takes it out)
    std::vector<std::vector<std::string>> trials;
    for (std::size_t i = from; i < plan.candidates.size() && trials.size() < hardware_threads(); ++i) {
      const auto& c = plan.candidates[i];
      if (!c.fits) continue;
      const bool in = std::find(plan.save.begin(), plan.save.end(), c.array) != plan.save.end();
      if (!in && plan.saved_bytes + c.bytes > plan.budget_bytes) continue;
      std::vector<std::string> trial;
      for (const auto& o : plan.candidates)
        if (o.array == c.array ? !in : std::find(plan.save.begin(), plan.save.end(), o.array) != plan.save.end()) trial.push_back(o.array);
      index.push_back(i);
      was_in.push_back(in);
      trials.push_back(std::move(trial));
    }
    const std::vector<double> t = price_sets(p, d, wrt, trials, sizes, hw, plan.seconds_recompute);
    if (t.empty()) return;
    std::size_t k = 0;
    while (k < t.size() && t[k] >= plan.seconds) ++k;
    if (k == t.size()) {
      from = index.back() + 1;
      continue;
    }
    const auto& c = plan.candidates[index[k]];
    plan.save = trials[k];
    plan.saved_bytes += was_in[k] ? -c.bytes : c.bytes;
    plan.seconds = t[k];
    ++plan.refined;
    from = index[k] + 1;
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
  std::vector<std::vector<std::string>> alone;  // each fitting candidate saved alone (an empty set: not priced)
  for (const auto& a : base.grad.recomputed) {
    const Statement* s = fwd.find_statement(a);
    CheckpointCandidate c;
    c.array = a;
    c.bytes = static_cast<double>(product(base.sizes, s->axes)) * dtype_bits(s->dtype.value_or(activation)) / 8;
    c.fits = c.bytes <= budget_bytes;
    alone.push_back(c.fits ? std::vector<std::string>{a} : std::vector<std::string>{});
    plan.candidates.push_back(c);
  }
  const std::vector<double> alone_seconds = price_sets(p, d, wrt, alone, sizes, hw, base.seconds);
  for (std::size_t i = 0; i < plan.candidates.size(); ++i) plan.candidates[i].seconds = alone_seconds[i];
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
