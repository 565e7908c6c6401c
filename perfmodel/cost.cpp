#include "perfmodel/cost.hpp"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <queue>
#include <set>

#include "diagrams/graph_view.hpp"
#include "perfmodel/rows_cost.hpp"
#include "perfmodel/simt_cost.hpp"

namespace napkin {

bool ScheduleCost::fits() const {
  for (const auto& k : kernels)
    if (!k.problems.empty()) return false;
  return true;
}

namespace {

double bytes_of(DType t) { return dtype_bits(t) / 8.0; }

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

class KernelModel {
 public:
  KernelModel(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave, std::shared_ptr<const KernelSpec> spec,
              const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt)
      : p_(p), d_(d), spec_(*spec), plan_(spec->shape.plan), sizes_(sizes), hw_(hw), opt_(opt) {
    c_.spec = std::move(spec);
    stmts_ = shape_weaves(spec_.shape, weave);
  }

  KernelCost run() {
    take_shape();
    traffic();
    bool call = std::any_of(stmts_.begin(), stmts_.end(), [](const StatementWeave* w) { return w->has_call; });
    if (call) {  // a call's tiles are its callee's business: derive costs the callee's own schedule
      c_.blocks_per_sm = 1;
      c_.warps_per_sm = c_.warps;
    } else {
      residency();
    }
    flops();
    timing();
    // The schedule's claims (tiles that fit, clusters) are checked above whatever the strategy;
    // a kernel lowered to SIMT then runs as SIMT (the paper's two-level model prices the
    // schedule itself, not its lowering).
    if (spec_.strategy == Strategy::simt && !opt_.two_level) simt();
    if (spec_.strategy == Strategy::rows && !opt_.two_level) rows();
    if (spec_.strategy == Strategy::cols && !opt_.two_level) cols();
    if (spec_.strategy == Strategy::transpose && !opt_.two_level) transpose();
    return std::move(c_);
  }

 private:
  // ------------------------------------------------------------------ SIMT
  /** A kernel lowered to SIMT (no tensor-core strategy takes it): priced as emit/cuda/simt.cpp
   *  writes it (perfmodel/simt_cost.hpp), one launch per statement, every array in HBM. */
  void simt() {
    const SimtCost s = price_simt(d_, c_.statements, sizes_, hw_, opt_);
    c_.transfers.clear();
    c_.smem_symbolic.clear();
    c_.smem_read_bytes = c_.flops_tensor = c_.t_smem = c_.t_tensor = c_.t_sfu = c_.t_latency = 0;
    c_.warpgroup_mma = false;
    c_.wave_efficiency = 1;
    for (const auto* list : {&c_.inputs, &c_.outputs, &c_.internal})
      for (const auto& a : *list) c_.level[a] = MemLevel::hbm;
    c_.hbm_bytes = s.hbm_bytes;
    c_.l2_to_smem_bytes = s.l2_bytes;  // loads from L2 into the SMs (no SMEM staging)
    c_.flops_fp32 = s.flops_fp32;
    c_.sfu_ops = s.sfu_ops;
    c_.t_hbm = s.t_hbm, c_.t_l2 = s.t_l2, c_.t_fp32 = s.t_compute, c_.t_launch = s.t_launch, c_.t_total = s.t_total, c_.t_latency = s.t_latency;
    c_.bound = s.bound;
    c_.warps = kSimtThreads / 32;
    c_.blocks = std::max<std::int64_t>(1, (s.elements + kSimtThreads - 1) / kSimtThreads);
    c_.blocks_per_sm = std::max(1, std::min(hw_.max_blocks_per_sm, hw_.max_warps_per_sm * 32 / kSimtThreads));
    c_.warps_per_sm = c_.blocks_per_sm * c_.warps;
    c_.registers_per_thread = kBaseRegisters;
  }

  // ------------------------------------------------------------------ rows and cols
  /** A rows kernel: priced as lowering shapes it (lower/rows_form.hpp, perfmodel/rows_cost.hpp):
   *  its registers, blocks per SM and SMEM are the form's (the emitted launch bounds), not the
   *  schedule's tiles (which stay checked above); memory and latency overlap with compute. */
  void rows() {
    const RowsForm& f = *spec_.rows;
    const RowsCost r = price_rows(f, d_, sizes_, hw_, opt_);
    memory_form(r, f.smem_bytes, f.registers, f.threads(), f.blocks, f.warps, f.blocks_per_sm, "HBM latency (dependent rounds of loads)");
    const auto mb = [](double b) { return std::to_string(std::lround(b / 1e6)) + " MB"; };
    if (r.reread_hbm_bytes > 0)
      c_.bound += "; the second walk re-reads " + mb(r.reread_hbm_bytes) + " from HBM (" + mb(r.reread_in_flight_bytes) +
                  " of re-reads in flight, the L2 keeps " + mb(l2_reread_capacity(hw_)) + ")";
  }

  /** A columns kernel, the same way (lower/cols_form.hpp, perfmodel/rows_cost.hpp price_cols). */
  void cols() {
    const ColsForm& f = *spec_.cols;
    memory_form(price_cols(f, d_, sizes_, hw_, opt_), f.smem_bytes, f.registers, f.threads(), f.blocks, f.warps, f.blocks_per_sm,
                "HBM latency (each thread's rows, unroll loads at a time)");
  }

  void transpose() {
    const TransposeForm& f = *spec_.transpose;
    memory_form(price_transpose(f, d_, sizes_, hw_, opt_), f.smem_bytes, f.registers, f.threads(), f.blocks, TransposeForm::warps, f.blocks_per_sm,
                "HBM latency (each thread's loads of a tile, a wave of blocks at a time)");
  }

  /** The price of a kernel whose form fixed its launch shape (rows, cols, transpose): memory side `r`, the
   *  form's SMEM bytes, registers per thread, threads and warps per block, blocks and blocks per
   *  SM; t = max(max(HBM, L2) + fill, latency, FP32 + SFU) + launch (rows_cost.hpp RowsCost::t_fill). */
  void memory_form(const RowsCost& r, std::int64_t smem_bytes, int registers, int threads, std::int64_t blocks, int warps, int blocks_per_sm,
                   const char* latency_bound) {
    c_.transfers.clear();
    c_.smem_symbolic.clear();
    c_.smem_read_bytes = c_.t_smem = 0;
    for (const auto* list : {&c_.inputs, &c_.outputs, &c_.internal})
      for (const auto& a : *list) c_.level[a] = MemLevel::hbm;
    c_.hbm_bytes = r.hbm_bytes;
    c_.l2_to_smem_bytes = r.l2_bytes;  // loads from L2 into the SMs (no SMEM staging)
    c_.smem_resident_bytes = static_cast<double>(smem_bytes);
    c_.registers_per_thread = registers;
    c_.register_bytes = static_cast<double>(registers) * 4 * threads;
    c_.blocks = blocks;
    c_.warps = warps;
    c_.blocks_per_sm = blocks_per_sm;
    c_.warps_per_sm = blocks_per_sm * warps;
    const double slots = static_cast<double>(hw_.sm_count) * blocks_per_sm;
    c_.wave_efficiency = static_cast<double>(blocks) / (std::ceil(static_cast<double>(blocks) / slots) * slots);
    c_.t_hbm = r.t_hbm, c_.t_l2 = r.t_l2, c_.t_latency = r.t_latency;
    c_.t_fp32 = c_.flops_fp32 / hw_.fp32_flops_per_s / c_.wave_efficiency;
    c_.t_sfu = c_.sfu_ops / hw_.sfu_ops_per_s / c_.wave_efficiency;
    c_.t_fill = r.t_fill;
    c_.t_total = std::max({std::max(c_.t_hbm, c_.t_l2) + c_.t_fill, c_.t_latency, c_.t_fp32 + c_.t_sfu}) + c_.t_launch;
    std::vector<std::pair<double, const char*>> terms{{c_.t_hbm, "HBM bandwidth"}, {c_.t_l2, "L2 bandwidth"}, {c_.t_latency, latency_bound},
                                                      {c_.t_fp32, "FP32 units"}, {c_.t_sfu, "special-function units (exp)"}};
    c_.bound = std::max_element(terms.begin(), terms.end())->second;
  }

  // ------------------------------------------------------------------ arrays and axes
  /** The kernel's shape, as lowering found it (lower/kernel_shape.hpp). */
  void take_shape() {
    const KernelShape& k = spec_.shape;
    c_.name = plan_.name;
    // a pingpong gemm's mma.sync path runs one consumer's warps (GemmForm::sync_warps)
    c_.warps = spec_.gemm && !spec_.wgmma ? spec_.gemm->sync_warps() : k.warps;
    c_.statements = k.statements;
    c_.inputs = k.inputs;
    c_.outputs = k.outputs;
    c_.internal = k.internal;
    c_.axes = k.axes;
    c_.blocks = k.blocks;
    c_.causal_active_fraction = k.causal_active_fraction;
    c_.causal_q = k.causal_q;
    c_.causal_lo = k.causal_lo, c_.causal_hi = k.causal_hi;
    c_.causal_x = causal_x_ = k.causal_x;
    order_ = k.axis_order;
    warp_axis_ = k.warp_axis;
  }

  bool grouped(const std::string& a) const {
    auto it = c_.axes.find(a);
    return it != c_.axes.end() && it->second.kind == AxisPlan::Kind::group;
  }
  const AxisList& axes_of(const std::string& array) const { return *d_.array_axes(array); }
  double elements(const AxisList& axes) const {
    double n = 1;
    for (const auto& a : axes) n *= static_cast<double>(sizes_.at(a));
    return n;
  }
  /** The elements a tensor-core kernel computes over `axes`: whole tiles along its grouped and
   *  streamed axes (ceil(N_a / t_a) * t_a), the ragged last tile included: its MMAs and the maps on
   *  their results run on the whole tile, the rows and columns past the edge masked or zero-filled
   *  (TMA fills out-of-bounds boxes with zeros, PTX ISA 9.7.9.27). Other kernels: `elements`. */
  double worked_elements(const AxisList& axes) const {
    if (!(spec_.gemm || spec_.flash || spec_.flash_bwd)) return elements(axes);
    double n = 1;
    for (const auto& a : axes) {
      auto it = c_.axes.find(a);
      n *= it == c_.axes.end() || it->second.kind == AxisPlan::Kind::whole ? static_cast<double>(sizes_.at(a))
                                                                            : static_cast<double>(it->second.count * it->second.tile);
    }
    return n;
  }
  double tile(const AxisList& axes) const {
    double n = 1;
    for (const auto& a : axes) {
      auto it = c_.axes.find(a);
      n *= static_cast<double>(it == c_.axes.end() ? sizes_.at(a) : it->second.tile);
    }
    return n;
  }
  std::string symbol(const std::string& a) const {
    const AxisPlan& ap = c_.axes.at(a);
    return ap.tile == 1 ? a : a + "/g_" + a;
  }

  /** The share of an array's elements loaded under a skip (KernelShape::causal_x): an array
   *  along the skipped axis is read in the (tile, chunk) pairs that run, whether or not it has the
   *  tiled axis too (a gemm's banded operand [q, x] as its other operand [x, d]). */
  double causal_factor(const AxisList& axes) const {
    if (causal_x_.empty()) return 1;
    return std::find(axes.begin(), axes.end(), causal_x_) != axes.end() ? c_.causal_active_fraction : 1;
  }

  /** The share of an input's elements read from HBM at all under a skip: an array over both the
   *  skipped axis and the tiled one has elements no (tile, chunk) pair that runs reads (a gemm's
   *  banded operand past its band); one over the skipped axis alone is read whole by the tiles
   *  whose chunks reach furthest. */
  double hbm_skip_factor(const AxisList& axes) const {
    if (causal_x_.empty()) return 1;
    auto has = [&](const std::string& a) { return std::find(axes.begin(), axes.end(), a) != axes.end(); };
    return has(causal_x_) && has(c_.causal_q) ? c_.causal_active_fraction : 1;
  }

  // ------------------------------------------------------------------ transfers
  void traffic() {
    std::map<std::string, int> terms;
    auto add = [&](const std::string& array, bool load) {
      const AxisList& ax = axes_of(array);
      DType dt = storage_dtype(d_, array, opt_);
      double reuse = 1;
      std::vector<std::string> sym(ax.begin(), ax.end());
      for (const auto& a : order_)
        if (grouped(a) && std::find(ax.begin(), ax.end(), a) == ax.end()) {
          reuse *= static_cast<double>(c_.axes[a].count);
          sym.push_back(symbol(a));
        }
      if (load) reuse *= causal_factor(ax);
      if (load && plan_.stream_passes() == 2 && std::find(ax.begin(), ax.end(), plan_.stream()->first) != ax.end()) {
        reuse *= 2;  // a two-pass stream reads its input again in the second pass
        sym.push_back("2");
      }
      Transfer t;
      t.array = array;
      t.from = load ? MemLevel::hbm : MemLevel::reg;
      t.to = load ? MemLevel::smem : MemLevel::hbm;
      t.reuse = reuse;
      t.bytes = elements(ax) * bytes_of(dt) * reuse;
      t.symbolic = sym.empty() ? "1" : join(sym, "·");
      ++terms[t.symbolic];
      c_.transfers.push_back(t);
      const bool atomic = !load && std::find(spec_.shape.atomic.begin(), spec_.shape.atomic.end(), array) != spec_.shape.atomic.end();
      if (!atomic) c_.l2_to_smem_bytes += t.bytes;  // an atomic output's partial sums: atomic_terms
      if (load) c_.l2_offline_bytes += t.bytes * (line_fetch_factor(array) - 1);
      c_.hbm_bytes += elements(ax) * bytes_of(dt) * (load ? hbm_skip_factor(ax) : 1);
    };
    for (const auto& a : c_.inputs) add(a, true);
    for (const auto& a : c_.outputs) add(a, false);
    std::vector<std::string> parts;
    for (const auto& [term, n] : terms) parts.push_back(n > 1 ? std::to_string(n) + "·" + term : term);
    c_.smem_symbolic = join(parts, " + ");
  }

  // ------------------------------------------------------------------ residency and occupancy
  void residency() {
    if (!spec_.shape.atomic.empty() && !opt_.two_level) {
      const std::string& a = spec_.shape.atomic.front();
      if (spec_.strategy != Strategy::flash_bwd)
        c_.problems.push_back("'" + a + "' reduces a grouped axis, added up by atomic adds, which only the flash_bwd form renders (this kernel lowers to " +
                              describe_spec(spec_) + ")");
      else if (hw_.l2_atomic_bandwidth_bytes_per_s <= 0)
        c_.problems.push_back("'" + a + "' is added up by atomic adds, and " + hw_.name + "'s table has no L2 atomic bandwidth to price them (l2.atomic_bandwidth_bytes_per_s)");
    }
    if (spec_.flash_bwd && !opt_.two_level) return flash_bwd_residency();
    auto stream = plan_.stream();
    int stages = opt_.two_level ? 1 : std::max(1, opt_.pipeline_stages);
    for (const auto& a : c_.inputs) {
      const AxisList& ax = axes_of(a);
      bool streamed = std::any_of(ax.begin(), ax.end(), [&](const std::string& x) { return plan_.streams_axis(x); });
      c_.smem_resident_bytes += tile(ax) * bytes_of(storage_dtype(d_, a, opt_)) * (streamed ? stages : 1);
      c_.level[a] = MemLevel::smem;
    }
    double outputs_bytes = 0;
    for (const auto& a : c_.outputs) {
      outputs_bytes += tile(axes_of(a)) * acc_bytes(a);
      c_.level[a] = MemLevel::reg;
    }
    std::set<std::string> in_regs(c_.internal.begin(), c_.internal.end());
    for (const auto& a : c_.internal) c_.level[a] = MemLevel::reg;
    // A gemm kernel as lowered holds its contractions' accumulators (4 bytes an element, fp32 or
    // int32) and no other tile, output or internal: the maps after them (SwiGLU's G = silu(G_v),
    // H = G * U) are computed element by element in the epilogue as it stores
    // (emit/cuda/render_epilogue.cpp). With pingpong each consumer holds a whole tile
    // (GemmForm::tiles_in_flight on the wgmma path).
    const bool gemm_lowered = spec_.strategy == Strategy::gemm && spec_.gemm && !opt_.two_level;
    if (gemm_lowered) {
      const double in_flight = spec_.wgmma ? spec_.gemm->tiles_in_flight() : 1;
      outputs_bytes = static_cast<double>(spec_.gemm->gemms.size()) * static_cast<double>(spec_.gemm->TM * spec_.gemm->TN) * 4 * in_flight;
      in_regs.clear();
    }
    c_.register_bytes = outputs_bytes + live_peak(in_regs);
    if (stream)  // lemma state: one running value per row of each normalisation along the stream
      for (const auto* w : stmts_) {
        auto it = w->roles.find(stream->first);
        if (it == w->roles.end() || it->second.role != AxisRole::normalised) continue;
        AxisList rows;
        for (const auto& a : w->statement->axes)
          if (a != stream->first) rows.push_back(a);
        c_.register_bytes += tile(rows) * 2 * acc_bytes(w->statement->name);
      }
    int threads = c_.warps * 32;
    if (opt_.two_level) {
      c_.smem_resident_bytes += c_.register_bytes;
      c_.register_bytes = 0;
      if (c_.smem_resident_bytes > opt_.two_level_capacity_bytes)
        c_.problems.push_back(over("the lower level", c_.smem_resident_bytes, opt_.two_level_capacity_bytes));
      c_.blocks_per_sm = 1;
      c_.warps_per_sm = c_.warps;
      return;
    }
    auto regs = [&] {  // clamped: an absurd tile must give a "does not fit", not an overflow
      return static_cast<int>(std::min(1e9, std::ceil(c_.register_bytes / 4 / threads))) + kBaseRegisters;
    };
    std::vector<std::pair<double, std::string>> internal;
    for (const auto& a : c_.internal) internal.emplace_back(tile(axes_of(a)) * acc_bytes(a), a);
    std::sort(internal.rbegin(), internal.rend());
    double state = c_.register_bytes - outputs_bytes - live_peak(in_regs);
    for (const auto& [b, a] : internal) {  // the register file is full: the largest tiles go to SMEM
      if (gemm_lowered || regs() <= hw_.max_registers_per_thread) break;
      in_regs.erase(a);
      c_.register_bytes = outputs_bytes + live_peak(in_regs) + state;
      c_.smem_resident_bytes += b / 4 * bytes_of(storage_dtype(d_, a, opt_));
      c_.level[a] = MemLevel::smem;
    }
    c_.registers_per_thread = regs();
    // A flash kernel on mma.sync (no wgmma path on this hardware) holds what its renderer declares
    // (lower/flash_form.hpp flash_mma_sync_registers), not the generic estimate, whose largest tiles
    // would go to SMEM: over the limit, the kernel spills and is not taken.
    if (spec_.strategy == Strategy::flash && spec_.flash && !spec_.wgmma)
      c_.registers_per_thread = std::max(c_.registers_per_thread, flash_mma_sync_registers(*spec_.flash, kBaseRegisters));
    if (threads > hw_.max_threads_per_block)
      c_.problems.push_back(std::to_string(threads) + " threads per block exceed the limit of " +
                            std::to_string(hw_.max_threads_per_block));
    if (c_.registers_per_thread > hw_.max_registers_per_thread)
      c_.problems.push_back("the register tiles need " + std::to_string(c_.registers_per_thread) +
                            " registers per thread, over the limit of " + std::to_string(hw_.max_registers_per_thread) +
                            " of " + hw_.name);
    if (c_.smem_resident_bytes > hw_.smem_max_per_block_bytes)
      c_.problems.push_back(over("SMEM", c_.smem_resident_bytes, hw_.smem_max_per_block_bytes));
    // The kernel as lowered: a tensor-core kernel holds the SMEM of the pipeline lowering chose
    // (its stages, padding and barriers: lower/lower.hpp), not the schedule's two-stage estimate
    // above, which stays the check of the schedule's own claim.
    if (spec_.tensor_cores()) c_.smem_resident_bytes = static_cast<double>(spec_.wgmma ? spec_.wgmma_smem_bytes : spec_.smem_bytes);
    std::int64_t regs_rounded = (std::int64_t{c_.registers_per_thread} + 7) / 8 * 8;
    int bps = hw_.max_blocks_per_sm;
    if (c_.smem_resident_bytes > 0)
      bps = static_cast<int>(std::min<double>(bps, hw_.smem.capacity_bytes / (c_.smem_resident_bytes + kSmemReservedPerBlock)));
    bps = static_cast<int>(std::min<std::int64_t>(bps, hw_.registers_per_sm / std::max<std::int64_t>(1, regs_rounded * threads)));
    bps = std::min(bps, hw_.max_warps_per_sm / c_.warps);
    c_.blocks_per_sm = std::max(0, bps);
    c_.warps_per_sm = c_.blocks_per_sm * c_.warps;
    if (c_.blocks_per_sm == 0 && c_.problems.empty()) c_.problems.push_back("no thread block fits on an SM");
  }

  /** A flash_bwd kernel's residency as lowered (lower/flash_bwd_form.hpp): its SMEM (resident
   *  tiles, two stages of the streamed chunks, staging of stored tiles) and its registers (the
   *  accumulators and the live tiles), not the schedule's generic estimate, which would keep
   *  every tile statement of the block at once. */
  void flash_bwd_residency() {
    const FlashBwdForm& f = *spec_.flash_bwd;
    for (const auto& a : c_.inputs) c_.level[a] = MemLevel::smem;
    for (const auto& a : c_.outputs) c_.level[a] = MemLevel::reg;
    for (const auto& a : c_.internal) c_.level[a] = MemLevel::reg;
    const int threads = c_.warps * 32;
    c_.registers_per_thread = flash_bwd_registers(f);
    c_.register_bytes = static_cast<double>(c_.registers_per_thread) * 4 * threads;
    c_.smem_resident_bytes = static_cast<double>(spec_.wgmma ? spec_.wgmma_smem_bytes : spec_.smem_bytes);
    const std::int64_t regs_rounded = (std::int64_t{c_.registers_per_thread} + 7) / 8 * 8;
    int bps = hw_.max_blocks_per_sm;
    bps = static_cast<int>(std::min<double>(bps, hw_.smem.capacity_bytes / (c_.smem_resident_bytes + kSmemReservedPerBlock)));
    bps = static_cast<int>(std::min<std::int64_t>(bps, hw_.registers_per_sm / std::max<std::int64_t>(1, regs_rounded * threads)));
    bps = std::min(bps, hw_.max_warps_per_sm / c_.warps);
    c_.blocks_per_sm = std::max(0, bps);
    c_.warps_per_sm = c_.blocks_per_sm * c_.warps;
    if (c_.blocks_per_sm == 0) c_.problems.push_back("no thread block fits on an SM");
  }

  /** Outputs accumulated by atomic adds (KernelShape::atomic): each block adds its partial
   *  sums of every element once per chunk that runs, so the payload is the output's elements
   *  times the blocks along the grouped axis it reduces, times the share of chunks computed; at
   *  the L2's atomic bandwidth, overlapped with the other memory terms (KernelCost::t_atomic).
   *  The launcher zeroes each output first (a memset: its bytes written, then read back by the
   *  first adds), a launch of its own before the kernel's (t_zero). */
  void atomic_terms(double mem_util) {
    double zeroed = 0;
    for (const auto& name : spec_.shape.atomic) {
      const double bytes = elements(axes_of(name)) * 4;
      double adders = 1;
      for (const auto& [a, ap] : c_.axes)
        if (ap.kind == AxisPlan::Kind::group && std::find(axes_of(name).begin(), axes_of(name).end(), a) == axes_of(name).end())
          adders *= static_cast<double>(ap.count);
      c_.atomic_bytes += bytes * adders * c_.causal_active_fraction;
      zeroed += bytes;
    }
    c_.hbm_bytes += 2 * zeroed;  // the memset's writes, and the first adds' reads of them
    c_.t_hbm += 2 * zeroed / hw_.hbm.bandwidth_bytes_per_s / mem_util;
    c_.t_zero = zeroed / hw_.hbm.bandwidth_bytes_per_s + hw_.launch_overhead_s;
    if (hw_.l2_atomic_bandwidth_bytes_per_s > 0) c_.t_atomic = c_.atomic_bytes / hw_.l2_atomic_bandwidth_bytes_per_s / mem_util;
  }

  /** A flash_bwd kernel's causal skip (flash_bwd_causal_skip): the zeros it writes into its
   *  stored tiles over the skipped chunks (the share its readers read: BwdTile::zero_share; the
   *  rest is not written at all) leave the overlapped HBM term for t_skipped_zeros (the
   *  same warps write them before their stream loop); c_.imbalance is the blocks' makespan over
   *  their mean time per SM (see dispatch_stretch). */
  void flash_bwd_skip_terms(double mem_util) {
    const FlashBwdForm& f = *spec_.flash_bwd;
    if (f.skip.empty()) return;
    double skipped = 0, zeros = 0;  // bytes of the stored tiles over the skipped chunks; of those, the zeros written
    for (const auto& t : f.tiles)
      if (t.stored) {
        const double e = elements(axes_of(t.s->name)) * bytes_of(storage_dtype(d_, t.s->name, opt_)) * (1 - f.active_fraction);
        skipped += e, zeros += e * t.zero_share;
      }
    c_.hbm_bytes -= skipped - zeros;  // never written: no reader reads them (BwdTile::zero_readers)
    c_.t_skipped_zeros = zeros / hw_.hbm.bandwidth_bytes_per_s / mem_util;
    c_.t_hbm = std::max(0.0, c_.hbm_bytes - zeros) / hw_.hbm.bandwidth_bytes_per_s / mem_util;
    c_.imbalance = dispatch_stretch(f.tile_chunks, c_.blocks, hw_.sm_count * std::max(1, c_.blocks_per_sm));
  }

  /** Blocks of unequal length dispatched in grid order: the streamed-over tiles in the order of
   *  `len` (FlashBwdForm::tile_chunks, FlashForm::tile_chunks: the longest first), each tile's
   *  blocks over the batch axes together (block i takes len[i / (blocks / len.size())]) or, with
   *  `tiles_fastest`, each batch slice's tiles together (block i takes len[i % len.size()]: the
   *  flash forward's grid where K and V do not fit in half of L2, emit/cuda/render_grid.cpp),
   *  each starting on the first of `slots` block slots to come free, as the block scheduler hands
   *  out blocks in order (list scheduling). Returns the makespan over the mean time per slot (>= 1):
   *  1 where the blocks pack evenly; the longest block x slots / total in one wave. Measured (H200,
   *  session 45, causal d64 B2 H16 N4096 on mma.sync, 264 slots, each slice's tiles together): 441
   *  us against 350 at the non-causal kernel's rate per chunk, a stretch of 1.26 where this gives 1.31. */
  static double dispatch_stretch(const std::vector<std::int64_t>& len, std::int64_t blocks, int slots, bool tiles_fastest = false) {
    if (len.empty() || blocks <= 0 || slots <= 0) return 1;
    std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
    for (int s = 0; s < slots; ++s) free_at.push(0);
    const std::int64_t per_tile = std::max<std::int64_t>(1, blocks / static_cast<std::int64_t>(len.size()));
    double total = 0, end = 0;
    for (std::int64_t i = 0; i < blocks; ++i) {
      const auto tile = std::min<std::size_t>(len.size() - 1, static_cast<std::size_t>(tiles_fastest ? i % static_cast<std::int64_t>(len.size()) : i / per_tile));
      const double t = static_cast<double>(len[tile]);
      const double start = free_at.top();
      free_at.pop();
      free_at.push(start + t);
      total += t, end = std::max(end, start + t);
    }
    return total > 0 ? std::max(1.0, end * slots / total) : 1;
  }

  /** SMEM bytes a flash_bwd kernel reads (emit/cuda/flash_bwd.cpp), per block and chunk: each
   *  warp reads its rows of the resident operand of every tile contraction (ldmatrix, all warps
   *  together the tile once) and the whole streamed chunk (every warp multiplies all of its
   *  columns); each accumulated output's operand chunk, by every warp; each stored tile is
   *  written to its staging tile and read back once. On the wgmma path (flash_bwd_wgmma.cpp)
   *  the readers of a streamed chunk are the consumer warpgroups, not the warps (PTX ISA
   *  9.7.15.5.1: an instruction reads all of B from SMEM for its m64 rows). Times blocks and the
   *  chunks that run, along Q and its outer streams (a causal skip's share: flash_bwd_causal_skip). */
  double flash_bwd_smem_reads() const {
    const FlashBwdForm& f = *spec_.flash_bwd;
    auto width = [&](const std::string& a) { return static_cast<double>(f.operands.at(static_cast<std::size_t>(f.operand(a))).width); };
    const double e = dtype_bits(f.dtype) / 8.0, TX = static_cast<double>(f.TX), TQ = static_cast<double>(f.TQ);
    const double W = c_.warpgroup_mma ? f.warps / 4 : f.warps;
    double per_chunk = 0;
    for (const auto& t : f.tiles) {
      if (t.node) per_chunk += (TX + W * TQ) * width(t.resident) * e;
      if (t.stored) per_chunk += 2 * TQ * TX * e;
    }
    for (const auto& o : f.outputs) per_chunk += W * TQ * width(o.operand) * e;
    // An atomic output (emit/cuda/flash_bwd.cpp atomic_adds): its tile written transposed once;
    // items of 16 rows of Q x C columns, each reading its 16 x T_X of the tile and T_X x C of the
    // resident operand.
    for (const auto& o : f.atomics) {
      const double E = static_cast<double>(o.E), C = static_cast<double>(FlashBwdForm::atomic_cols(o.E));
      per_chunk += TQ * TX * e + TQ * (E / C) * TX * e + (TQ / 16) * E * TX * e;
    }
    return per_chunk * static_cast<double>(c_.blocks) * static_cast<double>(c_.axes.at(f.Q).count * f.outer_steps) * f.active_fraction;
  }

  /** Bytes per element of a register tile: fp32 accumulators on a GPU; in the paper's two-level
   *  model every array of the lower level counts at its storage size (§2.2, §4.3). */
  double acc_bytes(const std::string& array) const {
    return opt_.two_level ? bytes_of(storage_dtype(d_, array, opt_)) : 4.0;
  }

  /** Widest live column of the register-resident intermediates (paper §2.2: memory usage is the
   *  largest total over columns): walking the statements in dataflow order, an intermediate is
   *  live from its statement to its last reader. A statement that reduces nothing and reads an
   *  intermediate of the same axes for the last time overwrites it in place (P = softmax(S)). */
  double live_peak(const std::set<std::string>& in_regs) const {
    std::map<std::string, std::size_t> last_use;
    for (std::size_t i = 0; i < stmts_.size(); ++i)
      for (const auto& r : stmts_[i]->reads) last_use[r] = i;
    double live = 0, peak = 0;
    std::set<std::string> alive;
    for (std::size_t i = 0; i < stmts_.size(); ++i) {
      const auto* w = stmts_[i];
      const std::string& name = w->statement->name;
      bool reduces = false;
      for (const auto& [a, r] : w->roles) reduces |= r.role == AxisRole::reduced;
      double mine = in_regs.count(name) ? tile(axes_of(name)) * acc_bytes(name) : 0;
      bool in_place = false;
      for (const auto& r : w->reads) {
        if (!alive.count(r) || reduces || last_use[r] != i) continue;
        AxisList x = axes_of(r), y = axes_of(name);
        std::sort(x.begin(), x.end());
        std::sort(y.begin(), y.end());
        in_place |= x == y;
      }
      peak = std::max(peak, live + (in_place ? 0 : mine));
      if (mine > 0) alive.insert(name), live += mine;
      for (const auto& r : w->reads)
        if (alive.count(r) && last_use[r] == i) alive.erase(r), live -= tile(axes_of(r)) * acc_bytes(r);
      peak = std::max(peak, live);
    }
    return peak;
  }

  std::string over(const std::string& level, double need, double limit) const {
    return "the resident set does not fit " + level + ": " + std::to_string(static_cast<long long>(need)) +
           " bytes per thread block, " + std::to_string(static_cast<long long>(need - limit)) + " over the " +
           std::to_string(static_cast<long long>(limit)) + "-byte limit" + (opt_.two_level ? "" : " of " + hw_.name);
  }

  // ------------------------------------------------------------------ FLOPs
  /** The dtype the kernel's contractions run in: the override; else the operand dtype of the
   *  tensor-core form lowering took (gemm, flash: an fp8 attention prices fp8's peak whatever input
   *  the diagram declares first); else the diagram's first input's. */
  DType compute_dtype() const {
    if (opt_.dtype) return *opt_.dtype;
    if (spec_.strategy == Strategy::flash && spec_.flash) return spec_.flash->dtype;
    if (spec_.strategy == Strategy::flash_bwd && spec_.flash_bwd) return spec_.flash_bwd->dtype;
    if (spec_.strategy == Strategy::gemm && spec_.gemm) return spec_.gemm->dtype;
    return d_.inputs().empty() ? DType::fp32 : d_.inputs().front()->dtype;
  }

  void flops() {
    DType compute = compute_dtype();
    bool tensor = hw_.tensor_rate(compute).has_value() && compute != DType::fp32;
    Typer typer(d_, p_.diagrams, nullptr);
    for (const auto* w : stmts_) {
      if (spec_.flash && std::find(spec_.flash->stats.begin(), spec_.flash->stats.end(), w->statement) != spec_.flash->stats.end()) {
        // a row statistic of the flash form: the lemma's m and l at the end of the stream (lower/flash_form.hpp), a log per row
        const double rows = elements(w->statement->axes);
        c_.flops_fp32 += 2 * rows, c_.sfu_ops += rows;
        continue;
      }
      double redundancy = 1;  // recomputed by every group along grouped axes it lacks
      AxisList touched;
      for (const auto& [a, _] : w->roles) touched.push_back(a);
      for (const auto& a : order_)
        if (grouped(a) && !w->touches(a)) redundancy *= static_cast<double>(c_.axes[a].count);
      double skip = causal_x_.empty() || !w->touches(causal_x_) ? 1 : c_.causal_active_fraction;
      double passes = plan_.stream() && w->touches(plan_.stream()->first) ? plan_.stream_passes() : 1;
      double scale = redundancy * skip * passes;
      walk(*w->statement->expr, [&](const Expr& n) {
        if (n.kind != Expr::Kind::apply || n.op == Op::call) return;
        if (spec_.flash && &n == spec_.flash->scaled) return;  // folded into the exponent's FFMA (lower/flash_scale.hpp)
        AxisList out = typer.axes_of(n).value_or(AxisList{});
        std::vector<AxisList> args;
        for (const auto& a : n.args) args.push_back(typer.axes_of(*a).value_or(AxisList{}));
        double e = worked_elements(out) * scale;
        if (const auto mw = map_work(n.op)) {  // the element-wise maps as numeric.cuh writes them (simt_cost.hpp)
          c_.sfu_ops += mw->sfu_ops * e, c_.flops_fp32 += mw->fp32_flops * e;
          return;
        }
        switch (n.op) {
          case Op::contract: {
            double dom = worked_elements(axis_union(args)) * scale;
            std::size_t arrays = 0;
            for (const auto& a : args) arrays += !a.empty();
            if (arrays >= 2 && !n.axes.empty() && tensor) c_.flops_tensor += 2 * dom * static_cast<double>(arrays - 1);
            else c_.flops_fp32 += dom * static_cast<double>(std::max<std::size_t>(1, arrays));
            break;
          }
          case Op::sum: case Op::max: case Op::mean: c_.flops_fp32 += elements(args[0]) * scale; break;
          case Op::softmax: c_.sfu_ops += e, c_.flops_fp32 += 4 * e; break;
          case Op::layernorm: case Op::rmsnorm: c_.flops_fp32 += 6 * e, c_.sfu_ops += e / static_cast<double>(sizes_.at(n.axes[0])); break;
          case Op::pow: c_.sfu_ops += 2 * e, c_.flops_fp32 += e; break;  // exp2(p * log2(x))
          case Op::pick: c_.flops_fp32 += 2 * e; break;  // a gather: one compare and one select per element of L
          default: c_.flops_fp32 += e; break;  // + - * / neg abs step min max mask causal band pos cast
        }
      });
    }
    // Online normalisation rescales the accumulators at every stream step; the flash kernel on
    // wgmma rescales lazily, only where a row's max passes its reference by more than 2^8
    // (lower/flash_form.hpp kLazyRescaleLog2): priced as one rescale per row, its first chunk.
    if (auto stream = plan_.stream()) {
      const bool lazy = spec_.flash && spec_.wgmma;
      const double steps = lazy ? 1.0 : static_cast<double>(c_.axes[stream->first].count) * c_.causal_active_fraction;
      for (int n = online_normalisers(); n > 0; --n)
        for (const auto& o : c_.outputs) c_.flops_fp32 += elements(axes_of(o)) * steps;
    }
  }

  // ------------------------------------------------------------------ time
  void timing() {
    DType compute = compute_dtype();
    // wgmma where the emitter's sm_90a variant applies: its rate, and TMA's L2 -> SMEM bandwidth.
    // wgmma where lowering emits the sm_90a variant (lower/lower.hpp): its rate, and TMA's L2 -> SMEM bandwidth.
    c_.warpgroup_mma = spec_.wgmma && c_.flops_tensor > 0;
    if (!opt_.two_level && spec_.flash_bwd) {
      c_.smem_read_bytes = flash_bwd_smem_reads();
      misses();
    } else if (!opt_.two_level) {
      const bool gemm_wgmma = gemm_on_wgmma();
      const double per_subtile = gemm_wgmma ? wgmma_per_subtile() : 1;
      for (const auto& t : c_.transfers)
        if (t.to == MemLevel::smem) {
          const bool split = along_warps(t.array);
          // mma.sync: every warp reads the operand tiles it multiplies. wgmma (PTX ISA 9.7.15.5.1):
          // every instruction reads its m64 rows of A and all of its B from SMEM, so in a GEMM A is
          // read once per instruction on its subtile and B once per m64 subtile of the block; in
          // an attention kernel (one m64 per warpgroup) every warpgroup reads K and V.
          double reads = split ? (gemm_wgmma ? per_subtile : 1)
                               : gemm_wgmma ? static_cast<double>(c_.axes.at(warp_axis_).tile) / 64
                               : c_.warpgroup_mma ? c_.warps / 4 : c_.warps;
          c_.smem_read_bytes += t.bytes * reads;
        }
      // An intermediate moved to SMEM is written and read back at every stream step.
      double steps = 1;
      for (const auto& [sa, size] : plan_.streams()) steps *= static_cast<double>(c_.axes.at(sa).count);
      for (const auto& a : c_.internal)
        if (c_.level.at(a) == MemLevel::smem)
          c_.smem_read_bytes += 2 * tile(axes_of(a)) * bytes_of(storage_dtype(d_, a, opt_)) * steps * static_cast<double>(c_.blocks);
      misses();
    }
    c_.clusterable = gemm_on_wgmma() && hw_.clusters;
    if (auto cl = plan_.cluster()) clusters(cl->first, static_cast<int>(cl->second));
    if (c_.warpgroup_mma && c_.blocks_per_sm > 0) {
      // The sm_90a variant: one thread block per SM (a producer warpgroup beside the consumers,
      // registers moved to them by setmaxnreg), loads issued by TMA while the consumers compute.
      c_.blocks_per_sm = 1;
      c_.warps_per_sm = c_.warps + 4;
    }
    double slots = static_cast<double>(hw_.sm_count) * std::max(1, c_.blocks_per_sm);
    double waves = std::ceil(static_cast<double>(c_.blocks) / slots);
    c_.wave_efficiency = static_cast<double>(c_.blocks) / (waves * slots);
    double mem_util = std::min(1.0, static_cast<double>(c_.blocks) / hw_.sm_count);
    c_.tensor_fraction = tensor_fraction();
    double tc = hw_.tensor_rate(compute).value_or(hw_.fp32_flops_per_s) * c_.tensor_fraction;
    // A GEMM's TMA loads at the bulk-copy rate of co-resident blocks re-reading the same tiles in
    // the same order (Hardware::l2_bulk_bandwidth_bytes_per_s; session 33, H200: the thin GEMM's
    // 340 MB landed in 30.5 us, above the L2 read rate). The flash kernels keep the L2 read rate
    // their fits were made with (hardware/h200.toml flash_*; at the bulk rate the model put GQA's
    // unsplit backward at 243.7 us, under the split's 245.5, where they measured 371.3 and 320.1).
    const double l2_bw = l2_rate();
    c_.t_hbm = c_.hbm_bytes / hw_.hbm.bandwidth_bytes_per_s / mem_util;
    if (gemm_on_wgmma() && !opt_.two_level) gemm_epilogue_terms(mem_util);
    if (spec_.strategy == Strategy::gemm && !spec_.wgmma && !opt_.two_level) gemm_scalar_staging();
    if (spec_.wgmma && !opt_.two_level) repack_terms();
    if (spec_.flash_bwd && !opt_.two_level) flash_bwd_skip_terms(mem_util);
    if (!spec_.shape.atomic.empty() && !opt_.two_level) atomic_terms(mem_util);
    // The forward's causal tiles handed out longest first, the batch slices fastest or (K and V
    // over half of L2) each slice's tiles together: the makespan of that grid order. Session 24
    // had left the second order unstretched (H200, B4 H16 N4096 on wgmma: 550.8 us measured, 569.5
    // without the stretch, 590.9 with its 1.07); under the later flash terms the ledger's causal
    // rows (causal, GQA, l2norm) price within -4.8% to +11.4% with it, and causal d64 B2 H16 N4096 on mma.sync, whose
    // chunks ran 1.26x the non-causal kernel's, went from -20.6% to +9.2% (session 45).
    if (spec_.flash && !opt_.two_level && spec_.flash->skip)
      c_.imbalance = dispatch_stretch(spec_.flash->tile_chunks, c_.blocks, hw_.sm_count * std::max(1, c_.blocks_per_sm), !spec_.flash->slices_fastest);
    // A banded GEMM's tiles, longest first (GemmForm::band_order): one block per tile on mma.sync,
    // one persistent block per SM walking them in snake order on wgmma (napkin::persistent_grid).
    if (spec_.gemm && !opt_.two_level && spec_.gemm->band_order)
      c_.imbalance = gemm_on_wgmma() ? gemm_band_stretch(*spec_.gemm, c_.blocks, hw_.sm_count, true)
                                     : gemm_band_stretch(*spec_.gemm, c_.blocks, hw_.sm_count * std::max(1, c_.blocks_per_sm), false);
    // in whole 128-byte lines: the rows off a line boundary fetch one more (line_fetch_factor)
    c_.t_l2 = (c_.l2_to_smem_bytes + c_.l2_offline_bytes) / landing_rate(l2_bw, mem_util);
    // blocks of unequal length: their makespan in grid order, or the waves, whichever is longer
    const double stretch = std::max(1.0 / c_.wave_efficiency, c_.imbalance);
    // TMA's fills write every landed byte into SMEM (a multicast into each block of the cluster),
    // through the same banks the MMAs read: on the wgmma GEMM, counted with its reads (without
    // them the model priced 128x64 tiles' 25.9 GB of fills at 8192^3 as free beside 34.4 GB of reads).
    // The SMEM's bytes per clock run at the clock the power limit leaves a GEMM that keeps the
    // tensor cores busy (Hardware::sustained_smem_fraction, a fit: session 33, H200, SwiGLU's G_to_H
    // in 128x64 tiles on one consumer, 75.4 GB of SMEM reads and fills, measured 3065.6 us).
    double smem_bw = hw_.smem.bandwidth_bytes_per_s;
    if (gemm_on_wgmma() && !opt_.two_level) {
      c_.smem_fill_bytes = c_.l2_to_smem_bytes + c_.cluster_saved_bytes;
      if (hw_.sustained_smem_fraction > 0) smem_bw *= hw_.sustained_smem_fraction;
    }
    c_.t_smem = (c_.smem_read_bytes + c_.smem_fill_bytes) / smem_bw * stretch;
    c_.t_tensor = c_.flops_tensor / tc * stretch;
    c_.t_fp32 = c_.flops_fp32 / hw_.fp32_flops_per_s * stretch;
    c_.t_sfu = c_.sfu_ops / hw_.sfu_ops_per_s * stretch;
    c_.t_launch = hw_.launch_overhead_s;
    // The mma.sync path of a flash_bwd kernel (emit/cuda/flash_bwd.cpp): every warp walks a chunk
    // as one dependent chain (ldmatrix, MMAs, maps, staging, the atomic adds) between the block's
    // barriers, at 8 warps per SM (255 registers a thread): its SMEM reads, atomic adds and
    // arithmetic add up; only the cp.async loads (HBM, L2) run beside them. Measured (H200,
    // session 27, B4 H16 N4096 d128, dQ by atomic adds): 7324.9 us against 7.18 ms summed, 3.41 ms
    // overlapped; b = 1: 1877.0 us against 1.79 ms; session 15's kernel without atomics, 7217.2 us
    // against 3698.3 us overlapped.
    const bool serial_chain = !opt_.two_level && spec_.strategy == Strategy::flash_bwd && !c_.warpgroup_mma;
    if (gemm_on_wgmma() && !opt_.two_level) gemm_ring_terms();
    double memory = serial_chain ? std::max({c_.t_hbm, c_.t_l2, c_.t_smem + c_.t_atomic}) : std::max({c_.t_hbm, c_.t_l2, c_.t_smem, c_.t_atomic, c_.t_ring});
    double compute_t = c_.t_tensor + c_.t_fp32 + c_.t_sfu;
    // The wgmma GEMM's epilogue maps (bias, GELU, SwiGLU's product) run on the consumer
    // warpgroups after their tile's main loop and before the next tile's MMAs (emit/cuda/gemm.cpp:
    // the producer's loads go on, the tensor cores wait): in series with the tensor time.
    // Their staging of the TMA-stored tiles is theirs too, in series with the MMAs, while the
    // producer's loads and the stores already issued go on (overlapped with the memory terms).
    // With pingpong (GemmForm::pingpong: the consumers take whole tiles in turn) the same terms,
    // per its own tiles: measured, one consumer's epilogue did not run beside the other's MMAs
    // (session 34, H200, 4096 x 1024 x 4096 + bias + GELU: 64x256 pingpong 95.3 us, 128x128
    // pingpong 98.3, cooperative 128x256 94.4; priced overlapped they were 70.1 and 60.1 us, in
    // series 92.6 and 86.6). Where K is short it overlapped by about half (8192 x 256 x 4096:
    // 39.1 and 40.1 us against 46.9 in series and 31.4 overlapped), not priced.
    if (gemm_on_wgmma() && !opt_.two_level) {
      c_.t_epilogue_maps = c_.t_fp32 + c_.t_sfu;
      compute_t = c_.t_tensor + c_.t_tile_turnover;
    }
    const bool flash_fwd = !opt_.two_level && spec_.strategy == Strategy::flash && spec_.flash;
    const bool flash_fwd_wgmma = flash_fwd && c_.warpgroup_mma;
    if (flash_fwd) compute_t = flash_fwd_compute(compute_t, stretch);
    bool pipelined = hw_.cp_async && opt_.pipeline_stages >= 2;
    // Overlap needs warps to switch between: with fewer than kWarpsToHide resident warps per SM,
    // only that share of the shorter of memory and compute is hidden (an assumption to calibrate).
    double hidden = opt_.two_level ? 1.0 : std::min(1.0, c_.warps_per_sm / kWarpsToHide);
    // On the wgmma path of a flash_bwd kernel (element-wise maps between its MMAs, each waited
    // for), a lone consumer warpgroup leaves the tensor cores idle while it waits for its MMAs and
    // maps their results: a second one fills those gaps (FlashAttention-3 §3.1). With one, nothing
    // overlaps. Measured (H100, session 16, causal B4 H16 N4096 d128): one consumer 4673.5 us, two
    // 2795.5 us for the same chunks. The forward's one-consumer flash kernels are not measured
    // apart, so the rule is not applied to them.
    const bool lone_consumer = !opt_.two_level && c_.warpgroup_mma && spec_.strategy == Strategy::flash_bwd && c_.warps / 4 < 2;
    if (lone_consumer || serial_chain) hidden = 0;
    // With two consumers on the wgmma path, the share of the SMEM reads their MMAs do not hide
    // (Hardware::flash_bwd_smem_exposed, a fit; 0 where not fitted).
    if (!opt_.two_level && c_.warpgroup_mma && spec_.strategy == Strategy::flash_bwd && !lone_consumer)
      c_.t_smem_exposed = hw_.flash_bwd_smem_exposed * c_.t_smem;
    c_.t_total = (pipelined ? std::max(memory, compute_t) + (1 - hidden) * std::min(memory, compute_t) : memory + compute_t) +
                 c_.t_epilogue + c_.t_epilogue_maps + c_.t_last_stores + c_.t_scalar_staging + c_.t_repack + c_.t_skipped_zeros + c_.t_smem_exposed + c_.t_fill + c_.t_zero + c_.t_launch;
    std::vector<std::pair<double, const char*>> terms{{c_.t_hbm, "HBM bandwidth"},   {c_.t_l2, "L2->SMEM bandwidth"}, {c_.t_atomic, "L2 atomic adds"},
                                                      {c_.t_ring, "TMA ring latency (stages in flight over each stage's load round trip)"},
                                                      {c_.t_smem, "SMEM bandwidth"}, {c_.t_tensor, "tensor cores"},
                                                      {c_.t_fp32, "FP32 units"},     {c_.t_sfu, "special-function units (exp)"},
                                                      {c_.t_scalar_staging, "operands staged element by element (strides no 4-byte cp.async divides)"}};
    c_.bound = std::max_element(terms.begin(), terms.end())->second;
    if (flash_fwd_wgmma && compute_t > memory && std::max(c_.t_tensor, flash_softmax_time()) < 0.9 * compute_t)
      c_.bound = "compute (tensor and softmax, " + std::to_string(std::lround(100 * flash_hidden_share())) +
                 "% of the shorter hidden by " + std::to_string(std::max(1, c_.warps / 4)) + " consumer warpgroup(s))";
    else if (compute_t > memory && std::max({c_.t_tensor, c_.t_fp32, c_.t_sfu}) < 0.7 * compute_t) c_.bound = "compute (tensor + FP32 + SFU, not overlapped)";
    if (lone_consumer) c_.bound += "; one consumer warpgroup: memory and compute do not overlap (FlashAttention-3 §3.1)";
    if (serial_chain) c_.bound += "; mma.sync flash_bwd: each warp's chunk is one dependent chain, its SMEM reads, atomic adds and arithmetic add up";
  }

  /** The persistent wgmma GEMM (emit/cuda/gemm.cpp) overlaps the next tile's loads with a
   *  tile's epilogue but not the epilogue's stores with the MMAs: the output's HBM write is paid
   *  after the main loop, tile by tile, so it leaves the overlapped HBM term and adds to the total.
   *  Stored by TMA from SMEM (spec_.tma_store), the writes overlap the next tile's MMAs instead.
   *  The epilogue's own inputs (arrays the maps after the contraction read, no operand tile:
   *  SwiGLU's G and V in dH's epilogue) are loaded from global memory in the epilogue, after the
   *  main loop, and waited for tile by tile (session 22: dH..dU fused measured 539.6 us where
   *  overlapping them predicted 363): paid in the same term. `mem_util`: the share of SMs with blocks. */
  void gemm_epilogue_terms(double mem_util) {
    auto bytes = [&](const std::string& a) { return elements(axes_of(a)) * bytes_of(storage_dtype(d_, a, opt_)); };
    const auto& tiles = spec_.gemm->tiles;
    double waited = 0, fetched = 0;  // bytes the epilogue waits for; the sectors it fetches for them
    if (!spec_.tma_store)
      for (const auto& a : c_.outputs) waited += bytes(a), fetched += bytes(a);
    // An epilogue input is read element by element in the accumulators' m16n8 layout: a quad of
    // lanes reads 8 consecutive elements of a row (8 rows a warp instruction), so each 32-byte
    // sector it fetches carries 8 x its element size of them (16 of 32 bytes for bf16).
    auto sector_factor = [&](const std::string& a) { return std::max(1.0, 32.0 / (8.0 * bytes_of(storage_dtype(d_, a, opt_)))); };
    bool epilogue_inputs = false;
    for (const auto& a : c_.inputs)
      if (std::none_of(tiles.begin(), tiles.end(), [&](const GemmTile& t) { return t.array == a; }))
        waited += bytes(a), fetched += bytes(a) * sector_factor(a), epilogue_inputs = true;
    c_.t_epilogue = fetched / hw_.hbm.bandwidth_bytes_per_s / mem_util;
    // Stored directly (no TMA staging), it also waits for them: the loads of a group of rows
    // (an m64 subtile's rows h over 32 columns) cannot pass the global stores of the group
    // before, which may alias them (emit/cuda/render_epilogue.cpp), so each tile's epilogue
    // waits MS x T_N/32 x 2 dependent rounds of an HBM latency (session 24, H200: dH with dG
    // and dG_v in its epilogue, reading U and G_v, measured 462 us in the training step against
    // dH alone 330 and the maps' 81).
    // Through the TMA store's staging ring (render_store.cpp) each output's tile is mapped 64
    // columns at a time between the consumers' named barriers, so the epilogue inputs' loads of
    // one 64-column block cannot start before the last block's barrier: T_N/64 dependent rounds
    // per output and tile (H200, session 32, 4096x1024x4096: + bias 57.2 us against the plain
    // GEMM's 51.5, 4 rounds of 3.9 tiles per SM).
    const double column_blocks = std::ceil(static_cast<double>(spec_.gemm->TN) / 64) * static_cast<double>(c_.outputs.size());
    if (epilogue_inputs) {
      const double rounds = spec_.tma_store ? column_blocks : m64_subtiles_per_consumer() * std::max(1.0, static_cast<double>(spec_.gemm->TN) / 32) * 2;
      c_.t_epilogue += static_cast<double>(c_.blocks) / hw_.sm_count * rounds * hw_.hbm_latency_s;
    }
    c_.t_hbm = std::max(0.0, c_.hbm_bytes - waited) / hw_.hbm.bandwidth_bytes_per_s / mem_util;
    // Between a tile's last MMAs and the next tile's first the consumers drain their wgmma
    // groups, run the epilogue and start again (Hardware::gemm_tile_turnover_s a tile); staged
    // through SMEM for the TMA store, each 64-column block of each m64 subtile a consumer holds is
    // a round of stmatrix (Hardware::staged_store_block_s). In series with the tensor time
    // (timing()). Measured (H200, session 33), per tile beyond its MMAs: batched_matmul (32 x 4096
    // x 128 x 4096) in 128x64 tiles of two consumers, 1.11 us (723.7 us in all), in 128x256 tiles
    // (4 blocks) 1.33 us (338.3 us); matmul 8192x256x4096 in 128x256 tiles 1.3 us (38.9 us; 37.6
    // with the stores themselves removed); batched_matmul in 256x64 tiles of one consumer of four
    // subtiles, 1.2 us (478.8 us).
    const double staged = spec_.tma_store ? column_blocks * m64_subtiles_per_consumer() : 0;
    c_.t_tile_turnover = static_cast<double>(c_.blocks) / hw_.sm_count * (hw_.gemm_tile_turnover_s + staged * hw_.staged_store_block_s);
    // Each SM's last tile has no next tile to overlap its stores with: its T_N/64 column blocks are
    // staged and stored by TMA one after the other, and the kernel ends after the last store
    // completes (Hardware::gemm_last_store_block_s a block, a fit: session 40, H200, one-wave
    // matmuls at one K step, 64 to 256 columns).
    if (spec_.tma_store) c_.t_last_stores = column_blocks * hw_.gemm_last_store_block_s;
    // Stored from registers, the last tile's stores drain to memory before the kernel ends: one
    // loaded HBM round trip (Hardware::loaded_latency_s), in series. Measured (H200, session 40):
    // matmul 1000^3 in one wave of 64x128 tiles with two consumers (direct stores) 12.9 us and
    // 14.6 us (K steps of 128 / 256) against 12.3 / 14.7 with one (TMA stores, 1.4 us of last stores).
    else c_.t_last_stores = hw_.loaded_latency_s();
  }

  /** m64 subtiles of a GEMM tile's rows each consumer warpgroup holds (wgmma's m64; at least 1). */
  double m64_subtiles_per_consumer() const { return std::max(1.0, static_cast<double>(spec_.gemm->TM) / std::max(1, spec_.gemm->tile_consumers()) / 64); }

  /** The persistent wgmma GEMM's TMA ring (emit/cuda/gemm.cpp): a stage's slot is refilled only
   *  after its consumers' MMAs on it completed, so it turns over once per (load round trip +
   *  hold), and an SM walks at most `stages` stages per turnover (Little's law). Per SM the
   *  walk is ceil(tiles / persistent blocks) x the K chunks of a tile; the hold summed over it
   *  is t_tensor. A stage's round trip is the loaded HBM latency where one of its tiles is a first
   *  read (an operand tile read by `reuse` blocks comes from HBM for one of them, and for the
   *  others where the L2 misses: misses()), else Hardware::l2_loaded_latency_s; in a cluster the
   *  blocks refill a stage after all of them released it, adding
   *  Hardware::cluster_stage_latency_s; the first tile's stages also land in it (below). The
   *  ring's first fill waits one load and its stage's landing (c_.t_fill).
   *  Measured (H200, session 33, matmul 8192x4096x256, 64x256 tiles, 5 stages, one consumer
   *  warpgroup: every stage reads its A tile from HBM): no cluster 30.5 us, clusters of 2 39.6 us,
   *  the same clusters without multicast 43.3 us; at 4096^3 (4 stages of 128x256, two consumers,
   *  0.7 us of MMAs a stage) the three within 1%. */
  void gemm_ring_terms() {
    if (hw_.l2_loaded_latency_s <= 0 || spec_.wgmma_stages < 1) return;
    const GemmForm& g = *spec_.gemm;
    double chunks = std::ceil(static_cast<double>(sizes_.at(g.K)) / static_cast<double>(std::max<std::int64_t>(1, g.TK))) * g.k_active_fraction;
    for (const auto& a : g.k_outer) chunks *= static_cast<double>(sizes_.at(a));
    const double cluster = std::max(1, c_.cluster);
    const double grid = std::min(static_cast<double>(c_.blocks), std::max(cluster, std::floor(hw_.sm_count / cluster) * cluster));
    const double stages_walked = std::ceil(static_cast<double>(c_.blocks) / grid) * chunks;
    double none_first = 1;  // probability that no tile of a stage is a first read
    for (const auto& t : c_.transfers)
      if (t.to == MemLevel::smem && t.reuse >= 1 && std::any_of(g.tiles.begin(), g.tiles.end(), [&](const GemmTile& x) { return x.array == t.array; }))
        none_first *= 1 - std::min(1.0, 1 / t.reuse + (1 - 1 / t.reuse) * l2_miss_share_);
    const double load = (1 - none_first) * hw_.loaded_latency_s() + none_first * hw_.l2_loaded_latency_s;
    c_.ring_latency_s = load + (cluster > 1 ? hw_.cluster_stage_latency_s : 0);
    // The first tile's stages land in the turnover too: the blocks start together and ask for
    // each K step at once, so a stage lands at one SM's share of the L2 rate after its round trip.
    // After the first tile the persistent blocks drift apart and landing overlaps other stages'
    // (session 44, H200, one-wave matmul 1000^3 in 64x128 tiles of clusters of 2: 12.3 / 14.7 us
    // with 4 stages of 48 KB / 2 of 96 KB, priced 11.4 / 12.4 without landing, 12.3 / 14.8 with;
    // counted on every tile, 4096^3 priced +26%).
    c_.ring_landing_s = static_cast<double>(gemm_wgmma_stage_bytes(g)) / (l2_rate() / hw_.sm_count);
    const double lockstep_stages = std::min(stages_walked, chunks);
    c_.t_ring = (stages_walked * c_.ring_latency_s + lockstep_stages * c_.ring_landing_s + c_.t_tensor) / spec_.wgmma_stages;
    // The first fill waits for no release, but for its whole stage to land at one SM's share of the
    // L2 -> SMEM rate (session 40, H200, matmul 1000^3 in 64x128 tiles: 12.8 / 12.3 / 14.7 us with
    // stages of 24 / 48 / 96 KB, the last of them 2 stages deep).
    c_.t_fill = load + c_.ring_landing_s;
  }

  /** A flash forward kernel (emit/cuda/flash.cpp): its compute time (`summed`: tensor + FP32 +
   *  SFU) and its blocks' start (c_.t_fill). Each chunk of x a consumer walks carries a latency
   *  its arithmetic does not count (the barriers handing over the stage and the tensor cores,
   *  waiting for its MMAs, the row reductions' shuffles): Hardware::flash_chunk_latency_s per
   *  chunk in series on an SM slot, on the softmax's side. On wgmma with two consumer warpgroups
   *  one's softmax runs beside the other's MMAs (named barriers hand the tensor cores over,
   *  FlashAttention-3 §3.1), hiding Hardware::flash_softmax_hidden of the shorter of the tensor
   *  time and that softmax time (FP32 + SFU + chunk latency); a lone consumer, or mma.sync, hides
   *  none. Each block first waits a loaded HBM round trip for Q and its first K chunk:
   *  t_fill = (blocks in series on the busiest slot) x hbm.loaded_latency_s. Both constants are
   *  fits (H200, session 31; data and errors in hardware/h200.toml); 0 where not fitted.
   *  Latencies in series count the blocks of the busiest SM slot, as the throughput terms do
   *  (`stretch`: whole waves, or the causal makespan): a wave of 64 blocks on 132 SMs still runs
   *  each block's chunks one after another (session 39, H200, fp8 attention q1000 in 64-row
   *  tiles, one consumer, 64 blocks: 15.6 / 23.1 / 38.6 us at 8 / 16 / 32 chunks, 0.95 us a
   *  chunk; the average over the slots priced 0.79, the busiest slot 0.95). */
  double flash_fwd_compute(double summed, double stretch) {
    const FlashForm& f = *spec_.flash;
    const double slots = static_cast<double>(hw_.sm_count) * std::max(1, c_.blocks_per_sm);
    const double blocks_per_slot = static_cast<double>(c_.blocks) / slots * stretch;
    const double n_x = static_cast<double>(sizes_.at(f.x));
    const double chunks = std::ceil(n_x / static_cast<double>(std::max<std::int64_t>(1, f.TX))) * (f.skip ? c_.causal_active_fraction : 1.0);
    c_.t_fill = blocks_per_slot * hw_.loaded_latency_s();
    c_.t_chunk_latency = blocks_per_slot * chunks * hw_.flash_chunk_latency_s;
    if (!c_.warpgroup_mma) {
      // one dependent chain a warp's chunk (Hardware::flash_mma_sync_factor, a fit; 1 where not given),
      // shorter for a block alone on its SM (Hardware::flash_mma_sync_alone): where the grid is no
      // larger than the SMs the block scheduler gives each block an SM of its own (H200, session 45,
      // d64 on 128x64 tiles of 4 warps, 16 chunks a block: 32 and 128 blocks 42.2 and 43.2 us, 264
      // blocks, two to an SM, 54.5 us)
      const double alone = c_.blocks <= hw_.sm_count && c_.blocks_per_sm >= 2 ? hw_.flash_mma_sync_alone : 1.0;
      c_.t_mma_sync_chain = (hw_.flash_mma_sync_factor * alone - 1) * (summed + c_.t_chunk_latency);
      return summed + c_.t_chunk_latency + c_.t_mma_sync_chain;
    }
    const double softmax = flash_softmax_time();
    // Overlap never costs more than none: the pipeline's ends are capped where few chunks a block
    // would price two consumers above tensor + softmax in series.
    const double hidden = flash_hidden_share();
    const double overlapped = std::max(c_.t_tensor, softmax) + (1 - hidden) * std::min(c_.t_tensor, softmax);
    if (hidden > 0)  // (NaN-safe: an unpriced, infinite tensor term leaves the ends at 0)
      c_.t_pipeline_ends = std::min((c_.t_tensor + softmax) / std::max(1.0, chunks), std::max(0.0, c_.t_tensor + softmax - overlapped));
    return overlapped + c_.t_pipeline_ends;
  }

  /** A flash forward kernel's softmax side, seconds: FP32 + SFU + the chunks' latency in series. */
  double flash_softmax_time() const { return c_.t_fp32 + c_.t_sfu + c_.t_chunk_latency; }

  /** The share of the shorter of tensor and softmax time (c_.t_tensor; FP32 + SFU + chunk
   *  latency) a flash forward kernel on wgmma hides: with two consumer warpgroups
   *  1 - (1 - Hardware::flash_softmax_hidden) x shorter / longer (the hidden share when the two
   *  are equal; a softmax far shorter than the other consumer's MMAs hides nearly whole), none
   *  with one. Fit (H200, session 44, the 14 flash forward kernels of tests/model/ledger-h200.tsv,
   *  with c_.t_pipeline_ends): median |error| 3.0%, worst 11.1%; the constant share 0.6 gave
   *  6.8% and 16.1% (cross-attention's dk = 192 MMAs hid 90% of its softmax, d = 64's 37%). */
  double flash_hidden_share() const {
    if (c_.warps / 4 < 2 || hw_.flash_softmax_hidden <= 0) return 0.0;
    const double softmax = flash_softmax_time();
    const double longer = std::max(c_.t_tensor, softmax);
    return longer > 0 ? 1 - (1 - hw_.flash_softmax_hidden) * std::min(c_.t_tensor, softmax) / longer : 0.0;
  }

  /** Clusters of `size` blocks along `axis`: the operand tiles that do not vary along it cross
   *  L2 -> SMEM once per cluster; the grid rounds the tiles along `axis` up to whole clusters. */
  void clusters(const std::string& axis, int size) {
    if (!c_.clusterable || spec_.cluster != size) {
      c_.problems.push_back("cluster: only GEMM kernels on the wgmma path of hardware with clusters form clusters (this kernel lowers to " +
                            describe_spec(spec_) + ")");
      return;
    }
    bool varies = false;
    std::vector<const Transfer*> shared;
    for (const auto& t : c_.transfers) {
      if (t.to != MemLevel::smem) continue;
      const AxisList& ax = axes_of(t.array);
      if (std::find(ax.begin(), ax.end(), axis) == ax.end()) shared.push_back(&t);
      else varies = true;
    }
    if (shared.empty() || !varies) {
      c_.problems.push_back("cluster along '" + axis + "': " + (shared.empty() ? "every operand tile varies along it, none is shared" : "no operand tile varies along it"));
      return;
    }
    c_.cluster = size;
    for (const auto* t : shared) {
      c_.cluster_shared.push_back(t->array);
      c_.cluster_saved_bytes += t->bytes * (1 - 1.0 / size);
    }
    c_.l2_to_smem_bytes -= c_.cluster_saved_bytes;
    const std::int64_t n = c_.axes.at(axis).count;
    c_.blocks = c_.blocks / n * ((n + size - 1) / size * size);
  }

  /** Whether `array` runs along the warps' axis (a GEMM's M side: the warps split its tiles). */
  bool along_warps(const std::string& array) const {
    const AxisList& ax = axes_of(array);
    return !warp_axis_.empty() && std::find(ax.begin(), ax.end(), warp_axis_) != ax.end();
  }

  /** KernelCost::t_scalar_staging: the mma.sync GEMM's operand tiles that load_tile copies element
   *  by element (emit/cuda/device/tiles.cuh: 16 bytes of elements a thread, then their SMEM stores,
   *  which the compiler keeps behind the loads, THREADS-strided over the tile). */
  void gemm_scalar_staging() {
    const GemmForm& g = *spec_.gemm;
    const double threads = 32.0 * g.sync_warps(), latency = hw_.l2_loaded_latency_s > 0 ? hw_.l2_loaded_latency_s : hw_.loaded_latency_s();
    double rounds = 0;  // per K chunk of a block
    for (const auto& t : g.tiles)
      if (t.copy_bytes == 0) rounds += std::ceil(static_cast<double>(t.R * t.C) * dtype_bits(g.dtype) / 8.0 / 16.0 / threads);
    if (rounds == 0) return;
    double chunks = std::ceil(static_cast<double>(c_.axes.at(g.K).extent) / static_cast<double>(g.TK));
    for (const auto& a : g.k_outer) chunks *= static_cast<double>(c_.axes.at(a).extent);
    const double slots = static_cast<double>(hw_.sm_count) * std::max(1, c_.blocks_per_sm);
    c_.t_scalar_staging = std::ceil(static_cast<double>(c_.blocks) / slots) * chunks * rounds * latency * g.k_active_fraction;
  }

  /** The share of the tensor-core peak the priced path's MMA instruction reaches: the hardware's
   *  wgmma_fraction or mma_sync_fraction, or the atom's own (MmaShape::fraction: Hopper's 8-bit float
   *  mma.sync runs as f16 HMMAs after conversions); at most the sustained share (the power limit). */
  double tensor_fraction() const {
    double f = c_.warpgroup_mma ? hw_.wgmma_fraction : hw_.mma_sync_fraction;
    const MmaShape* atom = c_.warpgroup_mma ? (spec_.wgmma_mma ? &*spec_.wgmma_mma : nullptr) : (spec_.mma_sync ? &*spec_.mma_sync : nullptr);
    if (atom && atom->fraction > 0) f = atom->fraction;
    return hw_.sustained_tensor_fraction > 0 ? std::min(f, hw_.sustained_tensor_fraction) : f;
  }

  /** KernelCost::t_repack: the copies of the operands TMA cannot read in place (KernelSpec::repacks). */
  void repack_terms() {
    for (const auto& r : spec_.repacks) {
      const AxisList& ax = axes_of(r.array);
      const double rows = elements(ax) / static_cast<double>(sizes_.at(ax.back()));  // read whole, written in rows of `pitch` bytes
      c_.t_repack += (elements(ax) * bytes_of(storage_dtype(d_, r.array, opt_)) + rows * static_cast<double>(r.pitch)) / hw_.hbm.bandwidth_bytes_per_s +
                     hw_.launch_overhead_s;
    }
  }

  /** A gemm kernel on the wgmma path (lowering's sm_90a variant of the gemm strategy). */
  bool gemm_on_wgmma() const { return spec_.strategy == Strategy::gemm && spec_.wgmma; }

  /** The L2 -> SMEM rate of this kernel (bytes/s, whole GPU): TMA's bulk rate on the wgmma GEMM
   *  where the hardware gives one, else the L2 read rate (timing() says why). */
  /** The L2 -> SMEM rate the kernel's blocks land at (bytes/s): `l2_bw` shared by the share
   *  `mem_util` of the SMs that have blocks; on the wgmma GEMM with a per-SM rate known
   *  (Hardware::l2_bulk_sm_bandwidth_bytes_per_s), min(l2_bw, SMs with a tile x that rate): a
   *  grid of fewer tiles than SMs gets more than their share of the device's rate. */
  double landing_rate(double l2_bw, double mem_util) const {
    if (!gemm_on_wgmma() || opt_.two_level || hw_.l2_bulk_sm_bandwidth_bytes_per_s <= 0) return l2_bw * mem_util;
    const double active = std::min(static_cast<double>(hw_.sm_count), static_cast<double>(c_.blocks));
    return std::min(l2_bw, active * hw_.l2_bulk_sm_bandwidth_bytes_per_s);
  }
  double l2_rate() const {
    return gemm_on_wgmma() && hw_.l2_bulk_bandwidth_bytes_per_s > 0 ? hw_.l2_bulk_bandwidth_bytes_per_s : hw_.l2.bandwidth_bytes_per_s;
  }

  /** L2 -> SMEM line fetches per landed byte of a wgmma GEMM's TMA operand tile (1 for any other
   *  array or kernel). L2 hands out 128-byte lines (CUDA C++ Best Practices Guide, "Coalesced
   *  Access to Global Memory": a misaligned row spans one line more); a tile row W bytes wide
   *  (its columns along the array's innermost axis times the element size) whose start is off a
   *  line boundary touches W / 128 + 1 lines. With a row pitch of P bytes, a share f = 1 -
   *  gcd(P, 128) / 128 of the rows start off a boundary, so the factor is 1 + f x 128 / W.
   *  Measured (H200, session 40, matmul a = 1000 in 128x64 tiles, b = 1024, c = 1024 / 1000):
   *  10.0 us with every row on a line, 11.5 with B's rows of 2000 bytes off it (7 rows in 8: W = 128,
   *  factor 1.875), 14.6 with A's too (b = 1000); fp8 1000 x 1000 x 1024 / 1008, 7.9 / 9.8 us.
   *  With a cluster's multicast the extra lines are counted as if each block fetched its own (an
   *  over-count not yet measured).
   *  Only the first wave's tiles pay (the factor's excess is scaled by min(1, SMs / tiles)): its
   *  blocks start together and walk K in lockstep, every step's lines asked for by many SMs at
   *  once; after their first tile the persistent blocks drift apart. Measured (H200, session 43):
   *  64 tiles of 128x128 at 1000 x 4096 x 1000 31.9 us against 28.4 with c = 1024 (one wave,
   *  +12%); 512 tiles of 64x128 at 2000 x 2048 x 2000 43.0 against 42.6 with c = 2048, 128x64
   *  46.6 against 46.3 (3.9 tiles an SM: +1%, the whole excess priced +19%). */
  double line_fetch_factor(const std::string& array) const {
    if (!gemm_on_wgmma() || opt_.two_level) return 1;
    const GemmForm& g = *spec_.gemm;
    auto it = std::find_if(g.tiles.begin(), g.tiles.end(), [&](const GemmTile& t) { return t.array == array; });
    if (it == g.tiles.end()) return 1;
    const AxisList& ax = axes_of(array);
    const double element = bytes_of(storage_dtype(d_, array, opt_));
    constexpr std::int64_t kLine = 128;  // bytes of an L2 line
    const OperandRepack* repacked = spec_.repack(array);  // its copy's rows start on lines
    const auto pitch = repacked ? repacked->pitch : static_cast<std::int64_t>(static_cast<double>(sizes_.at(ax.back())) * element);
    const double off = 1.0 - static_cast<double>(std::gcd(pitch, kLine)) / kLine;
    const double width = static_cast<double>(it->cols == ax.back() ? it->C : it->R) * element;
    const double first_wave = std::min(1.0, static_cast<double>(hw_.sm_count) / static_cast<double>(std::max<std::int64_t>(1, c_.blocks)));
    return 1 + first_wave * off * kLine / std::max<double>(kLine, width);
  }

  /** wgmma instructions per m64 subtile of A and k16 step in the gemm emitter's sm_90a variant:
   *  the B-side tiles' columns (the product of their tiles over axes other than the streamed
   *  ones) in instructions of at most N = 256 (PTX ISA 9.7.15: m64nNk16, N <= 256), side-by-side B
   *  tiles sharing one instruction (SwiGLU's dual GEMM, emit/cuda/render_tma.cpp). */
  double wgmma_per_subtile() const {
    double cols = 0;
    for (const auto& t : c_.transfers) {
      if (t.to != MemLevel::smem || along_warps(t.array)) continue;
      const AxisList& ax = axes_of(t.array);
      double n = tile(ax);
      for (const auto& [sa, size] : plan_.streams())  // every contracted axis walked (several: lower/gemm_form.hpp)
        if (std::find(ax.begin(), ax.end(), sa) != ax.end()) n /= static_cast<double>(c_.axes.at(sa).tile);
      cols += n;
    }
    return std::max(1.0, std::ceil(cols / 256));
  }

  /** Statements that normalise along the streamed axis (online softmax and the like), 0 without a stream. */
  int online_normalisers() const {
    auto st = plan_.stream();
    if (!st) return 0;
    int n = 0;
    for (const auto* w : stmts_) {
      auto it = w->roles.find(st->first);
      n += it != w->roles.end() && it->second.role == AxisRole::normalised;
    }
    return n;
  }

  /** Re-reads served by L2 unless the per-step working set of the blocks in flight exceeds it. */
  void misses() {
    double in_flight = std::min(static_cast<double>(c_.blocks), static_cast<double>(hw_.sm_count) * std::max(1, c_.blocks_per_sm));
    double working = 0, reread = 0;
    for (const auto& t : c_.transfers) {
      if (t.to != MemLevel::smem || t.reuse <= 1) continue;
      const AxisList& ax = axes_of(t.array);
      double slices = 1;
      for (const auto& a : ax)
        if (grouped(a)) slices *= static_cast<double>(c_.axes.at(a).count);
      double t_elems = tile(ax);
      auto st = plan_.stream();
      if (st && plan_.stream_passes() == 2 && std::find(ax.begin(), ax.end(), st->first) != ax.end())
        t_elems *= static_cast<double>(c_.axes.at(st->first).count);  // pass 2 re-reads the whole row
      working += t_elems * bytes_of(storage_dtype(d_, t.array, opt_)) * std::min(slices, in_flight);
      reread += t.bytes - t.bytes / t.reuse;
    }
    l2_miss_share_ = working > hw_.l2.capacity_bytes ? 1 - hw_.l2.capacity_bytes / working : 0;
    c_.hbm_bytes += reread * l2_miss_share_;
  }

  static constexpr int kSimtThreads = 256;                  ///< threads per block of emit/cuda/simt.cpp
  static constexpr int kBaseRegisters = 32;                 ///< indices, pointers, MMA fragments
  static constexpr double kWarpsToHide = 8;                 ///< resident warps per SM for full overlap
  static constexpr double kSmemReservedPerBlock = 1024;     ///< PG: 1 KB of SMEM reserved per block (cc 8.x, 9.0)

  const Program& p_;
  const Diagram& d_;
  const KernelSpec& spec_;
  const KernelPlan& plan_;
  const SizeMap& sizes_;
  const Hardware& hw_;
  const ModelOptions& opt_;
  KernelCost c_;
  std::vector<const StatementWeave*> stmts_;
  std::vector<std::string> order_;  ///< the kernel's axes in declaration order
  std::string warp_axis_, causal_x_;
  double l2_miss_share_ = 0;  ///< share of operand re-reads that miss the L2 (misses())
};

}  // namespace

KernelCost cost_kernel(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave, const Schedule& s,
                       std::size_t kernel, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  auto spec = std::make_shared<const KernelSpec>(lower_kernel_of(p, d, weave, s, kernel, sizes, hw, opt));
  return price_kernel(p, d, weave, std::move(spec), sizes, hw, opt);
}

KernelCost price_kernel(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave, std::shared_ptr<const KernelSpec> spec,
                        const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  return KernelModel(p, d, weave, std::move(spec), sizes, hw, opt).run();
}

ScheduleCost cost_schedule(const Program& p, const Diagram& d, const Schedule& s, const SizeMap& sizes,
                           const Hardware& hw, const ModelOptions& opt) {
  auto weave = weave_analysis(p, d);
  ScheduleCost sc;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    sc.kernels.push_back(cost_kernel(p, d, weave, s, k, sizes, hw, opt));
    const auto& kc = sc.kernels.back();
    sc.t_total += kc.t_total;
    sc.hbm_bytes += kc.hbm_bytes;
    sc.l2_to_smem_bytes += kc.l2_to_smem_bytes;
    sc.flops += kc.flops_tensor + kc.flops_fp32;
  }
  return sc;
}

}  // namespace napkin
