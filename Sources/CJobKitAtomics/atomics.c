// The inline functions are in the headers. SwiftPM needs a source file for a C target; the one
// thing defined here is the thread-local that `CJobKitThreadMark.h` declares. No debug info for
// it: this file would then be the one DWARF 5 unit of a JobKit binary (clang's default), which
// valgrind 3.19's reader cannot read, and callgrind measures JobKit's instructions per task.
#include "CJobKitAtomics.h"

__attribute__((nodebug)) _Thread_local uintptr_t cjobkit_thread_finish_posting = 0;
