// One word per thread for JobKit's internals: the operation whose finish notifications the
// thread is posting (identified by its address), so that Foundation's read of that operation's
// `isFinished` inside them, on that thread, needs no lock. A C thread-local, read and written by
// the inline functions below: no thread-specific key, no allocation, no destructor; an executable
// linking JobKit statically reads it in one or two instructions.
#ifndef CJOBKITTHREADMARK_H
#define CJOBKITTHREADMARK_H

#include <stdint.h>

extern _Thread_local uintptr_t cjobkit_thread_finish_posting;

/// The calling thread's mark (0 for none).
static inline uintptr_t cjobkit_finish_posting(void) {
  return cjobkit_thread_finish_posting;
}

/// Sets the calling thread's mark to `operation` (0 for none); returns the mark it replaces.
static inline uintptr_t cjobkit_exchange_finish_posting(uintptr_t operation) {
  uintptr_t outer = cjobkit_thread_finish_posting;
  cjobkit_thread_finish_posting = operation;
  return outer;
}

#endif
