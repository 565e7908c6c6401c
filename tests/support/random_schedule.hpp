/** \file random_schedule.hpp
 *  A generator of random hand-written schedules for a verified diagram, for the soundness fuzzer
 *  (tests/soundness): the statements, in item (dataflow) order, cut into kernels at random
 *  contiguous points (sometimes one kernel for all), and per kernel random directives drawn from
 *  the axes its statements touch: `weave a`, `group a by g` (sizes that do and do not divide the
 *  axis), `stream a by s` (one axis, sometimes two or three nested), `stream a by s twice`,
 *  `warps w`, and now and then a directive on an axis the kernel does not touch or a kernel
 *  holding a call beside other statements. Most are illegal; the checker must refuse those with
 *  a located error. The same seed and diagram give the same text.
 */
#pragma once
#include <cstdint>
#include <string>

#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"

namespace napkin::test {

/** Text of a random schedule named `s<seed>` for diagram `d` of `p` (verified), at `sizes`
 *  (every axis of d resolved), in the syntax of diagrams/schedule.hpp. */
std::string random_schedule(std::uint64_t seed, const Program& p, const Diagram& d, const SizeMap& sizes);

}  // namespace napkin::test
