/* analyzer/demangle.h: C++ names in call-site frames, readable.
 *
 * The shim records frames as the dynamic symbol table names them ("SYMBOL+0xOFF (OBJECT)"),
 * so a PyTorch job's sites are Itanium-mangled (_ZN4c10d16ProcessGroupNCCL9allgather...). The
 * analyzer demangles them with the C++ runtime's own __cxa_demangle, found at run time in
 * libstdc++.so.6 (every Debian and Ubuntu system has it: apt needs it): no build dependency,
 * none in the shim, and where it is missing the frame stays as recorded. */
#ifndef COLLPROF_ANALYZER_DEMANGLE_H
#define COLLPROF_ANALYZER_DEMANGLE_H

#include <stddef.h>

/* One frame of len bytes into out (NUL-terminated, cut to outlen): its symbol demangled when it
 * is a mangled C++ name, with the parameter list shortened to "(...)" past
 * CPA_DEMANGLE_MAX_NAME characters; otherwise the frame as it is. Returns the length written. */
#define CPA_DEMANGLE_MAX_NAME 96
size_t cpa_demangle_frame(const char *frame, size_t len, char *out, size_t outlen);

/* Whether the C++ runtime's demangler was found (tests say why they skip). */
int cpa_demangle_available(void);

#endif
