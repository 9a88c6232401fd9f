/* Preloaded under compute-sanitizer by scripts/gpu-check.sh: on SIGSEGV prints the faulting
 * address, the thread and its backtrace (module+offset, for addr2line), then dies as before.
 * It tells a crash of the sanitizer (its own threads, libsanitizer-collection.so) from a crash
 * of the program. Catch2 restores the handlers it found and raises again, so this one also runs
 * after Catch2's report. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void on_segv(int sig, siginfo_t* info, void* context) {
  (void)context;
  char line[160];
  int length = snprintf(line, sizeof line, "\n[segv_backtrace] signal %d at %p, thread %ld of %d\n",
                        sig, info ? info->si_addr : NULL, (long)syscall(SYS_gettid), getpid());
  if (length > 0 && write(2, line, (size_t)length) < 0) { /* nothing else to report with */ }
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_segv;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, NULL);
}
