/** \file bench_candidates.hpp
 *  `napkin bench --candidates N`: the derived schedule and the schedules the model ranks just
 *  behind it (derive/candidates.hpp), each built, checked and timed on this GPU (kernels/bench.hpp
 *  measure_bench), printed with predicted beside measured: whether the model's first choice is the
 *  fastest measured, and by how much it is not (issue 14's goal: within 3% among at least 10).
 */
#pragma once
#include <cstddef>

#include "kernels/bench.hpp"

namespace napkin::cli {

/** Benches the `n` (>= 2) best-predicted schedules near the derived schedule of `d` at `sizes`
 *  on `hw`, each in its own folder under opt.workdir (default napkin-bench-<diagram>-candidates);
 *  prints the table (text, or JSON with opt.json: keys `diagram`, `device`, `candidates` (each
 *  `rank`, `schedule`, `predicted_s`, `measured_s`, `pass`, `max_rel_err`, `error`, `sm_clock_mhz`: the median
 *  SM clock of its timing rounds, MHz, 0 when not reported),
 *  `first_choice_s`, `fastest_s`, `fastest_rank`, `first_choice_slower_by`, `spearman`).
 *  Where derive rewrote the diagram before its search (Derivation::rewritten), the candidates are
 *  schedules of that rewrite. Returns 0 when every candidate built and checked, 1 otherwise.
 *  Raises UserError where nothing can be built or no GPU answers. */
int bench_candidates(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const BenchOptions& opt, std::size_t n);

}  // namespace napkin::cli
