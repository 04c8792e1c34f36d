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

# The collprof command links json-c and ncurses statically where Debian's -dev packages ship
# the archives (they do): a GPU node's image (Ubuntu with CUDA and PyTorch) had neither
# libjson-c.so.5 nor, on slim images, libncursesw.so.6, and the command would not start.
# Statically linked, it needs glibc alone (ncurses reads the terminfo database, which every
# Debian/Ubuntu base has: ncurses-base is essential). COLLPROF_STATIC_DEPS=OFF links the
# shared libraries instead (a distribution's own package would).
option(COLLPROF_STATIC_DEPS "Link json-c and ncurses into collprof statically" ON)
function(collprof_dep_target name pcvar)
  add_library(${name} INTERFACE IMPORTED GLOBAL)
  set(static_libs "")
  if(COLLPROF_STATIC_DEPS AND NOT COLLPROF_SANITIZE)
    foreach(lib IN LISTS ARGN)
      find_library(COLLPROF_STATIC_${lib} NAMES lib${lib}.a)
      if(NOT COLLPROF_STATIC_${lib})
        set(static_libs "")
        break()
      endif()
      list(APPEND static_libs ${COLLPROF_STATIC_${lib}})
    endforeach()
  endif()
  if(static_libs)
    set_target_properties(${name} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${${pcvar}_INCLUDE_DIRS}"
      INTERFACE_COMPILE_OPTIONS "${${pcvar}_CFLAGS_OTHER}"
      INTERFACE_LINK_LIBRARIES "${static_libs}")
  else()
    set_target_properties(${name} PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::${pcvar})
  endif()
endfunction()
collprof_dep_target(collprof::jsonc JSONC json-c)
collprof_dep_target(collprof::ncurses NCURSES ncursesw tinfo)

# xxHash is used header-only (XXH_INLINE_ALL): no run-time dependency.
include(CheckIncludeFile)
check_include_file(xxhash.h HAVE_XXHASH_H)
if(NOT HAVE_XXHASH_H)
  message(FATAL_ERROR "xxhash.h is missing: install Debian's libxxhash-dev (or run `make deps`)")
endif()
