/** \file rows_form.hpp
 *  The rows form of a kernel and the launch shape lowering gives it: statements over the same
 *  rows that walk one axis `a`, each of them
 *  - a normaliser `Y = norm(args; a)` (softmax, layernorm, rmsnorm) of element-wise arguments,
 *  - a reduction `R = red(arg; a)` (sum, max, mean over `a`), alone or inside an element-wise map
 *    that lacks `a` (rstd = rsqrt(mean(X * X; m) + eps)), one value per row, or
 *  - an element-wise map over the row (rmsnorm's backward dX = ... - X * rstd^3 * R), which may
 *    read the kernel's reductions (their values per row, held in registers) but no other
 *    per-element output of the kernel;
 *  at least one normaliser or reduction. The reductions' and normalisers' arguments read no array
 *  the kernel writes. Every other axis is a row; a thread block takes `rows_per_block` rows and
 *  its warps form teams, each team walking one row at a time with coalesced accesses: a first walk
 *  gathers every lemma's statistics (a reduction: its value), merged across the team; the
 *  reductions' values are stored by one lane; a second walk (none where every statement is a
 *  reduction) applies the maps and stores their outputs. Fusing a reduction with the map that
 *  reads it, or a normaliser with a reduction of the same row, reads each row once from HBM
 *  instead of once per kernel (the Fusion Theorem, paper Appendix A.1; both statements are woven over
 *  the rows, and the map reads the reduction after the row's walk has completed it).
 *  A team is `team_warps` warps, or, where one warp is more than a row needs (the row's accesses
 *  fit fewer lanes), `team_lanes` lanes of one warp: a warp then walks 32 / team_lanes rows at
 *  once, so short rows (attention's D = rowsum(dO * O) over d = 128) keep every lane loading. On
 *  the vector path (the axis innermost in a 16-bit array, its extent a multiple of 8) each lane
 *  moves 8 elements per 16-byte access with `unroll` accesses in flight; otherwise one element per
 *  step. Read by the model (perfmodel/rows_cost.hpp) and rendered by emit/cuda/rows.cpp: what one
 *  prices, the other writes (the team, the unroll and the registers through __launch_bounds__).
 */
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/ir.hpp"
#include "hardware/hardware.hpp"
#include "lower/kernel_shape.hpp"
#include "lower/options.hpp"

namespace napkin {

/** One walk of a team over a row: the arrays it loads along the normalised axis. */
struct RowsWalk {
  std::vector<std::string> vector_arrays;  ///< 16-bit arrays read 8 elements per 16-byte access
  std::vector<std::string> scalar_arrays;  ///< other arrays carrying the axis: one element per access
  bool stores = false;                     ///< the walk stores Y
};

/** One statement of a rows kernel. */
struct RowsPart {
  enum class Kind { normaliser, reduction, map };
  std::string statement;
  Kind kind = Kind::normaliser;
  /** A reduction inside an element-wise map (rstd = rsqrt(mean(X * X; m) + eps)): the map is
   *  applied once per row to the reduction's value. */
  bool post = false;
  bool stored = true;         ///< written to global memory (else read only by the kernel's maps)
  bool vector_output = false; ///< a per-element output, 16-bit with the axis innermost: stored 8 elements per 16-byte access

  bool per_row() const { return kind == Kind::reduction; }
};

struct RowsForm {
  std::vector<RowsPart> parts;     ///< the statements, dataflow order
  std::string axis;                ///< the walked (normalised or reduced) axis
  AxisList rows;                   ///< the statements' other axes (each index a row), in the first statement's order
  std::int64_t extent = 0;         ///< elements along `axis`
  std::int64_t rows_total = 0;     ///< product of the row axes' sizes
  std::int64_t rows_per_block = 1; ///< the schedule's group sizes over the row axes
  std::int64_t blocks = 0;         ///< ceil(rows_total / rows_per_block)
  int warps = 4;                   ///< per thread block (the schedule's)
  int team_warps = 1;              ///< warps walking one row together: warps / rows_per_block when that divides, else 1
  /** Lanes walking one row together where team_warps is 1: the fewest (a power of two, at most
   *  32) whose accesses (8 elements each on the vector path, else 1) cover the row; else 32. */
  int team_lanes = 32;
  bool reduction = false;          ///< every part is a reduction: one walk, each value stored by the team's first lane
  std::vector<std::string> row_arrays;  ///< arrays read once per row (they lack `axis`), none written by the kernel
  int unroll = 4;                  ///< 16-byte accesses in flight per lane on the vector path
  bool vector = false;             ///< the vector path at these sizes (pointers' 16-byte alignment is checked at run time)
  RowsWalk statistics, map;        ///< the two walks
  /** Registers per thread the kernel is compiled to at most (__launch_bounds__'s minimum blocks
   *  make ptxas keep to registers_per_sm / (blocks_per_sm x threads)): 32 for indices and
   *  statistics, plus 4 per 16-byte access in flight on the vector path, for each array walked
   *  where there are more than two (ptxas on sm_90a: 48 for rmsnorm of bf16 rows, every team
   *  shape; three arrays spilled at 48 and 64, none at 80). */
  int registers = 32;
  int blocks_per_sm = 1;           ///< resident blocks per SM: the launch bounds' minimum
  /** Elements of each row (a prefix, a multiple of 8) the statistics walk keeps in SMEM for the
   *  map walk, which reads them there instead of re-reading them from L2 or HBM; 0: none. Set
   *  where the re-read would come from HBM (its bytes in flight, reread_in_flight_bytes() without
   *  staging, over what the L2 keeps for a re-read, l2_reread_capacity()) on the vector path with whole-warp teams; sized for the fewest blocks per SM
   *  whose accesses in flight cover the HBM's bandwidth-latency product (Little's law:
   *  bandwidth x loaded latency / SMs bytes per SM), the SMEM split between them. */
  std::int64_t staged = 0;
  std::vector<std::string> staged_arrays;  ///< the reread_arrays() both walks load by 16-byte vectors, staged (sorted)
  /** SMEM bytes: the cross-warp merge (WARPS x 3 floats) and each team's staged prefix of every
   *  staged array (teams_per_block x staged x 2 bytes per array). */
  std::int64_t smem_bytes = 0;

  int threads() const { return warps * 32; }
  int teams_per_block() const { return warps / team_warps * (32 / team_lanes); }
  int walks() const { return reduction ? 1 : 2; }
  /** The part that writes `name`, or nullptr. */
  const RowsPart* part(const std::string& name) const;
  bool any_vector_output() const;
  /** Elements a team moves per round of one walk (one access per lane in flight, or `unroll`). */
  std::int64_t elements_per_round() const { return std::int64_t{team_warps} * team_lanes * (vector ? 8 * unroll : 1); }
  /** Dependent rounds of loads a team needs for one walk over a row. */
  std::int64_t rounds_per_walk() const { return (extent + elements_per_round() - 1) / elements_per_round(); }
  /** Rounds of loads from L2 or HBM of the map walk: those past the staged prefix (the staged
   *  elements come from SMEM). */
  std::int64_t map_rounds() const { return (extent - staged + elements_per_round() - 1) / elements_per_round(); }
  /** SMEM bytes of one team's staged rows. */
  std::int64_t staged_bytes_per_team() const { return staged * 2 * static_cast<std::int64_t>(staged_arrays.size()); }
};

/** Bytes of array `array` of `d` at `sizes` in its storage dtype under `opt`. Raises nothing
 *  (the array must exist). */
double stored_array_bytes(const Diagram& d, const std::string& array, const SizeMap& sizes, const ModelOptions& opt);

/** Whether array `a` of `d` carries one of `form`'s row axes (each row has its own elements), as
 *  X[t, m] does and a weight W[m] every row shares does not. Raises nothing (`a` must exist). */
bool per_row_array(const RowsForm& form, const Diagram& d, const std::string& a);

/** The arrays the map walk re-reads from global memory: those both walks load that carry a row
 *  axis (not a weight W[m] every row shares), sorted. None for a reduction (one walk). The
 *  emitter loads them with the L2 policy evict_last in the statistics walk and evict_first in the
 *  map walk; every other per-row load and every per-element store is evict_first
 *  (emit/cuda/rows.cpp). Raises nothing. */
std::vector<std::string> reread_arrays(const RowsForm& form, const Diagram& d);

/** The share of array `a`'s elements in each row that the map walk reads from SMEM (the staged
 *  prefix, RowsForm::staged): staged / extent for a staged array, else 0. */
double staged_share(const RowsForm& form, const std::string& a);

/** The bytes the map walk re-reads from global memory over the whole kernel: every row of the
 *  reread_arrays() past the staged prefix. Raises nothing. */
double reread_bytes(const RowsForm& form, const Diagram& d, const SizeMap& sizes, const ModelOptions& opt);

/** The bytes the map walk will re-read from global memory that are in flight at once: resident
 *  teams (`resident_teams`, over the GPU) times the bytes of each row of the reread_arrays() past
 *  the staged prefix. perfmodel/rows_cost.hpp compares it with l2_reread_capacity(). */
double reread_in_flight_bytes(const RowsForm& form, double resident_teams, const Diagram& d, const SizeMap& sizes, const ModelOptions& opt);

/** Bytes of evict_last lines the L2 of `hw` keeps for a re-read (Hardware::l2_reread_capacity_bytes,
 *  else the L2's capacity). */
double l2_reread_capacity(const Hardware& hw);

/** Teams of `form` resident over `hw`'s SMs at `blocks_per_sm` blocks per SM (fewer where the
 *  grid does not fill them; at least 1). */
double resident_teams(const RowsForm& form, int blocks_per_sm, const Hardware& hw);

/** The rows form of `k` (statements of `d` as the file comment lists them) at `sizes` on `hw`, or
 *  nullopt with the reason in `why`. Raises nothing. */
std::optional<RowsForm> analyse_rows(const Diagram& d, const KernelShape& k, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                     std::string& why);

/** The node of `st`'s expression the rows form is built on: the expression itself where it is a
 *  normaliser (softmax, layernorm, rmsnorm) or a sum, max or mean over one axis; else, where the
 *  expression is element-wise around exactly one such reduction and nothing outside it carries
 *  the reduced axis, that reduction; else nullptr. Raises nothing. */
const Expr* rows_core(const Diagram& d, const Statement& st);

/** Resident blocks per SM of a form's launch (rows, cols): at least 1, at most what the
 *  hardware's block, warp, register (`registers` per thread, allocated in units of 8) and SMEM
 *  (`smem_bytes` + 1 KB reserved per block) limits allow for `warps` warps per block. */
int resident_blocks_per_sm(const Hardware& hw, int warps, int registers, std::int64_t smem_bytes);

/** Whether `e` is built only of element-wise operations, array references, numbers and masks. */
bool elementwise_tree(const Expr& e);

/** Whether `e` is a sum, max or mean over exactly one axis (the reductions the rows form walks). */
bool is_one_axis_reduction(const Expr& e);

}  // namespace napkin
