/** \file soundness_case.hpp
 *  One batch of the soundness fuzzer (tests/soundness/soundness.cpp), run in a child process:
 *  for each seed, a random diagram of the extended grammar (tests/support/random_diagram.hpp),
 *  its derived schedule (paper's two-level model, smallest memory that admits one, as the
 *  loop-nest property test) and random hand-written schedules (tests/support/random_schedule.hpp).
 *  Each illegal schedule must be refused by check_schedule with a located error; each legal one
 *  is emitted as a CPU loop nest (emit/cpu_emitter.hpp), compiled with the batch's others in one
 *  g++ run, and compared element-wise with the fp64 evaluator (relative error under 1e-9).
 *  Every failure is written to the output folder as a reproducer: <kind>-<seed>-<k>.napkin,
 *  .schedule (`napkin emit FILE --target cpu --schedule S`) and .txt (what went wrong).
 */
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace napkin::soundness {

/** What a batch did. Failures: wrong, not_compiled, internal, unlocated, crashes. */
struct Counts {
  long diagrams = 0;          ///< random diagrams generated and verified
  long rejected = 0;          ///< generated diagrams the verifier refused (a generator bug)
  long schedules = 0;         ///< schedules tried: derived ones and distinct random ones
  long derived = 0;           ///< of which derived
  long legal = 0;             ///< accepted by check_schedule (derived ones included)
  long streamed = 0;          ///< legal ones with a kernel that streams
  long nested = 0;            ///< legal ones with nested streams
  long two_pass = 0;          ///< legal ones with a two-pass stream
  long grouped = 0;           ///< legal ones with a group of size > 1
  long several_kernels = 0;   ///< legal ones of more than one kernel
  long calls = 0;             ///< legal ones of a diagram with a call
  long gathers = 0;           ///< legal ones of a diagram with a gather (int32 targets)
  long refused = 0;           ///< refused with a located error
  long checked = 0;           ///< loop nests compared with the evaluator
  long outputs = 0;           ///< outputs compared
  long noisy = 0;             ///< diagram outputs that amplify rounding (compared at their noise level, not 1e-9)
  long wrong = 0;             ///< loop nests whose output differs (or that crashed or hung)
  long not_compiled = 0;      ///< emitted loop nests g++ rejected
  long internal = 0;          ///< InternalError anywhere (derive, check, emit, evaluate)
  long unlocated = 0;         ///< refusals without a located error
  long crashes = 0;           ///< batches that died by a signal (counted by the parent)

  void add(const Counts& o);
  long failures() const { return wrong + not_compiled + internal + unlocated + crashes; }
  std::string text() const;          ///< "name value" lines, for the parent to read back
  static Counts parse(const std::string& text);
  std::string report() const;        ///< the summary printed at the end
};

struct BatchOptions {
  std::uint64_t first_seed = 0;
  int diagrams = 4;                  ///< seeds first_seed .. first_seed + diagrams - 1
  int schedules_per_diagram = 8;     ///< random schedules drawn per diagram (duplicates skipped)
  int max_size = 11;                 ///< axis sizes 1..max_size
  std::filesystem::path out;         ///< reproducers
  std::filesystem::path work;        ///< scratch folder of this batch (removed by the caller)
};

/** Runs one batch; writes work/current.txt before each step that could crash (the parent turns
 *  it into a reproducer when the batch dies). */
Counts run_batch(const BatchOptions& o);

/** What write_cuda_cases did. */
struct CudaCounts {
  long diagrams = 0;   ///< generated and verified
  long written = 0;    ///< derived and emitted as CUDA: written for `napkin bench`
  long declined = 0;   ///< a located or user error on the way (no schedule fits, a dtype the emitter cannot store)
  long internal = 0;   ///< InternalError (a reproducer is written)
};

/** For the device: `count` random diagrams (seeds from `first_seed`, axis sizes 1..max_size)
 *  derived for the H100 and emitted as CUDA, written as dir/random-<seed>.napkin with
 *  dir/bench.sh, which runs `napkin bench` (its element-wise checks) on each. */
CudaCounts write_cuda_cases(std::uint64_t first_seed, int count, int max_size, const std::filesystem::path& dir);

/** Writes a reproducer: out/<kind>-<seed>-<k>.{napkin,schedule,txt}. */
void write_reproducer(const std::filesystem::path& out, const std::string& kind, std::uint64_t seed, int k,
                      const std::string& diagram, const std::string& schedule, const std::string& what);

}  // namespace napkin::soundness
