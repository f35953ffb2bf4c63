// The second runtime behind the seam: the software NeuronCore with its device memory protected
// from the host (NEURON_MEMORY_PROTECT=1), as PyTorch's OpenReg reference backend protects its
// own. Each block of device memory is rounded to whole pages, with a page behind it that no block
// holds, in one reserved arena inaccessible to the host (PROT_NONE) except while a host access
// window is open: a kernel, a copy or a collective that runs through the seam. Any other read or
// write of device memory (a path that bypasses the seam, and so would fail on a Trainium, whose
// HBM the host cannot address) stops the process with a message on stderr naming the address,
// its allocation and the mode. Execution is
// synchronous in this mode (capabilities().queued_execution is false).
//
// In the default runtime every call here is a no-op but the first load of memory_protected().
#pragma once

#include <cstddef>

namespace torchneuron::rt {

// Chosen once, before the runtime is configured (device memory allocated before it would be
// unprotected). Throws std::logic_error when device memory is already allocated.
void set_memory_protection(bool on);
// One relaxed load.
bool memory_protected();
// The mode as the environment names it, for error messages of paths this mode refuses.
constexpr const char* kMemoryProtectMode = "NEURON_MEMORY_PROTECT=1";

// Device memory of this mode (what hbm_malloc/hbm_free use when memory_protected()).
void* protected_malloc(std::size_t bytes);
void protected_free(void* ptr, std::size_t bytes);
// The page-rounded size a block of `bytes` takes.
std::size_t protected_block_size(std::size_t bytes);

// Where the block at `ptr` was handed to its current user (a Python line, "file.py:12"), for
// the fault message; kept truncated to a fixed buffer. Ignored outside a protected block.
void note_allocation_site(void* ptr, const char* site);

// While any window is open (on any thread; they nest and overlap, counted), every block is
// host-accessible. The layers above open one around each kernel, copy and collective they run
// through the seam; a no-op in the default runtime.
void open_host_access();
void close_host_access();
class HostAccessWindow {
 public:
  HostAccessWindow() { open_host_access(); }
  ~HostAccessWindow() { close_host_access(); }
  HostAccessWindow(const HostAccessWindow&) = delete;
  HostAccessWindow& operator=(const HostAccessWindow&) = delete;
};
// Windows open now (tests).
int open_host_access_windows();

}  // namespace torchneuron::rt
