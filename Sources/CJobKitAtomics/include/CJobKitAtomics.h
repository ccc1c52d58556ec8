// One atomic word for JobKit's internals (a completion-block hook's state), on every platform
// JobKit supports: `Synchronization.Atomic` needs macOS 15 / iOS 18, JobKit supports macOS 13 /
// iOS 16.
#ifndef CJOBKITATOMICS_H
#define CJOBKITATOMICS_H

#include <stdbool.h>
#include <stdint.h>

#include "CJobKitDispatch.h"
#include "CJobKitThreadMark.h"

/// Acquire load.
static inline intptr_t cjobkit_atomic_load(const intptr_t *word) {
  return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

/// Sequentially consistent exchange; returns the old value.
static inline intptr_t cjobkit_atomic_exchange(intptr_t *word, intptr_t desired) {
  return __atomic_exchange_n(word, desired, __ATOMIC_SEQ_CST);
}

/// Sequentially consistent compare-and-exchange; returns the value seen (`expected` if it was
/// replaced).
static inline intptr_t cjobkit_atomic_compare_exchange(intptr_t *word, intptr_t expected, intptr_t desired) {
  __atomic_compare_exchange_n(word, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}

#endif
