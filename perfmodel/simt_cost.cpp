// The SIMT price (contract in simt_cost.hpp): the emitted loops counted, statement by statement.
#include "perfmodel/simt_cost.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "lower/loop_band.hpp"

namespace napkin {

namespace {

/** Work of one evaluation of an expression by one thread. */
struct Work {
  double flops = 0, sfu = 0, bytes = 0, loads = 0;
  /** Dependent rounds of loads one thread waits for, one after another: the loads of one
   *  iteration are in flight together, a loop's iterations follow each other. */
  double rounds = 0;
  bool looped = false;  ///< holds a loop: its rounds follow the rest of the iteration's instead of joining them
  Work& operator+=(const Work& o) {
    flops += o.flops, sfu += o.sfu, bytes += o.bytes, loads += o.loads, rounds += o.rounds, looped = looped || o.looped;
    return *this;
  }
  Work times(double n) const { return {flops * n, sfu * n, bytes * n, loads * n, rounds * n, looped}; }
};

/** Bytes of the sector a global load is served in (CUDA C++ Best Practices Guide, "Coalesced
 *  Access to Global Memory": 32-byte segments). */
constexpr double kSectorBytes = 32;

class Counter {
 public:
  Counter(const Diagram& d, const SizeMap& sizes, const ModelOptions& opt, std::string innermost)
      : d_(d), sizes_(sizes), opt_(opt), inner_(std::move(innermost)) {}

  Work of(const Expr& e) {
    Work w;
    if (e.kind == Expr::Kind::number) return w;
    if (e.kind == Expr::Kind::ref) {
      const AxisList* axes = d_.array_axes(e.name);
      if (!axes) return w;  // an axis's size: a scalar in a register
      // Consecutive threads step along inner_: a load of an array without it (or with its index a
      // loop's) is one address for the warp, a broadcast; else the threads' addresses are the
      // array's stride along inner_ apart, and each thread pulls min(32, stride x element) bytes
      // of 32-byte sectors (coalesced at stride 1).
      const double element = dtype_bits(storage_dtype(d_, e.name, opt_)) / 8.0;
      auto at = std::find(axes->begin(), axes->end(), inner_);
      if (shadowed_ > 0 || at == axes->end()) {
        w.bytes = element / 32;
      } else {
        double stride = 1;
        for (auto a = at + 1; a != axes->end(); ++a) stride *= static_cast<double>(sizes_.at(*a));
        w.bytes = std::min(kSectorBytes, stride * element);
      }
      w.loads = 1;
      // A new 32-byte sector each time, unless a loop walks the array's innermost axis one
      // element per iteration: then the sector's other elements come from L1 (their rounds not counted).
      w.rounds = !loop_axes_.empty() && !axes->empty() && loop_axes_.back() == axes->back() ? element / kSectorBytes : 1;
      arrays_.insert(e.name);
      return w;
    }
    // Inside a loop over the innermost axis its index is the loop's, the same in every thread of a
    // warp: loads there are broadcasts, not coalesced.
    const bool shadows = std::find(e.axes.begin(), e.axes.end(), inner_) != e.axes.end() && !is_positional(e.op) && e.op != Op::pick;
    shadowed_ += shadows;
    const bool loop = !e.axes.empty() && !is_positional(e.op) && e.op != Op::pick;
    if (loop) loop_axes_.push_back(e.axes.back());
    Work args;
    double together = 0;  // loads of this iteration outside loops: in flight at once
    for (const auto& a : e.args) {
      Work wa = of(*a);
      if (!wa.looped) together = std::max(together, wa.rounds), wa.rounds = 0;
      args += wa;
    }
    args.rounds += together;
    args.looped = loop || args.looped;
    if (loop) loop_axes_.pop_back();
    shadowed_ -= shadows;
    double n = 1;  // the steps the loops take: a band mask among the factors leaves out the rest (lower/loop_band.hpp)
    for (const auto& a : e.axes) {
      const auto band = loop_band(e, a);
      n *= band ? loop_band_steps(*band, sizes_.at(a), sizes_.at(band->outer)) : static_cast<double>(sizes_.at(a));
    }
    if (const auto mw = map_work(e.op)) return args += Work{mw->fp32_flops, mw->sfu_ops, 0};
    switch (e.op) {
      case Op::contract: case Op::sum: case Op::max: case Op::mean: return (args += Work{static_cast<double>(std::max<std::size_t>(1, e.args.size())), 0, 0}).times(n);
      case Op::softmax: return args.times(2 * n + 1) += Work{3 * n, n + 1, 0};
      case Op::layernorm: return args.times(3 * n + 1) += Work{4 * n + 4, 1, 0};
      case Op::rmsnorm: return args.times(2 * n + 1) += Work{2 * n + 3, 1, 0};
      case Op::pow: return args += Work{2, 2, 0};  // exp2(p * log2(x))
      case Op::pick: return args += Work{2, 0, 0};  // a gather's compare and select
      default: return args += Work{1, 0, 0};  // + - * / neg abs step min max relu mask causal band pos cast
    }
  }
  const std::set<std::string>& arrays() const { return arrays_; }

 private:
  const Diagram& d_;
  const SizeMap& sizes_;
  const ModelOptions& opt_;
  std::string inner_;
  int shadowed_ = 0;  ///< loops over the innermost axis around the node being counted
  std::vector<std::string> loop_axes_;  ///< the innermost axis of each loop around the node
  std::set<std::string> arrays_;
};

/** Loads issued per second by the whole GPU: 32 LD/ST lanes per SM per clock, one warp-wide load
 *  per clock (NVIDIA A100 and H100 whitepapers: 8 LD/ST units in each of the SM's 4 partitions). */
double load_rate(const Hardware& hw) { return hw.clock_hz * hw.sm_count * 32.0; }

double elements_of(const AxisList& axes, const SizeMap& sizes) {
  double n = 1;
  for (const auto& a : axes) n *= static_cast<double>(sizes.at(a));
  return n;
}

}  // namespace

std::optional<MapWork> map_work(Op op) {
  switch (op) {
    case Op::exp: case Op::log: case Op::tanh: case Op::rsqrt: case Op::sqrt: return MapWork{1, 1};
    case Op::sigmoid: return MapWork{3, 2};
    case Op::silu: return MapWork{4, 2};
    case Op::erf: return MapWork{64, 1};
    case Op::gelu: return MapWork{42, 2};
    case Op::gelu_tanh: return MapWork{10, 2};
    default: return std::nullopt;
  }
}

SimtCost price_simt(const Diagram& d, const std::vector<std::string>& statements, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt) {
  SimtCost c;
  double t_hbm = 0, t_l2 = 0, t_compute = 0, t_latency = 0;
  for (const auto& name : statements) {
    const Statement& st = *d.find_statement(name);
    Counter count(d, sizes, opt, st.axes.empty() ? std::string() : st.axes.back());
    const Work w = count.of(*st.expr);
    const double E = elements_of(st.axes, sizes);
    double hbm = E * dtype_bits(storage_dtype(d, name, opt)) / 8.0;
    for (const auto& a : count.arrays()) hbm += elements_of(*d.array_axes(a), sizes) * dtype_bits(storage_dtype(d, a, opt)) / 8.0;
    const double th = hbm / hw.hbm.bandwidth_bytes_per_s;
    const double tl = std::max(E * w.bytes / hw.l2.bandwidth_bytes_per_s, E * w.loads / load_rate(hw));
    const double tc = E * w.flops / hw.fp32_flops_per_s + E * w.sfu / hw.sfu_ops_per_s;
    // Little's law over the threads resident at once: each waits w.rounds loads one after another.
    const double resident = std::min(E, static_cast<double>(hw.sm_count) * hw.max_warps_per_sm * 32);
    const double tlat = std::ceil(E / std::max(1.0, resident)) * w.rounds * hw.hbm_latency_s;
    c.flops_fp32 += E * w.flops, c.sfu_ops += E * w.sfu, c.l2_bytes += E * w.bytes, c.hbm_bytes += hbm;
    c.elements += static_cast<std::int64_t>(E);
    t_hbm += th, t_l2 += tl, t_compute += tc, t_latency += tlat;
    c.t_total += std::max({th, tl, tc, tlat}) + hw.launch_overhead_s;
    c.t_launch += hw.launch_overhead_s;
  }
  c.t_hbm = t_hbm, c.t_l2 = t_l2, c.t_compute = t_compute, c.t_latency = t_latency;
  c.bound = t_latency >= std::max({t_hbm, t_l2, t_compute}) ? "SIMT: HBM latency (each thread's loop waits for its loads one iteration after another)"
            : t_compute >= std::max(t_hbm, t_l2)           ? "SIMT: FP32 and special-function units, one thread per element"
            : t_l2 >= t_hbm                                ? "SIMT: loads (no SMEM tiles, operands re-read per element: L2 bytes or LD/ST issue)"
                                                           : "SIMT: HBM bandwidth";
  return c;
}

}  // namespace napkin
