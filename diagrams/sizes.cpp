#include "diagrams/sizes.hpp"

#include <limits>

namespace napkin {

namespace {
std::int64_t mul_sat(std::int64_t a, std::int64_t b) {
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a) return std::numeric_limits<std::int64_t>::max();
  return a * b;
}
}  // namespace

std::int64_t product(const SizeMap& sizes, const std::vector<std::string>& axes) {
  std::int64_t p = 1;
  for (const auto& a : axes) {
    auto it = sizes.find(a);
    p = mul_sat(p, it == sizes.end() ? 1 : it->second);
  }
  return p;
}

std::optional<SizeMap> resolve_sizes(const Diagram& d, const SizeMap& overrides, DiagnosticEngine& diags,
                                     SourceLoc where) {
  SizeMap sizes;
  bool ok = true;
  for (const auto& [name, value] : overrides) {
    if (!d.find_axis(name)) {
      diags.error(where, "diagram '" + d.name + "' has no axis '" + name + "' to set");
      ok = false;
    }
  }
  for (const AxisDecl* a : d.axes()) {
    if (sizes.count(a->name)) continue;  // a duplicate declaration; the verifier reports it
    std::int64_t declared = 1;
    bool derived = false, known = true;
    for (const auto& f : a->size) {
      if (f.axis.empty()) {
        declared = mul_sat(declared, f.literal);
        continue;
      }
      derived = true;
      auto it = sizes.find(f.axis);
      if (it == sizes.end()) {
        diags.error(f.loc, "axis '" + a->name + "' is sized by '" + f.axis +
                               "', which is not an axis declared before it");
        known = ok = false;
      } else {
        declared = mul_sat(declared, it->second);
      }
    }
    if (!known) continue;
    std::int64_t size = declared;
    if (auto it = overrides.find(a->name); it != overrides.end()) {
      if (derived && it->second != declared) {
        diags.error(where.valid() ? where : a->loc,
                    "size mismatch: axis '" + a->name + "' is a product of other axes, " + std::to_string(declared) +
                        ", but is given size " + std::to_string(it->second));
        ok = false;
      }
      size = it->second;
    }
    if (size < 1 || size > kMaxAxisSize) {
      diags.error(where.valid() && overrides.count(a->name) ? where : a->loc,
                  "axis '" + a->name + "' has size " + std::to_string(size) + "; sizes must be between 1 and 2^40");
      ok = false;
      continue;
    }
    sizes[a->name] = size;
  }
  if (!ok) return std::nullopt;
  return sizes;
}

}  // namespace napkin
