/** \file render.hpp
 *  The steps the CUDA renderers of a kernel spec (emit/cuda/gemm.cpp, flash.cpp, rows.cpp) share,
 *  one file per concern, each written once for every strategy and path (atom and mover:
 *  KernelSpec::path) that needs it; a renderer is one sequence over its spec's paths that calls
 *  them:
 *  - render_grid.cpp: the grid decode (block index -> tile origins, batch indices, valid extents)
 *    and the chunks of the streamed axis a block walks;
 *  - render_lemma.cpp: each normaliser lemma's state, init, update and finalise arithmetic (the
 *    flash form's online softmax in either fragment layout, the rows kernels' statistics);
 *  - render_score.cpp: the flash form's score chain (S's contraction through the element-wise
 *    score maps to P's argument) as values at one element of the score tile, and the loops over
 *    the score tile in each atom's fragment layout with the lemma's update;
 *  - render_mma.cpp: the MMA atoms (mma.sync: fragments by ldmatrix, flash's P repacked from S;
 *    wgmma: operands in SMEM by descriptor, flash's P from registers, pipelined issue), the
 *    accumulators in each atom's layout;
 *  - render_staging.cpp: operand tiles from global memory into SMEM by cp.async (tile origins,
 *    loaders into a ring of stages, the wait for a stage), and flash's TMA producer;
 *  - render_tma.cpp: the gemm's TMA staging (stage layout and boxes, cluster multicast, the
 *    full/empty mbarrier ring, the producer warpgroup);
 *  - render_epilogue.cpp: the output tile from the accumulators (the lemma's finalise, the stored
 *    statements' element-wise epilogue, the loops over each atom's fragments), stored within the
 *    arrays' extents;
 *  - render_store.cpp: the gemm's wide stores of interior tiles (16-byte vectors after a quad
 *    transpose; stmatrix into SMEM and a TMA store);
 *  - render_launch.cpp: the host launcher (block counts, launch checks; the sm_90a variants'
 *    tensor maps and run-time choice: tma_launch and add_hopper_variant, declared in
 *    strategies.hpp).
 *  Every step appends device code to a Code at its current indentation, in the conventions of
 *  context.hpp (`i_<axis>`, `N_<axis>`, `a.<array>`); none declines what lowering accepted.
 */
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "emit/cuda/strategies.hpp"
#include "lower/flash_form.hpp"
#include "lower/gemm_form.hpp"
#include "lower/lower.hpp"

namespace napkin::cuda {

// ---- grid decode (render_grid.cpp) ----

/** Emits the gemm grid decode shared by both variants: `o_<M>`, `o_<N>` (tile origins,
 *  L2-rasterised in groups of 8 M tiles), the batch indices `i_<b>`, `n_M`, `n_N` (valid rows and
 *  columns; <= 0 for a block of a cluster past the last tile). With `cluster` > 1, consecutive
 *  blocks (one cluster) take consecutive tiles along `cluster_axis` (M or N) and the same tile
 *  along the other: the grid then has that axis's tile count rounded up to whole clusters.
 *  `block`: the linear block index to decode (a persistent kernel's virtual block). A banded
 *  GEMM in band order (GemmForm::band_order) decodes the band axis's tiles slowest by rank
 *  instead. Needs the constants T_M, T_N (and CLUSTER) in scope. */
void gemm_tile_origin(Code& code, const GemmForm& g, int cluster = 1, const std::string& cluster_axis = "", const std::string& block = "blockIdx.x");
/** With a zero band (GemmForm::k_band), the tile's chunks of K: `k_first` and `chunks` (the
 *  walk's chunk kc is chunk k_first + kc of K), from o_M/n_M (or o_N/n_N); lowering's
 *  gemm_k_chunks computes the same range. Called by gemm_tile_origin. */
void gemm_band_chunks(Code& code, const GemmForm& g);

/** Emits `tile_blocks`, the gemm's output tiles (the grid a non-persistent kernel would have:
 *  tiles of M x tiles of N, the cluster's axis rounded up to whole clusters, x the batch axes). */
void gemm_tile_count(Code& code, const GemmForm& g, const std::string& cluster_axis);
/** Opens the persistent walk over output tiles (virtual block `vb` from blockIdx.x, gridDim.x
 *  apart, below tile_blocks; in band order the odd rounds mirrored, GemmForm::band_order) and
 *  decodes each tile's origin (gemm_tile_origin). With `pingpong_consumer` (GemmForm::pingpong, a
 *  consumer's walk) it counts the tiles in `turn`: consumer `cw` takes the turns t with
 *  t % CONSUMERS == cw and passes the others' chunks in its ring count `it`. The caller closes it. */
void gemm_tile_walk(Code& code, const GemmForm& g, int cluster, const std::string& cluster_axis, bool pingpong_consumer = false);

/** Emits the flash grid decode from blockIdx.x: `tiles_q`, `o_<M>` (the q tile's origin), the
 *  batch indices `i_<b>` and `n_q` (the tile's valid rows, >= 1). Without a causal skip the q
 *  tiles vary fastest, so that consecutive blocks share K and V in L2; under one, the batch
 *  slices vary fastest and the tiles come longest first (FlashForm::tile_chunks, the order the
 *  model replays), so that no long block starts last. Needs T_Q in scope. */
void flash_tile_origin(Code& k, const FlashForm& f);

/** Emits `chunks`, the chunks of x (T_X keys each) a flash block walks: all of them, or with the
 *  causal skip (f.skip) those up to the chunk of the tile's last row (later ones are fully
 *  masked). Needs o_<M>, n_q and T_X in scope. */
void flash_chunks(Code& k, const FlashForm& f);

// ---- normaliser lemmas (render_lemma.cpp) ----

/** The flash form's normaliser lemma in one fragment layout of the score tile: the online
 *  softmax (paper §3; Milakov & Gimelshein 2018: running max m and sum l per row, O and l rescaled
 *  by corr = exp(m_old - m_new) when the max grows, P = exp(S - m) unnormalised, O / l at the end;
 *  exponentials as napkin::exp2_ftz of values scaled by LOG2E), or none (f.normaliser_lemma empty: P is the
 *  score, O a plain sum over x, and every step below emits nothing). A thread holds two rows of
 *  each m16 tile of S: h = 0, 1, rows lane/4 and lane/4 + 8; the chunk's row maxima are `mx[2]`. */
struct FlashLemma {
  /** `per_tile`: the state is kept per m16 tile of the warp (`m_reg[mt]`, mma.sync: MT tiles per
   *  warp) rather than once (`m_reg`, a wgmma consumer's warp holds one). `s`: the score element
   *  at (nt, e), e.g. "S_reg[mt][nt][e]". `o_rescale`: the statement rescaling O's elements by the
   *  correction; with `defer_o`, update() leaves `corr[2]` (per h) for rescale_o(), which the
   *  caller emits once O may change (after its wgmma), else update() rescales row h of O by the
   *  scalar `corr` itself. `scale`: the folded softmax scale (flash_scale_value; empty where none):
   *  the scores are then B, the max is kept in B's units and P = exp2(B * score_log2 - m * score_log2);
   *  where its sign is known only at run time (f.scale_sign_at_run_time), the max is kept over
   *  -B when `score_neg` and P = exp2(B * score_log2 - m * max_log2), max_log2 = |score_log2|.
   *  With `defer_o` the rescaling is lazy: the reference max m_reg (the m of P = exp(S - m)) moves,
   *  and l and O are rescaled, only where a row's max passes it by more than kLazyRescaleLog2 in the
   *  exponent; meanwhile P <= 2^kLazyRescaleLog2. O / l is the same for any reference (the online
   *  softmax lemma holds for every m, the max only bounds P); where the form stores row statistics
   *  the true max is kept beside it (`m_max`) and l is brought to it at the end. O's rescale runs
   *  under a warp vote, skipped where every correction of the warp is 1. */
  FlashLemma(const FlashForm& f, bool per_tile, std::string s, std::string o_rescale, bool defer_o, std::string scale = "");

  /** Which side of the scores the running max is kept over: `as_scale` (B, or where the scale's
   *  sign is known only at run time a select on `score_neg`), `positive` (B), `negative` (-B). */
  enum class Side { as_scale, positive, negative };

  bool softmax() const { return softmax_; }
  /** Whether the element loops are rendered once per side of a folded scale whose sign is known
   *  only at run time (`if (!score_neg) positive else negative`), so that the max costs no select. */
  bool sides_at_run_time() const { return softmax_ && signed_; }
  /** The constants the lemma's arithmetic uses (LOG2E), at namespace scope. */
  void constants(Code& k) const;
  /** Declares and initialises the running state (m = -inf, l = 0), and the folded scale's
   *  `score_scale` and `score_log2` where there is one. */
  void init(Code& k) const;
  /** Before a chunk's elements: `mx` starts at the running max. */
  void chunk_begin(Code& k) const;
  /** The value of a key past the end or masked out: -INFINITY (P = 0 after the update; +INFINITY
   *  on the negative side of a scale, whose product with it is -inf), or 0.0f without a normaliser. */
  std::string fill(Side side = Side::as_scale) const;
  /** After each element's score is stored at `s`: folds it (or its negation, `side`) into the
   *  chunk's row max. */
  void element(Code& k, Side side = Side::as_scale) const;
  /** After the chunk's elements: the new running max (quad-reduced), l (and O, unless deferred)
   *  rescaled, S turned into P = exp(S - m) in place, and P added to l. `P` names the statement. */
  void update(Code& k, const std::string& P) const;
  /** The deferred rescaling of O by corr[2] (with `defer_o`), every chunk. */
  void rescale_o(Code& k) const;
  /** The end of the stream: `inv_l[2]` = 1 / l (quad-reduced; 0 for an empty row). */
  void finalise(Code& k) const;
  /** The normalised contraction's element: `acc` (an element of O in row `h`) times inv_l[h]. */
  std::string result(const std::string& acc, const std::string& h) const;
  /** What finalise makes of O, for a comment: "O / l (normalised contraction)", "O (a plain sum over x)". */
  std::string finalise_note() const;
  /** After finalise, row h's statistic `which` (lower/flash_form.hpp flash_statistic): 'm' the
   *  running max (times the folded scale: the softmax argument's max), 'l' the row's whole sum of exp(S - m) (NaN where m is -inf: exp(-inf - -inf),
   *  as the fp64 evaluator has it). */
  std::string statistic(char which, const std::string& h) const;

 private:
  bool softmax_, defer_o_, signed_, lazy_, stats_;
  std::string x_, m_, l_, s_, o_rescale_, scale_;
  /** update() with lazy rescaling (see the constructor). */
  void update_lazy(Code& k, const std::string& P) const;
  /** The end of update(): S turned into P = exp2(S * exp_factor() - m * max_factor()) in place
   *  with m the row max held in `m` (`mx`, or the reference `m_reg`; 0 where -inf), and P added to l. */
  void exponentials(Code& k, const std::string& m) const;
  /** The exponent's factor on a score: LOG2E, or score_log2 with a folded scale. */
  std::string exp_factor() const { return scale_.empty() ? "LOG2E" : "score_log2"; }
  /** The exponent's factor on the running max: exp_factor(), or max_log2 = |score_log2| where the
   *  scale's sign is known only at run time. */
  std::string max_factor() const { return signed_ ? "max_log2" : exp_factor(); }
};

/** A rows kernel's normaliser lemma: the statistics each thread keeps over its elements of a row
 *  and their merge across the warp (shuffles) and the team (SMEM `stats_smem[WARPS][3]`). softmax: the
 *  online max and sum (paper §4, one pass); layernorm: count, sum and sum of squares of v - shift,
 *  shifted by the row's first element (shifted-data variance: no division per element, no
 *  cancellation when the mean is large); rmsnorm: count and sum of squares. Merged by plain
 *  addition (the max-rescaled sum for softmax). */
struct RowsLemma {
  /** `e`: the normaliser (softmax, layernorm or rmsnorm) or the reduction (sum, max, mean) along
   *  `e.axes[0]`; `tag` is appended to every name the lemma declares (its statistics, `v`, `w`,
   *  `bias`), so that several lemmas share one kernel (empty where the kernel has one). */
  RowsLemma(Context& c, const Expr& e, std::string tag = "");
  /** `name` with the lemma's tag: the variable the kernel declares for it. */
  std::string var(const std::string& name) const { return name + tag_; }
  /** Whether `e` is a reduction: one walk, and map() is its value (no `v`). */
  bool reduction() const;
  /** Declares the statistics (layernorm: and the shift, the row's first element). */
  void init(Code& k) const;
  /** Per element of the first walk, with its argument in `var("v")`. */
  void update(Code& k) const;
  /** Per 16-byte access of the first walk (the vector path), with the argument's 8 values in
   *  `var("vg")[0..7]`. Softmax takes the 8 values' max first and rescales the sum at most once
   *  (paper §4's online softmax over a block of 8: l = l 2^((m - m') log2 e) + sum_j
   *  2^(v_j log2 e - m' log2 e), each term one FFMA and one ex2); every other lemma runs update()
   *  per value. */
  void update_group(Code& k) const;
  /** Reduces the statistics over the team's TEAM_LANES lanes, then over its TEAM_WARPS warps. */
  void merge(Code& k) const;
  /** From the statistics to what the map needs (softmax: mlog = m log2 e + log2 l, NaN for a row
   *  masked throughout; the norms: mean and inv). */
  void finalise(Code& k) const;
  /** The output element, from `v`, `w` and `bias` (the normaliser's arguments in order); a
   *  reduction's value. */
  std::string map() const;

 private:
  Context& c_;
  const Expr& e_;
  std::string tag_;
};

/** The flash lemma in the fragment layout of path `p`'s atom (render_mma.cpp): mma.sync, the
 *  state per m16 tile of the warp and O (`O_reg[MT][D_V / 8][4]`) rescaled with l; wgmma, the state
 *  once per warp and O (`O_reg[D_V / 2]`) rescaled after its wgmma (deferred). */
FlashLemma flash_lemma(Context& c, const FlashForm& f, const KernelPath& p);

// ---- the flash form's score chain (render_score.cpp) ----

/** The score map of a flash form (f.score, with the chain's statements f.inlined expanded in
 *  place) as fp32 expressions at one element of the score tile (indices i_<M>, i_<x>), in the
 *  forms the renderers choose between at run time. */
struct ScoreChain {
  std::string value;     ///< arrays the map reads (masks, biases: not staged in tiles) read unbounded
  std::string bounded;   ///< those arrays read against the extents of M and x (the tile's edge)
  std::string interior;  ///< through the `interior` override (value where there is none)
  bool reads_rows = false;  ///< the map reads an array along M (rows past N_M need a bound too)
};

/** The score chain with `over` rendering the contraction (f.cs: the accumulator element) and
 *  anything else the variant renders itself; `interior`, where given, the override of an
 *  interior chunk (e.g. a causal mask dropped). */
ScoreChain score_chain(Context& c, const FlashForm& f, const NodeOverride& over, const NodeOverride& interior = {});

/** The folded softmax scale of `f` (lower/flash_scale.hpp) as an fp32 expression (1 / c where the
 *  score divides by c); empty where nothing is folded. */
std::string flash_scale_value(Context& c, const FlashForm& f);

/** Emits the comment stating what the score loop computes: P's argument (masked keys past N_x)
 *  under a softmax, P itself (P = 0 past N_x) without a normaliser. */
void score_comment(Code& k, const FlashForm& f);

/** Emits, per chunk kc after S = Q K^T in mma.sync fragments (`S_reg[MT][T_X / 8][4]`): per m16 tile
 *  of the warp, the score chain element by element (the arrays it reads bounded at the tile's
 *  edge, unbounded in an interior chunk of a full tile), keys past N_x given the lemma's fill,
 *  then the lemma's update. */
void flash_scores_fragments(Code& k, Context& c, const FlashForm& f, const FlashLemma& lemma);

/** The scores of a consumer warpgroup on wgmma (S in `S_reg[T_X / 2]`, m16n8 tiles per warp), with
 *  32-bit offsets inside the tile: c_rel (column of the chunk) and r_rel (row of the warpgroup's
 *  64). A causal(M, x) mask is x <= M, that is c_rel - r_rel <= diag with diag = o_M + cw * 64 -
 *  kc * T_X (clamped per chunk); in an interior chunk (every key valid, every column at or left of
 *  every row's diagonal) the mask is dropped. Arrays the score map reads (masks, biases) are read
 *  against their extents at the edge, unbounded in an interior chunk whose warpgroup rows and keys
 *  are all in range. */
class WarpgroupScores {
 public:
  /** The score chain of `f` in the three forms (computed once, rendered per chunk). */
  WarpgroupScores(Context& c, const FlashForm& f);
  /** Emits one chunk's scores (an interior chunk without bounds or mask where the map has any),
   *  each folded into the lemma's chunk max, then the lemma's update. Needs kc, cw, warp, lane. */
  void render(Code& k, const FlashLemma& lemma) const;

 private:
  /** The loops over the thread's elements of S: `value`, keys past the chunk's end (`masked`) set
   *  to the lemma's fill, the max kept on `side`. */
  void elements(Code& k, const FlashLemma& lemma, const std::string& value, bool masked, FlashLemma::Side side) const;
  const FlashForm& f_;
  ScoreChain chain_;
  bool causal_ = false;
};

// ---- MMA atoms of the flash renderer (render_mma.cpp) ----

/** Emits `Q_reg[MT][D_K / 16][4]`: this warp's rows of Q's tile (SMEM, pitch P_Q) as mma.sync A
 *  fragments, loaded once by ldmatrix. */
void mma_sync_q_fragments(Code& k);
/** Emits `S_reg[MT][T_X / 8][4]` = Q K^T for chunk kc on atom `mma` (warp scope), K's fragments from
 *  `K_smem` (pitch P_K). */
void mma_sync_scores(Code& k, const MmaShape& mma);
/** Emits O += P V on atom `mma`: P's accumulator layout (in `s`) is the A fragment layout of the
 *  next mma (FlashAttention-2), packed to 16 bits; V's fragments from `V_smem`, transposed by ldmatrix. */
void mma_sync_pv(Code& k, const MmaShape& mma);

/** Emits the gemm's fp32 (int8: int32) accumulators `acc<i>`, one per contraction, in the layout
 *  of path `p`'s atom: mma.sync `[MT][NT][4]` per warp; wgmma `[MS][T_N / 2]` per consumer
 *  warpgroup, or with `joint_first` >= 0 (gemm_tma_stage) one `acc0[MS][T_N]` for both. */
void gemm_accumulators_declare(Code& code, const GemmForm& g, const KernelPath& p, int joint_first);
/** Emits one chunk's MMAs on the mma.sync atom `mma`: per k step, each operand's fragments from
 *  SMEM stage `s` by ldmatrix (.trans for M- or N-major tiles; 8-bit fragments for int8), then
 *  every m16n8 tile of the warp. */
void gemm_mma_sync_step(Code& code, const GemmForm& g, const MmaShape& mma);
/** Emits the register fences of the wgmma accumulators (wgmma.fence's contract). */
void gemm_wgmma_fence(Code& code, std::size_t accumulators);
/** The Ns of the wgmmas the gemm renderer issues side by side per m64 subtile and contraction:
 *  {2 T_N} for a dual GEMM multiplied at once (`joint_first` >= 0), else lower/gemm_form.hpp
 *  gemm_wgmma_atoms. Each distinct N is one wrapper (preamble.hpp wgmma_function). */
std::vector<std::int64_t> gemm_issue_atoms(const GemmForm& g, int joint_first);
/** Emits one chunk's MMAs on the wgmma atom `mma` (functions `wg_names` by N, preamble.hpp
 *  wgmma_function; gemm_issue_atoms) from SMEM stage `st`: descriptors of the 128-byte swizzled
 *  tiles per k step, the atoms per m64 subtile and contraction (both B tiles at once with
 *  `joint_first` >= 0), committed, then the wait that leaves this chunk's group in flight. */
void gemm_wgmma_issue(Code& code, const GemmForm& g, const MmaShape& mma, int joint_first, const std::map<std::int64_t, std::string>& wg_names);

/** The wgmma atoms of a consumer warpgroup (warpgroup scope): S = Q K^T (m64n<T_X>k<K>, Q and K in
 *  SMEM, 128-byte swizzled) and O += P V (m64n<D_V>k<K>, P from registers `P_reg`; V N-major in SMEM
 *  for 16-bit operands, K-major (x innermost) for 8-bit ones). K: the atom's k (16; 32 for 8 bits). */
struct WgmmaAtoms {
  WgmmaAtoms(const MmaShape& mma, const FlashForm& f);
  std::string functions;       ///< the two wrappers' source, emitted in namespace wg
  std::string s_name, o_name;  ///< their names
  int k_step;                  ///< the atom's k (elements per instruction along the contracted axis)
  std::int64_t row, esize;     ///< elements per 128-byte swizzle row; bytes per element
  bool v_x_inner, fp8;         ///< V read K-major (FlashForm::v_x_inner); 8-bit operands
  /** Emits the chunk's issue: wait for K's stage (and, after the first chunk, the previous V's),
   *  S = Q K^T and the previous chunk's O += P V in this warpgroup's turn, wait for S and free
   *  K's stage. Declares `s`, `sp` (stages) and `S_reg`. */
  void issue(Code& k, bool first) const;
  /** Emits O += P V from ring stage `stage` (a device expression) and commits the group. */
  void pv(Code& k, const std::string& stage) const;
  /** Emits P (`S_reg`) packed to 16 bits (8 bits: rounded and exchanged in the quad, fp8.cuh
   *  acc_to_a_fp8) into `P_reg`, the next O += P V's A operand. */
  void pack_p(Code& k) const;
};

// ---- operand staging (render_staging.cpp) ----

/** Emits, per operand tile of the gemm form, `g_<A>` (the tile's origin: o_<M>, o_<N>, the batch
 *  indices; 0 along the contracted axes), `rs_<A>` (elements between its rows) and `vec_<A>`
 *  (whether 16-byte cp.async is aligned, the outer contracted axes' offsets included). */
void gemm_operand_origins(Code& code, Context& c, const GemmForm& g);
/** Emits `load_chunk(stage, o_k)` (with outer axes: `load_chunk(stage, kc)`), which
 *  issues the cp.async of every operand's chunk into SMEM stage `stage`, bounded by n_M, n_N and
 *  n_K. Needs the tile constants (T_*, P_*, OFF_*, STAGE_ELEMS) and gemm_operand_origins. */
void gemm_chunk_loader(Code& code, Context& c, const GemmForm& g);
/** Emits `chunks` (with several contracted axes: `k_chunks` per index of the outer axes, times
 *  their extents). */
void gemm_chunk_count(Code& code, const GemmForm& g);
/** Emits the cp.async prologue: the first STAGES - 1 chunks in flight. Needs gemm_chunk_loader. */
void gemm_cp_async_prologue(Code& code, const GemmForm& g);
/** Emits, at the top of chunk kc: wait for its stage, start chunk kc + STAGES - 1, `s` (the stage). */
void gemm_cp_async_stage(Code& code, const GemmForm& g);
/** Emits the flash form's cp.async operands: `Q_gmem` (the q tile's origin), `K_gmem`, `V_gmem` (x = 0),
 *  their row strides rs_Q, rs_K, rs_V and `vec` (whether every row and pointer allows 16-byte
 *  copies). */
void flash_cp_async_operands(Code& k, Context& c, const FlashForm& f);
/** Emits `load_k(kc)` and `load_v(kc)`: chunk kc of K and V into its half of the double buffer
 *  (rows past N_x zero-filled). Needs flash_cp_async_operands. */
void flash_cp_async_loaders(Code& k, const FlashForm& f);
/** Emits the cp.async prologue: Q's tile and the first K chunk (one cp.async group), the first V
 *  chunk (another), waited for Q and K. Needs flash_cp_async_loaders. */
void flash_cp_async_prologue(Code& k);
/** Emits, at the top of chunk kc: wait for K's buffer, start the next K into the other one, `K_smem`. */
void flash_cp_async_k_stage(Code& k);
/** Emits, after the scores of chunk kc: wait for V's buffer, `V_smem`. */
void flash_cp_async_v_stage(Code& k);
/** Emits, at the end of chunk kc: start the next V into the other buffer. */
void flash_cp_async_next_v(Code& k);
/** Emits the wgmma flash variant's staging: thread 0 initialises the mbarriers (q_full; k_full,
 *  v_full, k_empty, v_empty per stage of the 2-stage rings), then warpgroup 0 (the producer) gives
 *  up registers and one thread loads Q's tile once and K and V chunk by chunk by TMA, each stage
 *  reused once the consumers' arrivals empty it, K a chunk ahead of V (K_kc before the wait for
 *  V_{kc-1}'s stage: O += P V frees V's a chunk after S = Q K^T frees K's); the producer returns. Needs the tensor maps
 *  tm_<Q>, tm_<K>, tm_<V>, the batch indices and `chunks`. */
void flash_tma_ring(Code& k, Context& c, const FlashForm& f);
/** After thread 0 initialised a warp-specialised kernel's mbarriers: the block's barrier, then
 *  warpgroup 0 (the producer) opened, its registers given up (setmaxnreg.dec to 24, PTX ISA
 *  9.7.17.1) and all of its threads but the first `threads` (1 or 32: thread 0 issues the TMA
 *  loads, a warp also loads what TMA cannot) returned. The caller emits the loads and closes
 *  the block. */
void producer_warpgroup_begin(Code& k, int threads = 1);

// ---- the gemm's TMA staging (render_tma.cpp) ----

/** One TMA box load of an operand tile per stage. */
struct GemmTmaBox {
  std::int64_t dst = 0;  ///< byte offset inside the tile
  std::string c0, c1;    ///< coordinates of the two matrix axes (innermost first)
  int rank = -1;         ///< cluster rank that multicasts it, -1: not shared (each block loads its own)
};
/** One operand tile in a pipeline stage: its byte offset and size in the stage, its TMA boxes
 *  and the box's extents (elements, innermost first). */
struct GemmTmaTile {
  const GemmTile* t;
  std::int64_t off, bytes;
  std::vector<GemmTmaBox> boxes;
  std::uint32_t box_inner, box_outer;
};
/** A stage of the wgmma path's ring: the tiles, their bytes, and the contraction whose B tile
 *  comes first where SwiGLU's two B tiles sit side by side (one wgmma of N = 2 T_N), else -1. */
struct GemmTmaStage {
  std::vector<GemmTmaTile> tiles;
  std::int64_t bytes = 0;
  int joint_first = -1;
};
/** The SMEM layout per stage: each tile as 128-byte rows (64 16-bit or 128 fp8 elements: `row`)
 *  in 1024-byte swizzle atoms. K-major tile [R][T_K]: T_K/row column blocks of R rows; MN-major
 *  tile [T_K][R]: R/row blocks of T_K rows. Tiles shared by a cluster's blocks (not varying
 *  along `cluster_axis`) are split into `cluster` times as many boxes, multicast by the ranks in
 *  turn. Its bytes equal lowering's (gemm_wgmma_stage_bytes; an internal error otherwise). */
GemmTmaStage gemm_tma_stage(const GemmForm& g, int cluster, const std::string& cluster_axis);
/** Emits the full/empty mbarriers of the ring, initialised before any block of the cluster
 *  signals; a stage is empty once the 4 warps of each of `releasers` consumer warpgroups of every
 *  block of the cluster released it (GemmForm::tile_consumers). */
void gemm_tma_barriers(Code& code, int cluster, int releasers);
/** Emits warpgroup 0, the producer: one thread walks this block's tiles and streams their chunks
 *  into the ring by TMA (multicast for a cluster's shared tiles), each stage reused once the
 *  consumers of every block of the cluster released it; then opens the consumers' branch
 *  (`} else {`), which the caller closes. */
void gemm_tma_producer(Code& code, Context& c, const GemmForm& g, const GemmTmaStage& st, int cluster, const std::string& cluster_axis);
/** Emits the consumers' wait for chunk `it`'s stage: `s` and `st` (its SMEM). */
void gemm_tma_stage_wait(Code& code);
/** Emits the release of stage `chunk` % STAGES: one arrival per consumer warp on every block of
 *  the cluster (a statement under the caller's condition). */
void gemm_tma_release(Code& code, int cluster, const std::string& chunk);

// ---- epilogues (render_epilogue.cpp) ----

/** The override that reads each contraction of the gemm form from its accumulator: node
 *  g.gemms[i].node becomes `acc(i)`, other nodes render as usual. The epilogues compute every
 *  output's expression through it. */
NodeOverride gemm_accumulators(const GemmForm& g, const std::function<std::string(std::size_t)>& acc);

/** Emits the gemm epilogue (both variants): `loops(body)` opens the variant's loops over its accumulator fragments
 *  (defining `row` and `col`, tile-relative, col even), calls `body` and closes them. For each
 *  pair of elements (row, col + q), q = 0, 1, every output of the kernel is computed from `acc(i)`
 *  (the accumulator element of contraction i, an expression that may use `q`) and stored. Twice:
 *  for interior tiles whose outputs take paired stores (the output's innermost axis is N, N even,
 *  the array aligned), one unpredicated 4- or 8-byte store per pair; else predicated against n_M
 *  and n_N, paired where adjacent and aligned. Adds the outputs to `stored`. */
void gemm_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<void(const std::function<void()>&)>& loops,
                   const std::function<std::string(std::size_t)>& acc, std::set<std::string>& stored);

/** The accumulator element of contraction i at fragment (nt, h, q) in path `p`'s layout (m16
 *  tile `mt` of mma.sync, m64 subtile `ms` of wgmma), as fp32 (int32 converted). */
std::function<std::string(std::size_t)> gemm_accumulator(const GemmForm& g, const KernelPath& p, int joint_first);
/** Emits the loops over path `p`'s accumulator fragments defining `row` and `col` (tile-relative;
 *  with `by_32_columns` `ng`, a 32-column group, instead of `nt` and `col`), calls `body` and closes them. */
void gemm_fragment_loops(Code& code, const KernelPath& p, bool by_32_columns, const std::function<void()>& body);
/** Emits the gemm epilogue of path `p`: on wgmma, interior tiles through SMEM by TMA (the spec's
 *  tma_store) or by 16-byte stores (wide_store_condition), the rest by gemm_epilogue; on
 *  mma.sync, gemm_epilogue. Adds the outputs to `stored`. */
void gemm_path_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const KernelPath& p, int joint_first, std::set<std::string>& stored);

/** Emits the mma.sync flash variant's end: the lemma's finalise per m16 tile of the warp, then O's
 *  epilogue (its expression with the contraction as the finalised accumulator) per element of the
 *  m16n8 fragments, rows past n_q skipped, and the row statistics among `outputs`
 *  (flash_store_stats). Adds nothing to `stored` (the caller stores O and the statistics). */
void flash_epilogue_fragments(Code& k, Context& c, const FlashForm& f, const FlashLemma& lemma, const std::vector<std::string>& outputs);
/** Emits the stores of the form's row statistics among `outputs` (f.stats: logsumexp and the
 *  like, from the lemma's m and l) after finalise: the first lane of each quad stores its rows
 *  `row_of(h)` (h = 0, 1) below n_q. */
void flash_store_stats(Code& k, Context& c, const FlashForm& f, const FlashLemma& lemma, const std::vector<std::string>& outputs, const std::string& row_of_h);
/** Emits the wgmma flash variant's end in a consumer warpgroup: the lemma's finalise, then O's
 *  epilogue for two adjacent columns at a time, stored by napkin::store_pair; rows past n_q
 *  skipped; then the row statistics among `outputs` (flash_store_stats). */
void flash_epilogue_pairs(Code& k, Context& c, const FlashForm& f, const FlashLemma& lemma, const std::vector<std::string>& outputs);

// ---- wide stores of interior tiles (render_store.cpp) ----

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
 *  through the epilogue expressions; no shuffles. `only`: that output alone (empty: all). */
void gemm_pack_matrices(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<std::string(std::size_t)>& acc,
                        const std::string& only = "");
/** Emits the interior epilogue with 16-byte stores (to be placed under wide_store_condition).
 *  `loops(body)` opens the loops over (m subtile, row half) defining `row` (tile-relative) and
 *  calls `body` once per 32-column group `ng`; inside it the emitted code computes every output's
 *  8 elements of this lane (gemm_pack_group) and stores them as one vector. Adds the outputs to
 *  `stored`. */
void gemm_wide_store_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g,
                              const std::function<void(const std::function<void()>&)>& loops,
                              const std::function<std::string(std::size_t)>& acc, std::set<std::string>& stored);
/** Emits a tile's epilogue through SMEM (the spec's tma_store; edge tiles too with
 *  tma_store_edges, the TMA store writing only what lies inside the array): per block of 64
 *  columns and output in turn, each consumer warpgroup waits until the buffer it used OUT_BUFS stores ago has
 *  been read by its TMA store, writes its rows by stmatrix (gemm_pack_matrices; 128-byte swizzle:
 *  16-byte chunk c of row r at chunk c ^ (r % 8)), makes them visible to the async proxy, and one
 *  thread stores them by TMA, not waiting for the write. Needs out_stage, sb, t, tm_<output>. */
void gemm_tma_store_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<std::string(std::size_t)>& acc);

// ---- host launcher (render_launch.cpp; tma_launch and add_hopper_variant: strategies.hpp) ----

/** Host statements (inside run_kernel, `const Args& a`): `blocks`, the gemm grid (tiles of M x
 *  tiles of N x the batch axes), returning early when it is empty. */
void gemm_launch_blocks(Code& l, const GemmForm& g);
/** Host statements: the flash kernel's check that the head dimensions are those it was emitted
 *  for (napkin_fail otherwise), then `blocks` (q tiles x the batch axes), returning early when
 *  it is empty. `ns`: the kernel's namespace. */
void flash_launch_blocks(Code& l, const FlashForm& f, const std::string& ns);
/** Host statements launching `ns`::kernel on `blocks` blocks (a host expression over `a`) of
 *  `ns`::THREADS threads, none where it is 0; with `dynamic_smem`, `ns`::SMEM_BYTES of dynamic
 *  SMEM (its limit raised once per kernel and device: host.cuh smem_limit_once). */
void grid_launch(Code& l, const std::string& blocks, const std::string& ns, bool dynamic_smem = false);
/** Host statements launching rows kernel `ns`::kernel over the product of `rows`' extents,
 *  `rows_per_block` rows per block (`dynamic_smem`: as grid_launch). */
void rows_launch(Code& l, const AxisList& rows, std::int64_t rows_per_block, const std::string& ns, bool dynamic_smem = false);
/** Adds the paths of a gemm or flash spec to its unit: with the mma.sync path,
 *  add_hopper_variant (`make` renders the wgmma path given the mma.sync launch as its fallback);
 *  without it (8-bit floats: the wgmma path alone), `make` given a fallback that fails with
 *  "<ns>: <alone>", r.hopper set. */
void add_path_variants(KernelEmit& r, Code& device, Code& launch, const KernelSpec& spec, const std::string& ns, const std::string& alone,
                       const std::function<KernelEmit(const std::string&)>& make);
/** Host statements launching the gemm's wgmma path (tma_launch): a tensor map per operand tile
 *  (the boxes of `st`; a repacked tile's on its copy, made first) and, with the spec's tma_store,
 *  of the output; the persistent grid (at most one block per SM, whole clusters); `fallback`
 *  otherwise. */
std::string gemm_tma_launch(const Context& c, const KernelChoice& kc, const GemmTmaStage& st, const std::string& fallback);
/** The Args member (a workspace buffer) holding kernel `kc`'s copy of `array` with rows padded to
 *  whole 128-byte lines (KernelSpec::repacks): "<kernel>__pad_<array>"; "" where it is read in place. */
std::string repack_buffer(const KernelChoice& kc, const std::string& array);
/** Kernel `kc`'s workspace buffers for the copies of its repacked operands (sized from the Args'
 *  extents, the rows padded as the launch's napkin::pitch_copy writes them). */
std::vector<WorkspaceBuffer> repack_buffers(const Context& c, const KernelChoice& kc);

}  // namespace napkin::cuda
