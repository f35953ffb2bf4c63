// For kernels that call the CPU implementation of an ATen DispatchStub on neuron memory
// (`add_stub(c10::kCPU, iter, alpha)`). DispatchStub's call path takes one parameter per CPU
// capability torch was compiled with; these are the ones the x86-64 wheels are built with, so
// the call binds to the symbol libtorch exports. Include this header before any ATen header.
#pragma once

#if defined(__x86_64__) && !defined(HAVE_AVX2_CPU_DEFINITION)
#define HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#endif

#include <ATen/native/DispatchStub.h>
