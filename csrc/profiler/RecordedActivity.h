// Device activities measured outside C++ (compiled graphs and collectives, which Python code
// launches): the caller timed the work on the device clock; the record gets the current stream
// and the correlation id of the CPU op open on this thread, as a KernelActivityScope would.
#pragma once

#include "profiler/KernelActivity.h"

namespace torchneuron::profiler {

void record_activity(KernelRecord record);

}  // namespace torchneuron::profiler
