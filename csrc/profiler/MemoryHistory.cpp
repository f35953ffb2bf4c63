#include "profiler/MemoryHistory.h"

#include <chrono>
#include <deque>
#include <mutex>

namespace torchneuron::profiler {

std::atomic<bool> g_memory_history{false};
std::atomic<bool> g_memory_stacks{false};

namespace {

std::mutex g_mutex;
std::deque<MemoryEvent> g_events;
std::size_t g_max_entries = 0;
OomHook g_oom_hook;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void record_memory_event(MemoryAction action, int device, const void* address, std::size_t size,
                         std::size_t requested,
                         std::shared_ptr<torch::CapturedTraceback> frames) {
  std::shared_ptr<torch::CapturedTraceback> dropped;  // released outside the lock
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_memory_history.load(std::memory_order_relaxed)) return;
  g_events.push_back({action, device, reinterpret_cast<std::uintptr_t>(address), size,
                      requested, now_us(), std::move(frames)});
  while (g_events.size() > g_max_entries) {
    dropped = std::move(g_events.front().frames);
    g_events.pop_front();
  }
}

namespace {
// A device worker (runtime/Execution.h) runs no Python and must not take the GIL, which the
// thread waiting for it may hold.
thread_local bool t_without_python_frames = false;
}  // namespace

void record_no_python_frames_on_this_thread() { t_without_python_frames = true; }

std::shared_ptr<torch::CapturedTraceback> gather_memory_frames() {
  if (t_without_python_frames || !g_memory_history.load(std::memory_order_relaxed) ||
      !g_memory_stacks.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

void set_memory_history(bool enabled, std::size_t max_entries, bool stacks) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_max_entries = max_entries;
  if (!enabled) g_events.clear();
  while (g_events.size() > g_max_entries) g_events.pop_front();
  g_memory_stacks.store(enabled && stacks);
  g_memory_history.store(enabled);
}

std::vector<MemoryEvent> memory_history() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return {g_events.begin(), g_events.end()};
}

void set_oom_hook(OomHook hook) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_oom_hook = std::move(hook);
}

std::string on_oom(int device, std::size_t size, std::size_t usable) {
  OomHook hook;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    hook = g_oom_hook;
  }
  return hook ? hook(device, size, usable) : std::string();
}

}  // namespace torchneuron::profiler
