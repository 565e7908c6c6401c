/** \file preamble.hpp
 *  The device primitives every emitted .cu file starts with: fp32 conversions, the element-wise
 *  maps, cp.async copies into SMEM with zero fill (PTX ISA 9.7.9.25), ldmatrix fragment loads
 *  (PTX ISA 9.7.14.5.15) and one mma.sync wrapper per warp-level instruction of the hardware
 *  description's [[mma]] table (PTX ISA 9.7.14.5.14, fragment layouts for m16n8k16).
 */
#pragma once
#include <string>
#include <vector>

#include "perfmodel/hardware.hpp"

namespace napkin::cuda {

/** Name of the device function wrapping `m` ("mma_m16n8k16_bf16"). */
std::string mma_function(const MmaShape& m);
/** Source text of the primitives, with an MMA wrapper for each shape in `mmas` (warp scope,
 *  m16n8k16 with fp32 accumulate; others are skipped). */
std::string preamble(const std::vector<MmaShape>& mmas);

}  // namespace napkin::cuda
