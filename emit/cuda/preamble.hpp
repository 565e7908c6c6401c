/** \file preamble.hpp
 *  The device primitives every emitted .cu file starts with: fp32 conversions, the element-wise
 *  maps, cp.async copies into SMEM with zero fill (PTX ISA 9.7.9.25), ldmatrix fragment loads
 *  (PTX ISA 9.7.14.5.15) and one mma.sync wrapper per warp-level instruction of the hardware
 *  description's [[mma]] table (PTX ISA 9.7.14.5.14, fragment layouts for m16n8k16); and, for
 *  files with wgmma variants, the Hopper primitives: mbarrier, TMA loads, wgmma descriptors,
 *  fences and waits, setmaxnreg (device code for sm_90a only), and the host's tensor-map builder.
 */
#pragma once
#include <string>
#include <vector>

#include "hardware/hardware.hpp"

namespace napkin::cuda {

/** Name of the device function wrapping `m` ("mma_m16n8k16_bf16"). */
std::string mma_function(const MmaShape& m);
/** Source text of the primitives, with an MMA wrapper for each shape in `mmas` (warp scope,
 *  m16n8k16 with fp32 accumulate; others are skipped), and the Hopper primitives if `hopper`. */
std::string preamble(const std::vector<MmaShape>& mmas, bool hopper);
/** Source of a device function issuing `m` (a warpgroup-scope row of the [[mma]] table, n
 *  replaced by `n`), D += A B, B in SMEM: `wgmma_m64n<N>k16_<dtype><TA, TB>(float (&d)[N / 2],
 *  desc_a, desc_b)` with A in SMEM, or, if `a_in_registers`, `..._rs<TB>(d, const uint32_t (&a)[4],
 *  desc_b)`. TA, TB: 1 for an M- or N-major operand (PTX ISA 9.7.15.5.1.2). `name` receives the name. */
std::string wgmma_function(const MmaShape& m, int n, bool a_in_registers, std::string& name);

}  // namespace napkin::cuda
