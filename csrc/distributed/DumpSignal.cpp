// A signal (SIGUSR2) that asks for a flight-recorder dump even while the main thread is blocked
// inside a collective. A Python signal handler runs only on the main thread, between bytecodes,
// so it would wait for the collective to end (or time out); this C handler only writes one byte
// to a pipe (write() is async-signal-safe), and the watchdog thread that reads the pipe's other
// end (torchneuron/distributed/watchdog.py) writes the dump.
#include <torch/library.h>

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <unistd.h>

namespace {

int g_write_fd = -1;

extern "C" void on_dump_signal(int) {
  const int saved = errno;  // a handler must leave errno as the interrupted code had it
  const char byte = 1;
  // Non-blocking: a full pipe means a dump is already asked for.
  [[maybe_unused]] auto written = write(g_write_fd, &byte, 1);
  errno = saved;
}

// Installs the handler and returns the pipe's read end, or -1 where the program already handles
// the signal itself (its handler is left in place). Installing twice returns the same pipe.
int64_t install_dump_signal(int64_t signum) {
  static int read_fd = -1;
  if (read_fd >= 0) {
    return read_fd;
  }
  struct sigaction old {};
  TORCH_CHECK(sigaction(static_cast<int>(signum), nullptr, &old) == 0,
              "install_dump_signal: signal ", signum, " cannot be handled");
  if (old.sa_handler != SIG_DFL) {
    return -1;
  }
  int fds[2];
  TORCH_CHECK(pipe(fds) == 0, "install_dump_signal: pipe() failed, errno ", errno);
  for (int fd : fds) {
    fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  g_write_fd = fds[1];
  struct sigaction action {};
  action.sa_handler = on_dump_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // the interrupted collective's system calls resume
  TORCH_CHECK(sigaction(static_cast<int>(signum), &action, nullptr) == 0,
              "install_dump_signal: sigaction failed, errno ", errno);
  read_fd = fds[0];
  return read_fd;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torchneuron, m) {
  m.def("install_dump_signal(int signum) -> int", &install_dump_signal);
}
