#include "kernels/process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "diagrams/diagnostics.hpp"

extern char** environ;

namespace napkin {

std::string ChildStatus::describe() const {
  if (!started) return "could not start: " + error;
  if (signal != 0) return "killed by signal " + std::to_string(signal);
  return "exit status " + std::to_string(exit_code);
}

namespace {

/** posix_spawn_file_actions_t with its destroy on every path out. */
struct FileActions {
  posix_spawn_file_actions_t fa;
  FileActions() { posix_spawn_file_actions_init(&fa); }
  ~FileActions() { posix_spawn_file_actions_destroy(&fa); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
};

void check(int rc, const char* what, const std::string& path) {
  if (rc != 0) throw UserError(std::string("cannot ") + what + " '" + path + "' for a child process: " + std::strerror(rc));
}

}  // namespace

ChildStatus run_child(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path) {
  if (argv.empty()) throw InternalError("run_child: empty argument vector");
  // Open the output files here, so that a bad path is a clear error rather than a child that
  // cannot start; the child gets them as its descriptors 1 and 2.
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  const int out_fd = ::open(out_path.c_str(), flags, 0644);
  if (out_fd < 0) check(errno, "open", out_path);
  const int err_fd = err_path == out_path ? out_fd : ::open(err_path.c_str(), flags, 0644);
  if (err_fd < 0) {
    const int e = errno;
    ::close(out_fd);
    check(e, "open", err_path);
  }
  ChildStatus st;
  pid_t pid = 0;
  int rc = 0;
  {
    FileActions actions;
    posix_spawn_file_actions_addopen(&actions.fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions.fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&actions.fa, err_fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    rc = posix_spawnp(&pid, args[0], &actions.fa, nullptr, args.data(), environ);
  }
  ::close(out_fd);
  if (err_fd != out_fd) ::close(err_fd);
  if (rc != 0) {
    st.error = argv[0] + ": " + std::strerror(rc);
    return st;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw InternalError(std::string("waitpid: ") + std::strerror(errno));
  st.started = true;
  if (WIFEXITED(status)) st.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) st.signal = WTERMSIG(status);
  return st;
}

std::string shell_quoted(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& a : argv) {
    if (!line.empty()) line += ' ';
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      line += a;
      continue;
    }
    line += '\'';
    for (char c : a) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

}  // namespace napkin
