// Call signatures as byte strings (hash-map keys): the queue's per-call recipes
// (DeferredOp.cpp) and fused eager's chains (csrc/fused_eager/) write values the same way.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

namespace torchneuron {

template <typename T>
void put(std::string& key, const T& value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Appends a plain value (None, bool, int, float, complex, str), tagged by its type; false (the
// key unchanged) for any other value.
inline bool put_scalar(std::string& key, const c10::IValue& v) {
  if (v.isNone()) {
    key += 'N';
  } else if (v.isBool()) {
    key += 'b';
    put(key, v.toBool());
  } else if (v.isInt()) {
    key += 'i';
    put(key, v.toInt());
  } else if (v.isDouble()) {
    key += 'd';
    put(key, v.toDouble());
  } else if (v.isComplexDouble()) {
    key += 'c';
    put(key, v.toComplexDouble());
  } else if (v.isString()) {
    key += 's';
    key += v.toStringRef();
    key += '\0';
  } else {
    return false;
  }
  return true;
}

// Appends a float or complex number by its type only (true), for keys that one kernel or one
// recipe serves whatever the value; false (the key unchanged) for any other value.
inline bool put_number_type(std::string& key, const c10::IValue& v) {
  if (v.isDouble()) {
    key += 'D';
  } else if (v.isComplexDouble()) {
    key += 'C';
  } else {
    return false;
  }
  return true;
}

}  // namespace torchneuron
