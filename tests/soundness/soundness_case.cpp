#include "tests/soundness/soundness_case.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "derive/derivation.hpp"
#include "derive/search.hpp"
#include "diagrams/eval.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/verify.hpp"
#include "emit/cpu_emitter.hpp"
#include "emit/cuda_emitter.hpp"
#include "hardware/hardware.hpp"
#include "tests/support/loop_nest_check.hpp"
#include "tests/support/random_diagram.hpp"
#include "tests/support/random_schedule.hpp"

namespace napkin::soundness {

namespace fs = std::filesystem;

namespace {

/** The fields of Counts in the order they are printed and read back. */
std::vector<std::pair<const char*, long Counts::*>> fields() {
  return {{"diagrams", &Counts::diagrams},   {"rejected", &Counts::rejected},   {"schedules", &Counts::schedules},
          {"derived", &Counts::derived},     {"legal", &Counts::legal},         {"refused", &Counts::refused},
          {"streamed", &Counts::streamed},   {"nested", &Counts::nested},       {"two_pass", &Counts::two_pass},
          {"noisy", &Counts::noisy},         {"grouped", &Counts::grouped},     {"several_kernels", &Counts::several_kernels}, {"calls", &Counts::calls},
          {"gathers", &Counts::gathers},
          {"checked", &Counts::checked},     {"outputs", &Counts::outputs},     {"wrong", &Counts::wrong},
          {"not_compiled", &Counts::not_compiled}, {"internal", &Counts::internal}, {"unlocated", &Counts::unlocated},
          {"crashes", &Counts::crashes}};
}

/** A legal schedule's loop nest waiting for the batch's compile. */
struct Pending {
  std::uint64_t seed = 0;
  int k = 0;  ///< 0: the derived schedule; 1..: random schedule k
  std::string diagram, schedule;
  std::vector<std::string> outputs;
  std::vector<std::vector<double>> expected;
  std::vector<double> tolerance;  ///< per output: relative error allowed
};

/** The derivation the loop-nest property test checks: the paper's two-level model (transfers
 *  objective, no hardware divisibility) at the smallest memory, doubling from 24 elements, that
 *  admits a schedule; nullopt when none does up to 2^30 elements. */
std::optional<Derivation> derive_in_smallest_memory(const Program& p, const Diagram& d, const SizeMap& sizes,
                                                    const Hardware& hw) {
  ModelOptions opt;
  opt.two_level = true;
  SearchOptions so;
  so.objective = SearchOptions::Objective::transfers;
  so.hardware_divisibility = false;
  for (double m = 24; m < 1e9; m *= 2) {
    opt.two_level_capacity_bytes = m * 8;
    try {
      return derive(p, d, sizes, hw, opt, so);
    } catch (const UserError&) {
    }
  }
  return std::nullopt;
}

/** Per output of `d`, the relative error the comparison allows: 1e-9, or 1e3 times the relative
 *  change of the evaluator's result when every input but the integer ones (gather targets) moves by a relative 1e-12 (seeded), where
 *  that is larger. fp64 rounding (1e-16 per operation) moves an output about as much as such a
 *  perturbation times its condition; an output that cancels to rounding noise and is then scaled
 *  up (an l2norm of a sum of a layernorm along its axis: 0 divided by sqrt(eps)) is compared at
 *  its noise level, a well-conditioned one at 1e-9. */
std::map<std::string, double> tolerances(const Program& written, const Diagram& d, const SizeMap& sizes,
                                         const std::map<std::string, Tensor>& inputs,
                                         const std::map<std::string, Tensor>& expected, std::uint64_t seed) {
  std::map<std::string, Tensor> moved = inputs;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1e-12, 1e-12);
  for (auto& [name, t] : moved) {
    const auto* in = d.find_input(name);
    if (in && is_integer_dtype(in->dtype)) continue;  // integer inputs (gather targets) are exact
    for (double& v : t.data) v *= 1 + u(rng);
  }
  const auto again = evaluate(written, d, sizes, moved);
  std::map<std::string, double> tol;
  for (const auto* o : d.outputs()) {
    std::string why;
    const double change = test::relative_error(again.at(o->name).data, expected.at(o->name).data, why);
    tol[o->name] = std::isfinite(change) ? std::max(1e-9, 1e3 * change) : 1e-9;
  }
  return tol;
}

/** Adds what a legal schedule exercises to `c`. */
void tally(Counts& c, const Schedule& s, const Diagram& d) {
  bool streamed = false, nested = false, two_pass = false, grouped = false;
  for (const auto& k : s.kernels) {
    streamed |= !k.streams().empty();
    nested |= k.streams().size() > 1;
    two_pass |= k.stream_passes() == 2;
    for (const auto* a : d.axes()) grouped |= k.group(a->name).value_or(1) > 1;
  }
  c.streamed += streamed;
  c.nested += nested;
  c.two_pass += two_pass;
  c.grouped += grouped;
  c.several_kernels += s.kernels.size() > 1;
  bool call = false, gather = false;
  for (const auto* st : d.statements()) {
    if (!st->expr) continue;
    call |= st->expr->op == Op::call;
    walk(*st->expr, [&](const Expr& e) { gather |= e.kind == Expr::Kind::apply && e.op == Op::pick; });  // gather(L, T; v) expands to pick
  }
  c.calls += call;
  c.gathers += gather;
}

class Batch {
 public:
  explicit Batch(const BatchOptions& o) : o_(o), hw_(load_hardware("h100")) {}

  Counts run() {
    for (int i = 0; i < o_.diagrams; ++i) diagram(o_.first_seed + static_cast<std::uint64_t>(i));
    compile_and_compare();
    return counts_;
  }

 private:
  void note_current(std::uint64_t seed, int k, const std::string& text, const std::string& schedule) {
    std::ofstream(o_.work / "current.txt") << seed << " " << k << "\n" << text << "\n=====\n" << schedule;
  }
  void fail(long Counts::*count, const std::string& kind, std::uint64_t seed, int k, const std::string& text,
            const std::string& schedule, const std::string& what) {
    ++(counts_.*count);
    write_reproducer(o_.out, kind, seed, k, text, schedule, what);
  }

  void diagram(std::uint64_t seed);
  void schedule(const Program& p, const Diagram& d, const SizeMap& sizes, std::uint64_t seed, int k,
                const std::string& text, const std::string& schedule_text);
  void add_case(const std::string& code, const Pending& base, const Diagram& d, const SizeMap& sizes,
                const std::map<std::string, Tensor>& inputs, const std::map<std::string, Tensor>& expected);
  void compile_and_compare();
  void compare(std::size_t id, const std::vector<std::vector<double>>& got);

  BatchOptions o_;
  Hardware hw_;
  Counts counts_;
  std::vector<Pending> pending_;
  // The current diagram's inputs and reference (shared by its schedules).
  std::map<std::string, Tensor> inputs_, expected_;
  std::map<std::string, double> tolerance_;
};

void Batch::diagram(std::uint64_t seed) {
  const std::string text = test::random_diagram(seed, "random", false, o_.max_size, true);
  note_current(seed, 0, text, "");
  DiagnosticEngine diags;
  auto p = load_program_text("random.napkin", text, diags);
  const Diagram* d = diags.has_errors() ? nullptr : &p->select("");
  if (!d || !verify_program(*p, diags, d)) {
    ++counts_.rejected;
    write_reproducer(o_.out, "rejected", seed, 0, text, "", diags.render());
    return;
  }
  ++counts_.diagrams;
  const SizeMap sizes = *resolve_sizes(*d, {}, diags);
  try {
    // The reference: the evaluator of the diagram as written (logsumexp, l2norm as themselves).
    auto written = load_program_text("random.napkin", text, diags, false);
    inputs_.clear();
    const auto bounds = target_bounds(*d, sizes);  // gather targets are drawn in range
    for (const auto* in : d->inputs()) {
      const auto b = bounds.find(in->name);
      inputs_[in->name] = random_input(*in, sizes, 1000 + seed, b == bounds.end() ? std::nullopt : std::optional(b->second));
    }
    expected_ = evaluate(*written, written->select(d->name), sizes, inputs_);
    tolerance_ = tolerances(*written, written->select(d->name), sizes, inputs_, expected_, seed);
    for (const auto& [name, t] : tolerance_) counts_.noisy += t > 1e-9;
  } catch (const InternalError& e) {
    fail(&Counts::internal, "internal", seed, 0, text, "", std::string("evaluate: ") + e.what());
    return;
  }
  try {
    ++counts_.schedules;
    ++counts_.derived;
    std::optional<Derivation> dv = derive_in_smallest_memory(*p, *d, sizes, hw_);
    if (dv) {
      ++counts_.legal;
      Schedule s = dv->chosen.schedule;
      tally(counts_, s, dv->diagram(*d));
      note_current(seed, 0, text, print_schedule(s));
      Pending base{seed, 0, text, print_schedule(s), {}, {}, {}};
      add_case(emit_cpu(*p, dv->diagram(*d), *dv, "napkin_c" + std::to_string(pending_.size()) + "_"), base, *d, sizes,
               inputs_, expected_);
    }
  } catch (const InternalError& e) {
    fail(&Counts::internal, "internal", seed, 0, text, "", std::string("derive: ") + e.what());
  }
  std::set<std::string> seen;
  for (int k = 1; k <= o_.schedules_per_diagram; ++k) {
    const std::string s = test::random_schedule(seed * 1000 + static_cast<std::uint64_t>(k), *p, *d, sizes);
    // The name line differs per k; the rest decides whether two draws are the same schedule.
    if (!seen.insert(s.substr(s.find('\n'))).second) continue;
    schedule(*p, *d, sizes, seed, k, text, s);
  }
}

void Batch::schedule(const Program& p, const Diagram& d, const SizeMap& sizes, std::uint64_t seed, int k,
                     const std::string& text, const std::string& schedule_text) {
  ++counts_.schedules;
  note_current(seed, k, text, schedule_text);
  DiagnosticEngine diags;
  SourceManager sm;
  try {
    auto s = parse_schedule(*sm.add("random.schedule", schedule_text), diags);
    std::optional<CheckedSchedule> checked;
    if (s) checked = check_schedule(p, d, *s, sizes, hw_, {}, diags);
    if (!checked) {
      bool located = diags.has_errors();
      for (const auto& dg : diags.diagnostics())
        if (dg.severity == Severity::error) located &= dg.loc.valid();
      if (located) ++counts_.refused;
      else fail(&Counts::unlocated, "unlocated", seed, k, text, schedule_text, "refused without a located error:\n" + diags.render());
      return;
    }
    ++counts_.legal;
    tally(counts_, *s, d);
    Derivation dv = derive_given(p, d, sizes, hw_, result_of(*s, *checked));
    Pending base{seed, k, text, schedule_text, {}, {}, {}};
    add_case(emit_cpu(p, dv.diagram(d), dv, "napkin_c" + std::to_string(pending_.size()) + "_"), base, d, sizes, inputs_,
             expected_);
  } catch (const InternalError& e) {
    fail(&Counts::internal, "internal", seed, k, text, schedule_text, e.what());
  } catch (const UserError& e) {
    fail(&Counts::unlocated, "unlocated", seed, k, text, schedule_text, std::string("UserError after the check: ") + e.what());
  }
}

void Batch::add_case(const std::string& code, const Pending& base, const Diagram& d, const SizeMap& sizes,
                     const std::map<std::string, Tensor>& inputs, const std::map<std::string, Tensor>& expected) {
  const std::size_t id = pending_.size();
  std::ofstream(o_.work / ("case" + std::to_string(id) + ".cpp")) << code;
  test::write_case_inputs(o_.work, id, d, sizes, inputs, expected);
  Pending c = base;
  for (const auto* out : d.outputs()) {
    c.outputs.push_back(out->name);
    c.expected.push_back(expected.at(out->name).data);
    c.tolerance.push_back(tolerance_.at(out->name));
  }
  pending_.push_back(std::move(c));
}

/** Runs a shell command; its exit status (128 + signal when killed by one). */
int shell(const std::string& command) {
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
}

void Batch::compile_and_compare() {
  if (pending_.empty()) return;
  const std::string dir = o_.work.string();
  shell("cd " + dir + " && ls case*.cpp | xargs -n 12 timeout 600 g++ -std=c++17 -O0 -w -c 2> compile.log");
  std::vector<std::size_t> compiled;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    // A case the batch's g++ run did not compile (one before it in the run may have stopped it) compiles alone.
    const std::string name = "case" + std::to_string(i);
    const int rc = fs::exists(o_.work / (name + ".o")) ? 0 : shell("cd " + dir + " && timeout 300 g++ -std=c++17 -O0 -w -c " + name + ".cpp 2> " + name + ".log");
    if (rc == 0 && fs::exists(o_.work / (name + ".o"))) {
      compiled.push_back(i);
      continue;
    }
    std::ifstream log(o_.work / (name + ".log"));
    std::stringstream why;
    why << "the emitted loop nest does not compile (g++ exit status " << rc << (rc == 124 ? ": over 300 s" : "") << "):\n"
        << log.rdbuf();
    fail(&Counts::not_compiled, "not-compiled", pending_[i].seed, pending_[i].k, pending_[i].diagram, pending_[i].schedule,
         why.str());
    fs::copy_file(o_.work / (name + ".cpp"),
                  o_.out / ("not-compiled-" + std::to_string(pending_[i].seed) + "-" + std::to_string(pending_[i].k) + ".cpp"),
                  fs::copy_options::overwrite_existing);
  }
  if (compiled.empty()) return;
  test::write_driver(o_.work, compiled);
  std::string objects;
  for (std::size_t i : compiled) objects += " case" + std::to_string(i) + ".o";
  if (shell("cd " + dir + " && g++ -O0 -c driver.cpp -o driver.o && g++" + objects + " driver.o -o runner 2> link.log") != 0) {
    fail(&Counts::not_compiled, "not-linked", pending_[0].seed, pending_[0].k, pending_[0].diagram, pending_[0].schedule,
         "the batch's loop nests do not link (" + dir + "/link.log)");
    return;
  }
  shell("cd " + dir + " && timeout 300 ./runner " + dir + " > run.log 2>&1");
  for (std::size_t i : compiled) {
    const fs::path out = o_.work / ("out" + std::to_string(i) + ".bin");
    // A case the whole run did not reach (one before it crashed) runs alone.
    if (!fs::exists(out)) shell("cd " + dir + " && timeout 60 ./runner " + dir + " " + std::to_string(i) + " > /dev/null 2>&1");
    compare(i, test::read_outputs(out));
  }
}

void Batch::compare(std::size_t id, const std::vector<std::vector<double>>& got) {
  const Pending& c = pending_[id];
  ++counts_.checked;
  std::string what;
  if (got.size() != c.outputs.size()) what = "the loop nest crashed or hung (no outputs written)";
  for (std::size_t o = 0; what.empty() && o < c.outputs.size(); ++o) {
    std::string why;
    ++counts_.outputs;
    const double err = test::relative_error(got[o], c.expected[o], why);
    if (!(err < c.tolerance[o])) {
      std::ostringstream m;
      m << "output " << c.outputs[o] << ": relative error " << err << " " << why << " (allowed " << c.tolerance[o] << ")";
      what = m.str();
    }
  }
  if (!what.empty()) fail(&Counts::wrong, "wrong", c.seed, c.k, c.diagram, c.schedule, what);
}

}  // namespace

void Counts::add(const Counts& o) {
  for (const auto& [name, f] : fields()) this->*f += o.*f;
}

std::string Counts::text() const {
  std::string s;
  for (const auto& [name, f] : fields()) s += std::string(name) + " " + std::to_string(this->*f) + "\n";
  return s;
}

Counts Counts::parse(const std::string& text) {
  Counts c;
  std::istringstream in(text);
  std::string name;
  long value = 0;
  while (in >> name >> value)
    for (const auto& [n, f] : fields())
      if (name == n) c.*f = value;
  return c;
}

std::string Counts::report() const {
  std::ostringstream r;
  r << "diagrams                          " << diagrams << "  (" << rejected << " generated diagrams the verifier refused)\n"
    << "schedules tried                   " << schedules << "  (" << derived << " derived, " << schedules - derived
    << " random hand-written)\n"
    << "legal                             " << legal << "  (" << streamed << " streaming, " << nested << " nested streams, "
    << two_pass << " two-pass, " << grouped << " grouped, " << several_kernels << " of several kernels, " << calls
    << " with calls, " << gathers << " with gathers)\n"
    << "refused with a located error      " << refused << "\n"
    << "checked against the evaluator     " << checked << "  (" << outputs << " outputs; " << noisy
    << " diagram outputs amplify rounding, compared at their noise level)\n"
    << "wrong results                     " << wrong << "\n"
    << "emitted code that did not compile " << not_compiled << "\n"
    << "internal errors                   " << internal << "\n"
    << "refusals without a location       " << unlocated << "\n"
    << "crashes                           " << crashes << "\n";
  return r.str();
}

void write_reproducer(const fs::path& out, const std::string& kind, std::uint64_t seed, int k, const std::string& diagram,
                      const std::string& schedule, const std::string& what) {
  fs::create_directories(out);
  const std::string base = kind + "-" + std::to_string(seed) + "-" + std::to_string(k);
  std::ofstream(out / (base + ".napkin")) << diagram;
  if (!schedule.empty()) std::ofstream(out / (base + ".schedule")) << schedule;
  std::ofstream(out / (base + ".txt")) << "seed " << seed << ", schedule " << k << " (0: derived)\n" << what << "\n";
}

Counts run_batch(const BatchOptions& o) { return Batch(o).run(); }

CudaCounts write_cuda_cases(std::uint64_t first_seed, int count, int max_size, const fs::path& dir) {
  fs::create_directories(dir);
  const Hardware h100 = load_hardware("h100");
  CudaCounts c;
  std::string files;
  for (int i = 0; i < count; ++i) {
    const std::uint64_t seed = first_seed + static_cast<std::uint64_t>(i);
    // Every array in fp32: the dtypes the CUDA emitter stores, and a call's argument as its callee takes it.
    static const std::regex dtype(": (bf16|fp16|tf32|fp8e4m3|fp8e5m2)");
    const std::string text = std::regex_replace(test::random_diagram(seed, "random", false, max_size, true), dtype, ": fp32");
    DiagnosticEngine diags;
    auto p = load_program_text("random.napkin", text, diags);
    const Diagram* d = diags.has_errors() ? nullptr : &p->select("");
    if (!d || !verify_program(*p, diags, d)) continue;
    ++c.diagrams;
    try {
      const SizeMap sizes = *resolve_sizes(*d, {}, diags);
      const Derivation dv = derive(*p, *d, sizes, h100);
      emit_cuda(*p, *d, dv, h100);
      const std::string name = "random-" + std::to_string(seed) + ".napkin";
      std::ofstream(dir / name) << text;
      files += " " + name;
      ++c.written;
    } catch (const UserError& e) {
      ++c.declined;
      std::ofstream(dir / "declined.txt", std::ios::app) << "seed " << seed << ": " << e.what() << "\n";
    } catch (const InternalError& e) {
      ++c.internal;
      write_reproducer(dir, "internal", seed, 0, text, "", std::string("derive or emit_cuda: ") + e.what());
    }
  }
  // bench.sh: napkin bench on every file, JOBS at a time (each in a work folder of its own; the
  // sample is about correctness, so concurrent runs' timings do not matter), then the tally.
  std::ofstream(dir / "bench.sh")
      << "#!/usr/bin/env bash\n# napkin bench (element-wise checks against the fp32 GPU reference and the fp64 evaluator) on each\n"
         "# random diagram; usage: [JOBS=8] bench.sh NAPKIN_BINARY. Exit 1 if any is not correct.\n"
         "set -u\ncd \"$(dirname \"$0\")\"\nnapkin=$1\n"
         "one() { \"$napkin\" bench \"$1\" --runs 20 --workdir \"work-${1%.napkin}\" > \"${1%.napkin}.log\" 2>&1; echo \"$1 exit $?\"; }\n"
         "export -f one; export napkin\n"
         "printf '%s\\n'" << files << " | xargs -P \"${JOBS:-8}\" -I{} bash -c 'one {}' | sort > results.txt\n"
         "correct=$(grep -l 'result: correct' random-*.log | wc -l); wrong=$(grep -l 'INCORRECT' random-*.log | wc -l)\n"
         "echo \"diagrams $(wc -l < results.txt): correct $correct, incorrect $wrong, other failures $(grep -vc ' exit 0$' results.txt)\"\n"
         "for f in $(grep -l 'INCORRECT' random-*.log); do echo \"== $f\"; grep -E '^check' \"$f\"; done\n"
         "for f in $(grep -v ' exit 0$' results.txt | cut -d' ' -f1); do echo \"== $f\"; tail -5 \"${f%.napkin}.log\"; done\n"
         "grep -q -v ' exit 0$' results.txt && exit 1\nexit 0\n";
  fs::permissions(dir / "bench.sh", fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add);
  return c;
}

}  // namespace napkin::soundness
