#include "device/Lifecycle.h"

#include <c10/util/Exception.h>

#include <pthread.h>

#include <atomic>
#include <vector>

namespace torchneuron {
namespace {

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_bad_fork{false};

// Registered mutexes, taken in registration order before a fork and released after it.
std::vector<std::mutex*>& fork_mutexes() {
  static std::vector<std::mutex*> mutexes;
  return mutexes;
}
std::mutex g_registry_mutex;  // guards fork_mutexes(); taken first, released last

void before_fork() {
  g_registry_mutex.lock();
  for (std::mutex* m : fork_mutexes()) m->lock();
}

void release_after_fork() {
  auto& mutexes = fork_mutexes();
  for (auto it = mutexes.rbegin(); it != mutexes.rend(); ++it) (*it)->unlock();
  g_registry_mutex.unlock();
}

void after_fork_in_child() {
  // The forking thread held every lock (before_fork), so the state they guard is consistent and
  // only that thread exists here: it may release them.
  release_after_fork();
  if (g_initialized.load()) g_bad_fork.store(true);
}

// On first registration (static initializers of other files may come before this file's).
void register_fork_handlers() {
  static const bool registered =
      pthread_atfork(&before_fork, &release_after_fork, &after_fork_in_child) == 0;
  TORCH_INTERNAL_ASSERT(registered, "neuron: pthread_atfork failed");
}

}  // namespace

void check_not_in_bad_fork() {
  TORCH_CHECK(!g_bad_fork.load(std::memory_order_relaxed),
              "Cannot re-initialize neuron in forked subprocess. To use neuron with "
              "multiprocessing, you must use the 'spawn' or 'forkserver' start method "
              "(torch.multiprocessing.set_start_method('spawn'), or DataLoader("
              "multiprocessing_context='spawn')).");
}

void mark_initialized() {
  if (g_initialized.load(std::memory_order_relaxed)) {
    check_not_in_bad_fork();
    return;
  }
  check_not_in_bad_fork();
  g_initialized.store(true);
}

bool is_initialized() { return g_initialized.load(); }

bool in_bad_fork() { return g_bad_fork.load(); }

void hold_across_fork(std::mutex& m) {
  register_fork_handlers();
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  fork_mutexes().push_back(&m);
}

}  // namespace torchneuron
