#include "diagrams/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>

#include "diagrams/diagnostics.hpp"

namespace napkin {

namespace fs = std::filesystem;

namespace {

std::string shown_name(const std::string& path) { return path == "-" ? "standard input" : "'" + path + "'"; }

/** Closes a descriptor when leaving scope. */
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string read_bounded(int fd, const std::string& path) {
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return out;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw UserError("cannot read " + shown_name(path) + ": " + std::strerror(errno));
    }
    if (out.size() + static_cast<std::size_t>(n) > kMaxFileBytes)
      throw UserError("cannot read " + shown_name(path) + ": larger than 64 MiB (the limit on every file napkin reads)");
    out.append(buf, static_cast<std::size_t>(n));
  }
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw UserError("cannot write '" + path + "': " + std::strerror(n < 0 ? errno : EIO));
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

/** Follows symbolic links by their text (a dangling link gives the path it would create). */
std::string resolve_links(const std::string& path) {
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    std::error_code ec;
    fs::path to = fs::read_symlink(p, ec);
    if (ec) throw UserError("cannot write '" + path + "': " + ec.message());
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  throw UserError("cannot write '" + path + "': too many levels of symbolic links");
}

/** 1 or 2 when `st` is the file behind napkin's standard output or error, else -1. */
int own_stream(const struct stat& st) {
  for (int fd : {1, 2}) {
    struct stat s {};
    if (::fstat(fd, &s) == 0 && s.st_dev == st.st_dev && s.st_ino == st.st_ino) return fd;
  }
  return -1;
}

/** Creates `folder` and its missing parents, each registered as a live temporary (outermost
 *  first) before it exists, so that an interrupt can remove it again. */
std::vector<std::unique_ptr<LiveTemporary>> create_folders(const std::string& folder) {
  std::vector<std::unique_ptr<LiveTemporary>> made;
  fs::path so_far;
  for (const auto& part : fs::path(folder).lexically_normal()) {
    so_far /= part;
    if (part.empty() || part == "." || part == ".." || part == so_far.root_path()) continue;
    struct stat st {};
    if (::stat(so_far.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) throw UserError("cannot create folder '" + folder + "': '" + so_far.string() + "' is not a folder");
      continue;
    }
    auto reg = std::make_unique<LiveTemporary>(so_far.string(), LiveTemporary::Kind::folder);
    if (::mkdir(so_far.c_str(), 0777) != 0) {
      if (errno == EEXIST) continue;  // made by someone else meanwhile: not ours to remove
      int e = errno;
      reg->release();
      for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir((*it)->path().c_str());
      throw UserError("cannot create folder '" + folder + "': " + std::strerror(e));
    }
    made.push_back(std::move(reg));
  }
  return made;
}

void remove_folders(std::vector<std::unique_ptr<LiveTemporary>>& folders) {
  for (auto it = folders.rbegin(); it != folders.rend(); ++it) {
    ::rmdir((*it)->path().c_str());  // only if empty: files someone else put there stay
    (*it)->release();
  }
  folders.clear();
}

std::string temporary_name(const std::string& target) {
  static unsigned counter = 0;
  return target + ".tmp-napkin-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

}  // namespace

std::string read_file(const std::string& path) {
  if (path == "-") return read_bounded(STDIN_FILENO, path);
  Fd in{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) throw UserError("cannot read '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) throw UserError("cannot read '" + path + "': " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw UserError("cannot read '" + path + "': it is a folder");
  if (S_ISREG(st.st_mode) && static_cast<std::uintmax_t>(st.st_size) > kMaxFileBytes)
    throw UserError("cannot read '" + path + "': larger than 64 MiB (the limit on every file napkin reads)");
  return read_bounded(in.fd, path);
}

OutputSet::OutputSet(const std::string& folder) {
  if (!folder.empty()) created_folders_ = create_folders(folder);
}

OutputSet::~OutputSet() {
  if (!done_) abandon();
}

void OutputSet::abandon() {
  for (auto& s : staged_) {
    ::unlink(s.temp->path().c_str());
    s.temp->release();
  }
  staged_.clear();
  in_place_.clear();
  remove_folders(created_folders_);
  done_ = true;
}

void OutputSet::add(const std::string& path, std::string_view bytes) {
  NAPKIN_ASSERT(!done_) << "OutputSet::add after commit";
  if (path.empty()) throw UserError("cannot write a file with an empty name");
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw UserError("cannot write '" + path + "': it is a folder");
  if (exists && (own_stream(st) >= 0 || !S_ISREG(st.st_mode))) {
    in_place_.push_back({path, own_stream(st), std::string(bytes)});
    return;
  }
  Staged s{path, resolve_links(path), nullptr, exists};
  s.temp = std::make_unique<LiveTemporary>(temporary_name(s.target), LiveTemporary::Kind::file);
  mode_t mode = exists ? (st.st_mode & 07777) : 0666;
  Fd out{::open(s.temp->path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)};
  if (out.fd < 0) throw UserError("cannot write '" + path + "': " + std::strerror(errno));
  staged_.push_back(std::move(s));  // from here on abandon() removes the temporary
  if (exists) ::fchmod(out.fd, mode);  // keep the replaced file's permissions (the umask applied at open)
  write_all(out.fd, bytes, path);
  int fd = out.fd;
  out.fd = -1;
  if (::close(fd) != 0) throw UserError("cannot write '" + path + "': " + std::strerror(errno));
}

void OutputSet::commit() {
  NAPKIN_ASSERT(!done_) << "OutputSet::commit twice";
  try {
    for (const auto& p : in_place_) {
      if (p.fd_of_own >= 0) {
        std::ostream& os = p.fd_of_own == 1 ? std::cout : std::cerr;
        os.write(p.bytes.data(), static_cast<std::streamsize>(p.bytes.size()));
        os.flush();
        if (!os) throw UserError("cannot write '" + p.shown + "'");
        continue;
      }
      Fd out{::open(p.shown.c_str(), O_WRONLY | O_CLOEXEC)};
      if (out.fd < 0) throw UserError("cannot write '" + p.shown + "': " + std::strerror(errno));
      write_all(out.fd, p.bytes, p.shown);
    }
  } catch (...) {
    abandon();
    throw;
  }
  SignalsBlocked quiet;  // the renames complete as a group or, on failure, are undone where possible
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    if (::rename(staged_[i].temp->path().c_str(), staged_[i].target.c_str()) == 0) continue;
    std::string why = std::strerror(errno);
    std::string shown = staged_[i].shown;
    for (std::size_t j = 0; j < i; ++j) {
      if (!staged_[j].existed) ::unlink(staged_[j].target.c_str());
      staged_[j].temp->release();
    }
    staged_.erase(staged_.begin(), staged_.begin() + static_cast<std::ptrdiff_t>(i));
    abandon();
    throw UserError("cannot write '" + shown + "': " + why);
  }
  for (auto& s : staged_) s.temp->release();
  for (auto& f : created_folders_) f->release();
  done_ = true;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  OutputSet set;
  set.add(path, bytes);
  set.commit();
}

WorkFolder::WorkFolder(const std::string& path)
    : path_(path), created_(create_folders(path)), exceptions_at_start_(std::uncaught_exceptions()) {}

WorkFolder::~WorkFolder() {
  if (std::uncaught_exceptions() > exceptions_at_start_ && !created_.empty()) {
    std::error_code ec;
    fs::remove_all(created_.front()->path(), ec);
  }
  for (auto& f : created_) f->release();
}

}  // namespace napkin
