/** \file candidates.hpp
 *  Schedules near a derived one, ranked by the model: what `napkin bench --candidates N` measures
 *  to test the model's ranking where it matters, between its first choice and the schedules it
 *  ranks just behind (issue 14: the first choice within 3% of the fastest of at least 10).
 *
 *  Neighbours of a schedule, one move in one kernel: a grouped axis's size doubled or halved, a
 *  streamed axis's chunk doubled or halved, 4 warps for 8 or 8 for 4, on 8 warps pingpong put
 *  in or taken out (GemmForm::pingpong; dropped where no gemm on wgmma takes it), a cluster
 *  taken out, or one
 *  of 2 blocks added along the kernel's first axis grouped by more than 1. Two rounds of moves from
 *  the start (neighbours of neighbours); each is checked as a hand-written schedule
 *  (check_schedule: legality, the hardware's limits) and the illegal ones dropped. The start and
 *  the legal neighbours, distinct by their printed text, are ranked by predicted time.
 */
#pragma once
#include <cstddef>
#include <vector>

#include "derive/search.hpp"

namespace napkin {

/** The `n` (>= 1) best-predicted schedules among `start` (a checked schedule of `d`) and its
 *  neighbours (above), at `sizes` on `hw`, fastest first. Raises UserError where `start` does not
 *  check. */
std::vector<SearchResult> candidate_schedules(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                                              const Schedule& start, std::size_t n, const ModelOptions& opt = {});

}  // namespace napkin
