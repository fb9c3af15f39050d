/*
 * mallocTrim() -> 1 if glibc gave memory back to the system, else 0: malloc_trim(0), which
 * returns the free top of the main heap and, since glibc 2.8, the free pages inside every arena.
 * glibc trims the main heap on its own only when its free top passes M_TRIM_THRESHOLD, which it
 * raises each time a large block is freed; what a process's start-up freed in the middle of its
 * arenas it never gives back. A process calls this once it is quiet, never per request: a trim
 * walks every arena under its lock. Without glibc (musl) it does nothing and returns 0.
 */
#include "plane.h"
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#define CHECK(call) NAPI_CHECK("talon_sendfile", call)

static napi_value MallocTrim(napi_env env, napi_callback_info info) {
#if defined(__GLIBC__)
  return make_int(env, malloc_trim(0));
#else
  return make_int(env, 0);
#endif
}

napi_value memory_export(napi_env env, napi_value exports) {
  NAPI_EXPORT("mallocTrim", MallocTrim);
  return exports;
}
