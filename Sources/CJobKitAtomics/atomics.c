#include "CJobKitAtomics.h"

#include <stdbool.h>

intptr_t cjobkit_atomic_load(const intptr_t *word) {
  return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

intptr_t cjobkit_atomic_exchange(intptr_t *word, intptr_t desired) {
  return __atomic_exchange_n(word, desired, __ATOMIC_SEQ_CST);
}

intptr_t cjobkit_atomic_compare_exchange(intptr_t *word, intptr_t expected, intptr_t desired) {
  __atomic_compare_exchange_n(word, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
