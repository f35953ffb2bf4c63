#include "runtime/ForkSafety.h"

#include <pthread.h>

#include <stdexcept>
#include <vector>

namespace torchneuron::rt {
namespace {

// Registered mutexes, taken in registration order before a fork and released after it.
std::vector<std::mutex*>& fork_mutexes() {
  static auto* mutexes = new std::vector<std::mutex*>();  // never destroyed: used at any fork
  return *mutexes;
}
std::mutex& registry_mutex() {  // guards fork_mutexes(); taken first, released last
  static auto* m = new std::mutex();
  return *m;
}

void before_fork() {
  registry_mutex().lock();
  for (std::mutex* m : fork_mutexes()) m->lock();
}

// In the parent and in the child: the forking thread held every lock (before_fork), so the
// state they guard is consistent and, in the child, only that thread exists: it releases them.
void after_fork() {
  auto& mutexes = fork_mutexes();
  for (auto it = mutexes.rbegin(); it != mutexes.rend(); ++it) (*it)->unlock();
  registry_mutex().unlock();
}

// On first registration (static initializers of other files may come before this file's).
void register_fork_handlers() {
  static const bool registered = pthread_atfork(&before_fork, &after_fork, &after_fork) == 0;
  if (!registered) throw std::runtime_error("neuron: pthread_atfork failed");
}

}  // namespace

void hold_across_fork(std::mutex& m) {
  register_fork_handlers();
  std::lock_guard<std::mutex> lock(registry_mutex());
  fork_mutexes().push_back(&m);
}

}  // namespace torchneuron::rt
