// NEURON_MEMORY_PROTECT=1's device memory: blocks of whole pages, each followed by a page no block
// holds, in one reserved arena, so that a window is one mprotect of the arena's used part whatever
// the number of blocks (a call per block cost 8 ms per op with 1,000 live blocks). Outside every
// window the arena is PROT_NONE, so a host access that did not come through the seam faults;
// the SIGSEGV handler below names it and hands the signal on.
#include "runtime/ProtectedMemory.h"

#include "runtime/NeuronRuntime.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

namespace torchneuron::rt {
namespace {

struct Block {
  std::size_t size = 0;   // page-rounded, without the page behind it
  std::size_t bytes = 0;  // as asked
  char site[192] = {};    // where its current user allocated it; "" when unknown
};

// The arena: reserved once (address space only), used from its start up to g_top; freed runs
// (block and the page behind it) are reused first-fit and coalesced. Guarded by g_mutex.
std::uintptr_t g_arena = 0;
std::size_t g_arena_bytes = 0;
std::uintptr_t g_top = 0;
std::map<std::uintptr_t, std::size_t>& free_runs() {
  static auto* map = new std::map<std::uintptr_t, std::size_t>();
  return *map;
}

std::atomic<bool> g_on{false};
// Guards the blocks and the window count; a toggle protects every block under it, so that a
// block is never seen in the other state by a thread that took the lock.
std::mutex g_mutex;
std::map<std::uintptr_t, Block>& blocks() {
  static auto* map = new std::map<std::uintptr_t, Block>();  // never destroyed (late frees)
  return *map;
}
int g_windows = 0;
struct sigaction g_previous_segv {};

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

int access_now_locked() { return g_windows > 0 ? PROT_READ | PROT_WRITE : PROT_NONE; }

// One call for the used part of the arena; opening it leaves the freed runs (coalesced, few)
// inaccessible, so that a use after free faults inside a window too.
void protect_all_locked(int prot) {
  if (g_top > g_arena) mprotect(reinterpret_cast<void*>(g_arena), g_top - g_arena, prot);
  if (prot == PROT_NONE) return;
  for (const auto& [start, span] : free_runs()) {
    mprotect(reinterpret_cast<void*>(start), span, PROT_NONE);
  }
}

// Reserves the arena at the first block: as much address space as the kernel grants, from
// 1 TiB down (MAP_NORESERVE: nothing is committed until a page is touched).
bool reserve_arena_locked() {
  if (g_arena != 0) return true;
  for (std::size_t bytes = std::size_t(1) << 40; bytes >= (std::size_t(1) << 30); bytes /= 2) {
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      g_arena = g_top = reinterpret_cast<std::uintptr_t>(p);
      g_arena_bytes = bytes;
      return true;
    }
  }
  return false;
}

// `span` bytes of the arena (a block and the page behind it), or 0 when it is full.
std::uintptr_t take_span_locked(std::size_t span) {
  for (auto it = free_runs().begin(); it != free_runs().end(); ++it) {
    if (it->second < span) continue;
    const std::uintptr_t start = it->first;
    const std::size_t left = it->second - span;
    free_runs().erase(it);
    if (left > 0) free_runs()[start + span] = left;
    return start;
  }
  if (g_top + span > g_arena + g_arena_bytes) return 0;
  const std::uintptr_t start = g_top;
  g_top += span;
  return start;
}

// Gives a span back: its pages to the kernel, its addresses to the free runs (coalesced), and
// the top of the arena down when it was the last.
void give_span_locked(std::uintptr_t start, std::size_t span) {
  // Inaccessible at once, also inside a window: freed memory is no block's, and a span above
  // the top would otherwise stay as the last window left it.
  mprotect(reinterpret_cast<void*>(start), span, PROT_NONE);
  madvise(reinterpret_cast<void*>(start), span, MADV_DONTNEED);
  auto next = free_runs().find(start + span);
  if (next != free_runs().end()) {
    span += next->second;
    free_runs().erase(next);
  }
  auto prev = free_runs().lower_bound(start);
  if (prev != free_runs().begin()) {
    --prev;
    if (prev->first + prev->second == start) {
      start = prev->first;
      span += prev->second;
      free_runs().erase(prev);
    }
  }
  if (start + span == g_top) {
    g_top = start;
  } else {
    free_runs()[start] = span;
  }
}

// The fault message, written with write(2) only (async-signal-safe): no allocation, no stdio.
struct Message {
  char text[1024];
  std::size_t len = 0;
  void add(const char* s) {
    while (*s != '\0' && len < sizeof(text) - 1) text[len++] = *s++;
  }
  void add_hex(std::uintptr_t v) {
    char digits[2 + 2 * sizeof(v)];
    int n = 0;
    do {
      digits[n++] = "0123456789abcdef"[v & 0xf];
      v >>= 4;
    } while (v != 0);
    add("0x");
    while (n > 0 && len < sizeof(text) - 1) text[len++] = digits[--n];
  }
  void add_dec(std::size_t v) {
    char digits[24];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0 && len < sizeof(text) - 1) text[len++] = digits[--n];
  }
  void write_to_stderr() const {
    std::size_t done = 0;
    while (done < len) {
      const ssize_t n = ::write(STDERR_FILENO, text + done, len - done);
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }
};

// Whether the faulting instruction wrote (x86-64's page-fault error code); -1 when unknown.
int fault_was_write(void* context) {
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? 1 : 0;
#else
  (void)context;
  return -1;
#endif
}

void on_segv(int signo, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  bool ours = false;
  bool guard = false;
  bool in_arena = addr >= g_arena && addr < g_arena + g_arena_bytes;
  std::uintptr_t start = 0;
  Block found;
  // A try-lock: the lock's holder may be the thread that faulted (never in practice: nothing
  // under it touches device memory) or one that is toggling; then the allocation goes unnamed.
  for (int attempt = 0; attempt < 1000 && !ours; ++attempt) {
    if (!g_mutex.try_lock()) continue;
    auto it = blocks().upper_bound(addr);
    if (it != blocks().begin()) {
      --it;
      if (addr < it->first + it->second.size + page_size()) {
        ours = true;
        guard = addr >= it->first + it->second.size;
        start = it->first;
        found = it->second;
      }
    }
    g_mutex.unlock();
    break;
  }
  if (ours || in_arena) {
    Message m;
    const int write = fault_was_write(context);
    m.add("\nneuron: the host ");
    m.add(write < 0 ? "accessed" : write ? "wrote" : "read");
    m.add(" device memory at ");
    m.add_hex(addr);
    if (!ours) {
      m.add(", which no device allocation holds (freed, or never allocated)");
    } else {
      m.add(guard ? ", just past the end of a device allocation of "
                  : ", inside a device allocation of ");
      m.add_dec(found.bytes);
      m.add(" bytes at ");
      m.add_hex(start);
    }
    if (ours && found.site[0] != '\0') {
      m.add(" (allocated at ");
      m.add(found.site);
      m.add(")");
    }
    m.add(", outside the runtime seam. Under ");
    m.add(kMemoryProtectMode);
    m.add(" device memory is inaccessible to the host except while a kernel, a copy or a "
          "collective runs through the seam, as a Trainium's HBM is: this access (a raw "
          "data_ptr() read, a kernel or extension that bypassed the seam) would fail on "
          "hardware. Stopping the process.\n");
    m.write_to_stderr();
  }
  // Hand on: the previous handler (Python's faulthandler prints the Python stack, then the
  // default action ends the process) runs when the faulting instruction runs again.
  (void)signo;
  sigaction(SIGSEGV, &g_previous_segv, nullptr);
}

void install_fault_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = &on_segv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
  });
}

}  // namespace

void set_memory_protection(bool on) {
  if (on == g_on.load()) return;
  if (configured()) {
    throw std::logic_error(
        "neuron runtime: memory protection must be chosen before the runtime is configured");
  }
  if (on) install_fault_handler();
  g_on.store(on);
}

bool memory_protected() { return g_on.load(std::memory_order_relaxed); }

std::size_t protected_block_size(std::size_t bytes) {
  const std::size_t page = page_size();
  return std::max<std::size_t>(page, (bytes + page - 1) / page * page);
}

void* protected_malloc(std::size_t bytes) {
  const std::size_t size = protected_block_size(bytes);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!reserve_arena_locked()) return nullptr;
  const std::uintptr_t start = take_span_locked(size + page_size());
  if (start == 0) return nullptr;
  void* p = reinterpret_cast<void*>(start);
  if (access_now_locked() != PROT_NONE) mprotect(p, size, access_now_locked());
  Block& block = blocks()[reinterpret_cast<std::uintptr_t>(p)];
  block.size = size;
  block.bytes = bytes;
  block.site[0] = '\0';
  return p;
}

void protected_free(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  blocks().erase(reinterpret_cast<std::uintptr_t>(ptr));
  give_span_locked(reinterpret_cast<std::uintptr_t>(ptr), protected_block_size(bytes) + page_size());
}

void note_allocation_site(void* ptr, const char* site) {
  if (!memory_protected()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = blocks().find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == blocks().end()) return;
  std::strncpy(it->second.site, site, sizeof(it->second.site) - 1);
  it->second.site[sizeof(it->second.site) - 1] = '\0';
}

void open_host_access() {
  if (!memory_protected()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_windows++ == 0) protect_all_locked(PROT_READ | PROT_WRITE);
}

void close_host_access() {
  if (!memory_protected()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_windows == 0) protect_all_locked(PROT_NONE);
}

int open_host_access_windows() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_windows;
}

}  // namespace torchneuron::rt
