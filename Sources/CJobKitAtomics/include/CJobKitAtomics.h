// One atomic word for JobKit's internals (a completion-block hook's state), on every platform
// JobKit supports: `Synchronization.Atomic` needs macOS 15 / iOS 18, JobKit supports macOS 13 /
// iOS 16. The functions are out of line, in a C file, so that ThreadSanitizer instruments them
// (a builtin inlined into Swift code would not be seen as an atomic access).
#ifndef CJOBKITATOMICS_H
#define CJOBKITATOMICS_H

#include <stdint.h>

/// Acquire load.
intptr_t cjobkit_atomic_load(const intptr_t *word);

/// Sequentially consistent exchange; returns the old value.
intptr_t cjobkit_atomic_exchange(intptr_t *word, intptr_t desired);

/// Sequentially consistent compare-and-exchange; returns the value seen (`expected` if it was
/// replaced).
intptr_t cjobkit_atomic_compare_exchange(intptr_t *word, intptr_t expected, intptr_t desired);

#endif
