/** \file relabelled_dot.hpp
 *  The relabelled diagram for `napkin render --derive` / `--schedule`: levels as colours,
 *  partitioned axes with their group or stream size, each kernel a region captioned with its
 *  moves, bytes per level and predicted time.
 */
#pragma once
#include "derive/search.hpp"
#include "diagrams/to_dot.hpp"

namespace napkin {

/** Labels for diagram_to_dot from a scheduled, costed diagram. */
DotRelabelling relabelling_of(const SearchResult& r);

}  // namespace napkin
