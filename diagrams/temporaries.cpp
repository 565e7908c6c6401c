#include "diagrams/temporaries.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <mutex>

namespace napkin {

/** One place the handler looks at. `claimed` is owned by ordinary code; `path` is what the
 *  handler reads: published (release) after `folder` is set, cleared before the slot is reused. */
struct TemporarySlot {
  std::atomic<bool> claimed{false};
  std::atomic<bool> folder{false};
  std::atomic<const char*> path{nullptr};
};

namespace {

static_assert(std::atomic<const char*>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "the signal handler may only touch lock-free atomics");

/** Slots come in chunks that are linked once and never freed, so the handler can walk them while
 *  ordinary code adds more. */
struct Chunk {
  std::array<TemporarySlot, 64> slots;
  std::atomic<Chunk*> next{nullptr};
};

Chunk g_first;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

void remove_registered(int sig) {
  int saved_errno = errno;
  for (Chunk* c = &g_first; c; c = c->next.load(std::memory_order_acquire))
    for (auto& s : c->slots)
      if (const char* p = s.path.load(std::memory_order_acquire); p && !s.folder.load(std::memory_order_relaxed)) unlink(p);
  // Folders were registered outermost first; nested ones empty out in at most one pass per level.
  for (int pass = 0; pass < 64; ++pass) {
    bool removed = false;
    for (Chunk* c = &g_first; c; c = c->next.load(std::memory_order_acquire))
      for (auto& s : c->slots)
        if (const char* p = s.path.load(std::memory_order_acquire); p && s.folder.load(std::memory_order_relaxed) && rmdir(p) == 0) {
          s.path.store(nullptr, std::memory_order_release);
          removed = true;
        }
    if (!removed) break;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  errno = saved_errno;
  raise(sig);  // blocked until the handler returns; then the default action ends the process
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kSignals) {
      struct sigaction old {};
      if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // nohup and friends
      struct sigaction act {};
      act.sa_handler = remove_registered;
      sigemptyset(&act.sa_mask);
      for (int other : kSignals) sigaddset(&act.sa_mask, other);  // one cleanup at a time
      sigaction(sig, &act, nullptr);
    }
  });
}

TemporarySlot* claim_slot() {
  for (Chunk* c = &g_first;; c = c->next.load(std::memory_order_acquire)) {
    for (auto& s : c->slots) {
      bool expected = false;
      if (s.claimed.compare_exchange_strong(expected, true)) return &s;
    }
    Chunk* next = c->next.load(std::memory_order_acquire);
    if (!next) {
      auto* fresh = new Chunk;  // linked for the process's lifetime: the handler may be walking it
      if (c->next.compare_exchange_strong(next, fresh, std::memory_order_acq_rel)) continue;
      delete fresh;
    }
  }
}

}  // namespace

LiveTemporary::LiveTemporary(std::string path, Kind kind) : path_(std::move(path)) {
  install_handlers();
  slot_ = claim_slot();
  slot_->folder.store(kind == Kind::folder, std::memory_order_relaxed);
  slot_->path.store(path_.c_str(), std::memory_order_release);
}

LiveTemporary::~LiveTemporary() { release(); }

void LiveTemporary::release() {
  if (!slot_) return;
  slot_->path.store(nullptr, std::memory_order_release);
  slot_->claimed.store(false, std::memory_order_release);
  slot_ = nullptr;
}

std::size_t live_temporaries() {
  std::size_t n = 0;
  for (Chunk* c = &g_first; c; c = c->next.load(std::memory_order_acquire))
    for (auto& s : c->slots) n += s.path.load(std::memory_order_acquire) != nullptr;
  return n;
}

SignalsBlocked::SignalsBlocked() {
  sigset_t block;
  sigemptyset(&block);
  for (int sig : kSignals) sigaddset(&block, sig);
  sigprocmask(SIG_BLOCK, &block, &saved_);
}

SignalsBlocked::~SignalsBlocked() { sigprocmask(SIG_SETMASK, &saved_, nullptr); }

}  // namespace napkin
