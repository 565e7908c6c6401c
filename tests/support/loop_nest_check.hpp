/** \file loop_nest_check.hpp
 *  The files and comparison behind the loop-nest property test (tests/emit/cpu_loop_nest_test.cpp)
 *  and the soundness fuzzer (tests/soundness): emitted CPU loop nests (emit/cpu_emitter.hpp,
 *  entry points `napkin_c<i>_run`) are compiled together with one driver that runs case i on
 *  dir/in<i>.bin and writes dir/out<i>.bin; their outputs are compared with the fp64 evaluator.
 *  File format: a sequence of fp64 vectors, each an int64 count then the values.
 *  in<i>.bin: the axis sizes (declaration order), each input (declaration order), the output sizes.
 *  out<i>.bin: each output, in declaration order.
 */
#pragma once
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "diagrams/eval.hpp"

namespace napkin::test {

/** Writes dir/in<i>.bin for diagram `d` at `sizes` with `inputs`; `expected` (the evaluator's
 *  outputs) gives the output sizes. */
void write_case_inputs(const std::filesystem::path& dir, std::size_t i, const Diagram& d, const SizeMap& sizes,
                       const std::map<std::string, Tensor>& inputs, const std::map<std::string, Tensor>& expected);

/** Writes dir/driver.cpp, the main() of cases 0..n-1: `runner DIR` runs them all in order,
 *  `runner DIR I` case I alone (to find the case that crashed a run). Exit 2 on a missing input. */
void write_driver(const std::filesystem::path& dir, std::size_t n);
/** The same for the cases numbered `ids` (those whose loop nests compiled). */
void write_driver(const std::filesystem::path& dir, const std::vector<std::size_t>& ids);

/** max |a - b| / max(max |b|, 1e-3) over finite entries; non-finite entries must agree exactly
 *  (else INFINITY with `why` set). The floor: an output that cancels to about 0 (the sum of a
 *  layernorm along its axis) is compared absolutely (1e-12 at the 1e-9 bound), as its rounding
 *  noise is that of the O(1) terms. */
double relative_error(const std::vector<double>& got, const std::vector<double>& want, std::string& why);

/** The vectors of an out<i>.bin file (empty when it is missing). */
std::vector<std::vector<double>> read_outputs(const std::filesystem::path& file);

}  // namespace napkin::test
