#include "device/Lifecycle.h"

#include <c10/util/Exception.h>

#include <pthread.h>

#include <atomic>

namespace torchneuron {
namespace {

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_bad_fork{false};

void after_fork_in_child() {
  if (g_initialized.load()) g_bad_fork.store(true);
}

// On first use (static initializers of other files may come before this file's).
void register_fork_handler() {
  static const bool registered = pthread_atfork(nullptr, nullptr, &after_fork_in_child) == 0;
  TORCH_INTERNAL_ASSERT(registered, "neuron: pthread_atfork failed");
}

const bool g_fork_handler_registered = (register_fork_handler(), true);

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

}  // namespace torchneuron
