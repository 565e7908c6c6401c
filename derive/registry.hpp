/** \file registry.hpp
 *  The one table of relabelling passes: it drives the derivation pipeline (in this order) and
 *  `napkin passes`. Names carry the layer prefix (derive-...).
 */
#pragma once
#include <vector>

#include "derive/pass.hpp"

namespace napkin {

struct PassInfo {
  const char* name;
  const char* summary;
  const char* license;  ///< the lemma or theorem that makes its moves legal
  PassFn run;
  bool per_kernel;      ///< run once per kernel (else once per diagram)
};

const std::vector<PassInfo>& pass_registry();

}  // namespace napkin
