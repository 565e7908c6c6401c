// napkin_soundness: the soundness fuzzer (issue 13). Loops over random diagrams (the extended
// grammar: reductions of reductions, normalisers in expressions, masks, positions, calls); per
// diagram the derived schedule and K random hand-written ones; every illegal one must be refused
// with a located error, every legal one's CPU loop nest must equal the fp64 evaluator.
//
//   napkin_soundness --cpu-seconds N [--jobs J] [--seed S] [--out DIR] [--schedules K]
//                    [--batch B] [--max-size M] [--wall-seconds W]
//   napkin_soundness --cuda-out DIR --count N [--seed S] [--max-size M]
//
// The second form writes, for the device, N random diagrams whose derived kernels emit as CUDA,
// with DIR/bench.sh running `napkin bench` (element-wise checks) on each.
//
// Batches of B diagrams (seeds S, S+1, ...) run in child processes, J at a time, each compiling
// its legal loop nests in one g++ run; a batch that dies by a signal counts as a crash and its
// last step is written as a reproducer. It stops starting batches once the CPU time used (its own
// and its children's, getrusage) reaches N, or the wall time W. Prints the counts; exit 1 on any
// wrong result, internal error, loop nest that does not compile, unlocated refusal or crash.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "tests/soundness/soundness_case.hpp"

namespace fs = std::filesystem;
using napkin::soundness::BatchOptions;
using napkin::soundness::Counts;

namespace {

struct Options {
  double cpu_seconds = 60;
  double wall_seconds = 1e18;
  int jobs = 1;
  std::uint64_t seed = 0;
  fs::path out = "soundness-failures";
  int schedules = 8;
  int batch = 4;
  int max_size = 11;
  fs::path cuda_out;  ///< the device mode: write diagrams for `napkin bench` here
  int count = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "napkin_soundness: error: " << why
            << "\nusage: napkin_soundness --cpu-seconds N [--jobs J] [--seed S] [--out DIR] [--schedules K] [--batch B]"
               " [--max-size M] [--wall-seconds W]\n";
  std::exit(1);
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("missing value after " + a);
    const std::string v = argv[++i];
    try {
      if (a == "--cpu-seconds") o.cpu_seconds = std::stod(v);
      else if (a == "--wall-seconds") o.wall_seconds = std::stod(v);
      else if (a == "--jobs") o.jobs = std::stoi(v);
      else if (a == "--seed") o.seed = std::stoull(v);
      else if (a == "--out") o.out = v;
      else if (a == "--schedules") o.schedules = std::stoi(v);
      else if (a == "--batch") o.batch = std::stoi(v);
      else if (a == "--max-size") o.max_size = std::stoi(v);
      else if (a == "--cuda-out") o.cuda_out = v;
      else if (a == "--count") o.count = std::stoi(v);
      else usage("unknown option " + a);
    } catch (const std::logic_error&) {
      usage("bad value '" + v + "' for " + a);
    }
  }
  if (!o.cuda_out.empty() && o.count < 1) usage("--cuda-out needs --count N (N >= 1)");
  if (o.jobs < 1 || o.batch < 1 || o.schedules < 0 || o.max_size < 1 || o.cpu_seconds < 0) usage("values out of range");
  return o;
}

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }

/** CPU seconds used by this process and its waited-for children (their g++ and runners included). */
double cpu_used() {
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return seconds(self.ru_utime) + seconds(self.ru_stime) + seconds(children.ru_utime) + seconds(children.ru_stime);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/** A batch that died: its last step (work/current.txt: "seed k", the diagram, "=====", the schedule) as a reproducer. */
void record_crash(const Options& o, const fs::path& work, int status) {
  std::istringstream cur(slurp(work / "current.txt"));
  std::uint64_t seed = 0;
  int k = 0;
  cur >> seed >> k;
  std::string rest((std::istreambuf_iterator<char>(cur)), std::istreambuf_iterator<char>());
  const auto sep = rest.find("\n=====\n");
  const std::string diagram = rest.substr(rest.empty() ? 0 : 1, sep == std::string::npos ? std::string::npos : sep - 1);
  const std::string schedule = sep == std::string::npos ? "" : rest.substr(sep + 7);
  const std::string why = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) +
                                                    (WTERMSIG(status) == SIGALRM ? " (hung: over the batch's time limit)" : "")
                                              : "exited with status " + std::to_string(WEXITSTATUS(status));
  napkin::soundness::write_reproducer(o.out, "crash", seed, k, diagram, schedule, "the batch " + why);
}

/** Starts the batch of seeds from `first` in a child; returns its pid. */
pid_t start_batch(const Options& o, std::uint64_t first, const fs::path& work) {
  fs::remove_all(work);
  fs::create_directories(work);
  std::cout.flush();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  alarm(900);  // a hang is a failure, not an unbounded run
  BatchOptions b;
  b.first_seed = first;
  b.diagrams = o.batch;
  b.schedules_per_diagram = o.schedules;
  b.max_size = o.max_size;
  b.out = o.out;
  b.work = work;
  int rc = 0;
  try {
    const Counts c = napkin::soundness::run_batch(b);
    std::ofstream(work / "counts.txt") << c.text();
  } catch (const std::exception& e) {
    std::cerr << "batch from seed " << first << ": " << e.what() << "\n";
    rc = 3;
  }
  std::_Exit(rc);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  if (!o.cuda_out.empty()) {
    const auto c = napkin::soundness::write_cuda_cases(o.seed, o.count, o.max_size, o.cuda_out);
    std::cout << "napkin_soundness: " << c.diagrams << " random diagrams, " << c.written << " emitted as CUDA and written to "
              << o.cuda_out.string() << " (run " << (o.cuda_out / "bench.sh").string() << " NAPKIN_BINARY on the device), "
              << c.declined << " declined with a user error, " << c.internal << " internal errors\n";
    return c.internal ? 1 : 0;
  }
  fs::create_directories(o.out);
  const auto start = std::chrono::steady_clock::now();
  auto wall = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  Counts total;
  std::map<pid_t, fs::path> running;
  std::uint64_t next = o.seed;
  int batches = 0;
  double last_print = 0;
  for (;;) {
    while (static_cast<int>(running.size()) < o.jobs && cpu_used() < o.cpu_seconds && wall() < o.wall_seconds) {
      const fs::path work = o.out / ("work-" + std::to_string(next));
      running[start_batch(o, next, work)] = work;
      next += static_cast<std::uint64_t>(o.batch);
    }
    if (running.empty()) break;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 || !running.count(pid)) continue;
    const fs::path work = running.at(pid);
    running.erase(pid);
    ++batches;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && fs::exists(work / "counts.txt")) {
      total.add(Counts::parse(slurp(work / "counts.txt")));
    } else {
      ++total.crashes;
      record_crash(o, work, status);
    }
    fs::remove_all(work);
    if (wall() - last_print > 60) {
      last_print = wall();
      std::cout << "[" << static_cast<long>(cpu_used()) << " cpu-s, " << static_cast<long>(wall()) << " s] batches " << batches
                << ", diagrams " << total.diagrams << ", schedules " << total.schedules << ", checked " << total.checked
                << ", failures " << total.failures() << std::endl;
    }
  }
  std::cout << "napkin_soundness: seeds " << o.seed << ".." << next - 1 << " (" << batches << " batches of " << o.batch
            << "), " << o.schedules << " random schedules per diagram, axis sizes 1.." << o.max_size << "\n"
            << total.report() << "cpu seconds                       " << static_cast<long>(cpu_used()) << " (wall "
            << static_cast<long>(wall()) << " s, jobs " << o.jobs << ")\n";
  if (total.failures()) std::cout << "reproducers in " << o.out.string() << "\n";
  return total.failures() ? 1 : 0;
}
