// C++ tests of the memory-protected runtime (csrc/runtime/ProtectedMemory.h) alone, built
// against the C++ standard library and the seam only; tests/runtime/test_seam.py compiles and
// runs this file. A forbidden access is made in a forked child, whose death by SIGSEGV (and its
// message) is the check; each failed check prints its line and the run exits 1.
#include "runtime/NeuronRuntime.h"
#include "runtime/ProtectedMemory.h"
#include "cpp_check.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace rt = torchneuron::rt;

namespace {

struct ChildOutcome {
  bool segv = false;
  std::string err;
};

// Runs `touch` in a forked child with its stderr captured: how it ended, and what it wrote.
template <typename Fn>
ChildOutcome in_child(Fn touch) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {};
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    touch();
    _exit(0);
  }
  close(pipe_fds[1]);
  ChildOutcome out;
  char buf[512];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) > 0) out.err.append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  out.segv = WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
  return out;
}

void protection() {
  rt::set_memory_protection(true);
  rt::configure(1, std::size_t(1) << 24);
  CHECK(rt::memory_protected());
  CHECK(!rt::capabilities().queued_execution);  // synchronous: kernels run in their window
  CHECK(std::strstr(rt::capabilities().name, "memory protected") != nullptr);
  // Chosen once, before configuration.
  bool refused = false;
  try {
    rt::set_memory_protection(false);
  } catch (const std::logic_error&) {
    refused = true;
  }
  CHECK(refused);

  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  auto* a = static_cast<float*>(rt::hbm_malloc(0, 100));
  auto* b = static_cast<float*>(rt::hbm_malloc(0, 100));
  CHECK(a != nullptr && b != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % page == 0);  // blocks are pages of their own
  CHECK(rt::protected_block_size(100) == page);
  CHECK(rt::protected_block_size(page + 1) == 2 * page);
  CHECK(rt::hbm_in_use(0) == 200);

  // The seam's copy needs no window of the caller's.
  const float values[4] = {1, 2, 3, 4};
  float back[4] = {};
  rt::memcpy(a, values, sizeof(values));
  rt::memcpy(back, a, sizeof(back));
  CHECK(std::memcmp(back, values, sizeof(values)) == 0);

  // Inside a window (nested ones count) the host reads and writes in place.
  {
    rt::HostAccessWindow outer;
    {
      rt::HostAccessWindow inner;
      CHECK(rt::open_host_access_windows() == 2);
      b[0] = a[3];
    }
    CHECK(rt::open_host_access_windows() == 1);
    CHECK(b[0] == 4.0f);
    // A block allocated while a window is open is accessible at once.
    auto* c = static_cast<float*>(rt::hbm_malloc(0, 8));
    c[0] = 7.0f;
    CHECK(c[0] == 7.0f);
    rt::hbm_free(0, c, 8);
  }
  CHECK(rt::open_host_access_windows() == 0);

  // Outside every window: a read faults, naming the address, the allocation and the mode.
  rt::note_allocation_site(a, "script.py:12");
  const ChildOutcome read = in_child([a] {
    volatile float v = a[1];
    (void)v;
  });
  CHECK(read.segv);
  CHECK(read.err.find("neuron: the host read device memory at 0x") != std::string::npos);
  CHECK(read.err.find("inside a device allocation of 100 bytes") != std::string::npos);
  CHECK(read.err.find("(allocated at script.py:12)") != std::string::npos);
  CHECK(read.err.find("NEURON_MEMORY_PROTECT=1") != std::string::npos);

  // The page behind a block is no block's: an overrun is named as one.
  const ChildOutcome overrun = in_child([b, page] {
    reinterpret_cast<volatile char*>(b)[page] = 1;
  });
  CHECK(overrun.segv);
  CHECK(overrun.err.find("the host wrote device memory") != std::string::npos);
  CHECK(overrun.err.find("just past the end of a device allocation of 100 bytes") !=
        std::string::npos);

  // A fault outside device memory is handed on without the message.
  const ChildOutcome elsewhere = in_child([] {
    volatile int* null = nullptr;
    *null = 1;
  });
  CHECK(elsewhere.segv);
  CHECK(elsewhere.err.find("neuron:") == std::string::npos);

  // Shared (IPC) blocks are refused by name.
  bool shared_refused = false;
  try {
    rt::hbm_malloc_shared(0, 64);
  } catch (const std::runtime_error& e) {
    shared_refused = std::strstr(e.what(), "NEURON_MEMORY_PROTECT=1") != nullptr;
  }
  CHECK(shared_refused);

  // A freed block is inaccessible at once, even inside a window, and named as no allocation's.
  rt::hbm_free(0, a, 100);
  const ChildOutcome freed = in_child([a] {
    rt::HostAccessWindow window;
    volatile float v = a[0];
    (void)v;
  });
  CHECK(freed.segv);
  CHECK(freed.err.find("which no device allocation holds") != std::string::npos);
  // Its pages are reused, and a window makes them accessible again.
  auto* again = static_cast<float*>(rt::hbm_malloc(0, 100));
  CHECK(again == a);
  {
    rt::HostAccessWindow window;
    again[0] = 5.0f;
    CHECK(again[0] == 5.0f);
  }
  rt::hbm_free(0, again, 100);
  rt::hbm_free(0, b, 100);
  CHECK(rt::hbm_in_use(0) == 0);

  // A window costs one mprotect whatever the number of blocks.
  std::vector<void*> many;
  for (int i = 0; i < 1000; ++i) many.push_back(rt::hbm_malloc(0, 64));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) rt::HostAccessWindow window;
  const auto per_window = (std::chrono::steady_clock::now() - t0) / 100;
  std::printf("a window with 1000 live blocks: %lld us\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::microseconds>(per_window).count()));
  for (void* p : many) rt::hbm_free(0, p, 64);
}

}  // namespace

int main() {
  protection();
  return seam_test::report();
}
