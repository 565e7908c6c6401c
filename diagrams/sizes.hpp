/** \file sizes.hpp
 *  Axis sizes: resolving declared sizes, `--set` overrides and call bindings.
 */
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "diagrams/diagnostics.hpp"
#include "diagrams/ir.hpp"

namespace napkin {

/** Axis name -> size in elements. */
using SizeMap = std::map<std::string, std::int64_t>;

/** Largest axis size accepted (2^40 elements); larger sizes are a user error. */
inline constexpr std::int64_t kMaxAxisSize = std::int64_t{1} << 40;

/** Sizes of every axis of `d`. Axes are resolved in declaration order: an override (from `--set`
 *  or a call binding) replaces the declared size; an axis declared as a product (`axis h = g * r`)
 *  is recomputed from its factors, and an override that disagrees with the product is a
 *  "size mismatch". Errors (unknown factor, size < 1 or > kMaxAxisSize, mismatch) are reported at
 *  the declaration, or at `where` for overrides; returns nullopt if any. */
std::optional<SizeMap> resolve_sizes(const Diagram& d, const SizeMap& overrides, DiagnosticEngine& diags,
                                     SourceLoc where = {});

/** Product of `sizes` over `axes`; saturates at INT64_MAX instead of overflowing. */
std::int64_t product(const SizeMap& sizes, const std::vector<std::string>& axes);

}  // namespace napkin
