#include "profiler/PythonLine.h"

#include <Python.h>

#include <mutex>
#include <unordered_map>

namespace torchneuron::profiler {
namespace {

std::mutex g_mutex;  // guards both; taken only with the GIL held, never across a Python call
std::vector<std::string> g_dirs;
// Code object -> inside torch/torchneuron. Each key holds a reference, so a freed code object's
// address can never be reused for another one while it is cached.
std::unordered_map<PyCodeObject*, bool> g_inside;

bool inside(PyCodeObject* code) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_inside.find(code);
  if (it != g_inside.end()) return it->second;
  bool in = false;
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  if (file == nullptr) {
    PyErr_Clear();
    in = true;  // a file name that cannot be read names no user line
  } else {
    const std::string_view path(file);
    // Python's frozen modules (<frozen runpy>, which runs `python -m`) name no user line.
    in = path.rfind("<frozen", 0) == 0;
    for (const std::string& dir : g_dirs) in = in || path.rfind(dir, 0) == 0;
  }
  Py_INCREF(code);
  g_inside.emplace(code, in);
  return in;
}

std::string walk() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  std::string line;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    if (!inside(code)) {
      line = std::string(PyUnicode_AsUTF8(code->co_filename)) + ":" +
             std::to_string(PyFrame_GetLineNumber(frame));
      Py_DECREF(code);
      Py_DECREF(frame);
      return line;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  return line;
}

}  // namespace

std::string user_python_line() {
  if (!Py_IsInitialized()) return "";
  if (PyGILState_Check()) return walk();
  // A Python thread that released the GIL around a C++ call (loss.backward()) still has its
  // frames; a device worker has no thread state and no Python line.
  if (PyGILState_GetThisThreadState() == nullptr) return "";
  PyGILState_STATE state = PyGILState_Ensure();
  std::string line = walk();
  PyGILState_Release(state);
  return line;
}

void set_internal_python_dirs(std::vector<std::string> dirs) {
  // Called from Python, with the GIL: the cached code objects' references can be dropped here.
  std::lock_guard<std::mutex> lock(g_mutex);
  g_dirs = std::move(dirs);
  for (auto& [code, in] : g_inside) Py_DECREF(code);
  g_inside.clear();
}

}  // namespace torchneuron::profiler
