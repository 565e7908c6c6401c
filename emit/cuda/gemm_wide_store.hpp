/** \file gemm_wide_store.hpp
 *  The gemm strategy's interior-tile epilogue with 16-byte stores. An m16n8 accumulator fragment
 *  (PTX ISA 9.7.14.5.14, the wgmma D layout of 9.7.15.5.1.1 is the same per warp) gives lane l the
 *  pair of columns 2 (l % 4), +1 of an 8-column block: stored as they are, a warp's 4-byte stores
 *  fill each 32-byte sector half (Nsight Compute on the H100, matmul 8192x256x4096: 16.0 of 32
 *  bytes used per sector, L2 throughput 81% while DRAM ran at 19%). Here the four lanes of a quad
 *  exchange their pairs of four consecutive blocks (three shuffles), so that each lane holds 8
 *  consecutive 16-bit elements and stores them as one 16-byte vector: whole sectors, a quarter of
 *  the store instructions.
 */
#pragma once
#include <functional>
#include <set>
#include <string>

#include "emit/cuda/gemm_form.hpp"

namespace napkin::cuda {

/** The condition (a device expression; empty when the form cannot take it) under which a tile's
 *  outputs take 16-byte stores: every output 16-bit with N innermost, T_N a multiple of 32, the
 *  tile whole, N_<N> a multiple of 8, every output array 16-byte aligned. */
std::string wide_store_condition(Context& c, const KernelChoice& kc, const GemmForm& g);

/** Emits, for one 32-column group `ng` of a fragment row `row` (both defined by the caller, with
 *  `lane` and the tile origin o_<M>, o_<N>), every output's 8 consecutive 16-bit values of this
 *  lane as `uint32_t p_<o>[4]`: computed from `acc(i)` through the epilogue expressions in pairs,
 *  packed, then exchanged across the quad (napkin::quad_transpose): lane l holds columns
 *  ng * 32 + (l % 4) * 8 .. + 7. Defines i_<M>. */
void gemm_pack_group(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<std::string(std::size_t)>& acc);

/** Emits, for the 16x16 block of accumulator rows `row0` (tile-relative, a multiple of 16:
 *  defined by the caller) .. +15 and 8-column blocks `nt0`, nt0 + 1 (defined by the caller), every
 *  output's packed pairs as `uint32_t p_<o>[4]` in stmatrix order (napkin::stsm_x4, PTX ISA
 *  9.7.14.5.16): p[i] holds this lane's pair of matrix i, rows row0 + 8 (i % 2) + lane / 4, columns
 *  (nt0 + i / 2) * 8 + 2 (lane % 4), +1, computed from `acc(i)` (an expression in nt, h and q)
 *  through the epilogue expressions; no shuffles. */
void gemm_pack_matrices(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<std::string(std::size_t)>& acc);

/** Emits the interior epilogue with 16-byte stores (to be placed under wide_store_condition).
 *  `loops(body)` opens the variant's loops over (m subtile, row half) defining `row` (tile-relative)
 *  and calls `body` once per 32-column group `ng`; inside it the emitted code loops j = 0..3 over
 *  the 8-column blocks `nt = ng * 4 + j`, computes every output's pair at `col = nt * 8 + (lane % 4)
 *  * 2` from `acc(i)` (an expression in nt, q and the loop variables of `loops`), transposes the
 *  quad's pairs (napkin::quad_transpose, emit/cuda/device/reduce.cuh) and stores 8 elements per
 *  lane. Adds the outputs to `stored`. */
void gemm_wide_store_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g,
                              const std::function<void(const std::function<void()>&)>& loops,
                              const std::function<std::string(std::size_t)>& acc, std::set<std::string>& stored);

}  // namespace napkin::cuda
