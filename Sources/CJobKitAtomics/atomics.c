// The functions are inline, in the header. SwiftPM needs a source file for a C target.
#include "CJobKitAtomics.h"
