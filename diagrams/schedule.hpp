/** \file schedule.hpp
 *  Schedules: the relabelling of a diagram, written in the syntax of DESIGN.md ("Relabelling: the
 *  schedule"), parsed, printed (round trip: parse(print(s)) == s) and checked by derive/.
 *
 *      schedule flash for attention
 *      kernel flash
 *        fuse S, P, O       # statements computed by one kernel; S and P never leave the SM
 *        weave b, h         # one thread block per index (group size 1)
 *        group q by 128     # q tile per thread block
 *        stream x by 64     # x in chunks of 64, carried by an accumulator
 *                           # (`stream v by 1024 twice`: a first pass folds statistics, a second maps)
 *        warps 4            # warps per thread block, splitting the first grouped axis
 *                           # (`warps 8 pingpong`: a gemm's two consumer warpgroups take output
 *                           # tiles in turn instead of splitting each tile's rows)
 *        cluster q by 2     # thread-block clusters of 2 blocks along q: the tiles that do not vary
 *                           # along q are loaded once per cluster (TMA multicast, PTX ISA 9.7.9.25)
 *
 *  `kernel NAME` lines separate the kernels, in execution order; directives before any `kernel`
 *  line form one kernel named after the schedule. Every axis of a kernel that no directive names
 *  is kept whole inside each thread block.
 */
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/diagnostics.hpp"
#include "diagrams/source.hpp"

namespace napkin {

struct Directive {
  enum class Kind { fuse, weave, group, stream, warps, cluster };
  Kind kind = Kind::fuse;
  std::vector<std::string> names;      ///< statements (fuse) or axes (weave, group, stream)
  std::vector<SourceLoc> name_locs;
  std::int64_t size = 0;               ///< group or stream size in elements, warps per block, or blocks per cluster
  int passes = 1;                      ///< stream: 2 for `stream x by 64 twice` (statistics, then a map)
  std::string comment;                 ///< trailing comment, without '#'
  SourceLoc loc;
  /** warps: `warps 8 pingpong`, the consumer warpgroups take whole output tiles in turn (CUTLASS's
   *  "ping-pong" Hopper GEMMs; FlashAttention-3 §3.1 names the scheduling) instead of splitting
   *  one tile's rows between them (lower/gemm_form.hpp GemmForm::pingpong). */
  bool pingpong = false;
  bool operator==(const Directive&) const = default;
};

/** One kernel of a schedule: the statements it fuses and the partition of its axes. */
struct KernelPlan {
  std::string name;
  std::vector<Directive> directives;
  SourceLoc loc;
  bool operator==(const KernelPlan&) const = default;

  std::vector<std::string> fused() const;
  /** Group size of `axis` (1 for weave), or nullopt when it is not grouped. */
  std::optional<std::int64_t> group(const std::string& axis) const;
  /** The streamed axis and its stream size, if any (the innermost when several are nested). */
  std::optional<std::pair<std::string, std::int64_t>> stream() const;
  /** Every streamed axis with its size, outermost loop first (nested streams fold a contraction
   *  over several axes, e.g. `stream g by 1`, `stream d by 64`). */
  std::vector<std::pair<std::string, std::int64_t>> streams() const;
  bool streams_axis(const std::string& axis) const;
  int stream_passes() const;  ///< 1, or 2 for a two-pass stream
  int warps() const;  ///< 4 unless given
  bool pingpong() const;  ///< `warps N pingpong` (Directive::pingpong)
  /** The axis whose adjacent thread blocks form a cluster, and the blocks per cluster, if any. */
  std::optional<std::pair<std::string, std::int64_t>> cluster() const;
  const Directive* find(Directive::Kind k, const std::string& which = "") const;
};

struct Schedule {
  std::string name;
  std::string diagram;
  std::vector<KernelPlan> kernels;
  std::vector<std::string> comments;  ///< comment lines before the `schedule` line
  SourceLoc loc;
  bool operator==(const Schedule&) const = default;
};

/** Parses a schedule file; syntax errors are located diagnostics (at most one per line), and so
 *  is an axis that the weave lines of one kernel name twice; returns nullopt when any was reported. */
std::optional<Schedule> parse_schedule(const SourceFile& src, DiagnosticEngine& diags);
/** Canonical text of one directive, without its comment: `group q by 128`, `weave b, h`. */
std::string directive_text(const Directive& d);
/** Canonical text of a schedule (always with `kernel` lines). */
std::string print_schedule(const Schedule& s);

}  // namespace napkin
