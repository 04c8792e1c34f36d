# Hard dependencies, each checked with a message that says which Debian package to install
# (`make deps` installs them all). CUDA, NCCL and CUPTI are never build dependencies: collprof
# declares their ABI itself and finds them at run time.
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config is missing: install Debian's pkg-config (or run `make deps`)")
endif()

function(collprof_require_pkg var module debpkg)
  pkg_check_modules(${var} QUIET IMPORTED_TARGET ${module})
  if(NOT ${var}_FOUND)
    message(FATAL_ERROR "${module} is missing: install Debian's ${debpkg} (or run `make deps`)")
  endif()
endfunction()

collprof_require_pkg(JSONC json-c libjson-c-dev)
collprof_require_pkg(CMOCKA cmocka libcmocka-dev)
# libunwind is no build dependency: the shim opens libunwind.so.8 at run time when the machine
# has it (preload/unwind.c).
collprof_require_pkg(NCURSES ncursesw libncurses-dev)

# xxHash is used header-only (XXH_INLINE_ALL): no run-time dependency.
include(CheckIncludeFile)
check_include_file(xxhash.h HAVE_XXHASH_H)
if(NOT HAVE_XXHASH_H)
  message(FATAL_ERROR "xxhash.h is missing: install Debian's libxxhash-dev (or run `make deps`)")
endif()
