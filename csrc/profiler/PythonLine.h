// The user's Python line of the op being run: the innermost frame outside torch and torchneuron
// (the readiness accounting, aten/Accounting.h, names each finding by it). Cached per code
// object, so a call walks a few frames and looks each up once.
#pragma once

#include <string>
#include <vector>

namespace torchneuron::profiler {

// "path/to/script.py:42", or "" when the thread runs no Python (a device worker, or no
// interpreter). A thread that released the GIL (autograd's backward on the calling thread) takes
// it back for the walk; call it holding no lock a Python thread may wait for.
std::string user_python_line();

// Files under these directories are "inside" (torch's and torchneuron's package directories,
// set once from Python); clears the cache.
void set_internal_python_dirs(std::vector<std::string> dirs);

}  // namespace torchneuron::profiler
