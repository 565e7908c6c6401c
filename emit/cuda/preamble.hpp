/** \file preamble.hpp
 *  The device code every emitted .cu file starts with: the device tile library, the .cuh headers
 *  of emit/cuda/device (numeric conversions and maps, warp reductions, cp.async movers, tiles with
 *  zero fill, ldmatrix fragments, the stage ring; for files with wgmma variants also the Hopper
 *  headers: mbarriers and clusters, TMA and the host's tensor-map builder, wgmma descriptors and
 *  fences), embedded in the binary by CMake (emit/CMakeLists.txt); then one mma.sync wrapper per
 *  warp-level instruction of the hardware description's [[mma]] table (PTX ISA 9.7.14.5.14).
 *  tests/gpu/tiles_test.cu checks the library on the GPU.
 */
#pragma once
#include <string>
#include <vector>

#include "hardware/hardware.hpp"

namespace napkin::cuda {

/** Name of the device function wrapping `m` ("mma_m16n8k16_bf16"). */
std::string mma_function(const MmaShape& m);
/** Source of one mma.sync wrapper per shape in `mmas` (warp scope, m16n8k16 of 16-bit floats with
 *  fp32 accumulate, `c` float[4]; if `int8`, also m16n8k32 of int8 with int32 accumulate, `c`
 *  int32_t[4]; if `fp8`, also m16n8k32 of 8-bit floats with fp32 accumulate, whose body is compiled
 *  for sm_89 and later only (PTX ISA 9.7.14.5.14; before, it traps): 32 bytes of K per row each;
 *  others are skipped), named by mma_function, in namespace napkin. */
std::string mma_atoms(const std::vector<MmaShape>& mmas, bool int8 = false, bool fp8 = false);
/** Source text of the device library (the .cuh headers of emit/cuda/device: frag8.cuh and fp8.cuh
 *  too if `fp8`, frag8.cuh and int8.cuh too if `int8`, the Hopper headers too if `hopper`), then
 *  mma_atoms(mmas, int8, fp8). */
std::string preamble(const std::vector<MmaShape>& mmas, bool hopper, bool fp8 = false, bool int8 = false);
/** Source of a device function issuing `m` (a warpgroup-scope row of the [[mma]] table, n
 *  replaced by `n`), D += A B, B in SMEM: `wgmma_m64n<N>k<K>_<dtype><TA, TB>(float (&d)[N / 2],
 *  desc_a, desc_b)` with A in SMEM, or, if `a_in_registers`, `..._rs<TB>(d, const uint32_t (&a)[4],
 *  desc_b)`. TA, TB: 1 for an M- or N-major operand (PTX ISA 9.7.15.5.1.2); 8-bit types (k32) take
 *  K-major operands only (TA = TB = 0, a static_assert) and no register A. `name` receives the name. */
std::string wgmma_function(const MmaShape& m, int n, bool a_in_registers, std::string& name);

}  // namespace napkin::cuda
