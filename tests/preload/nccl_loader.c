/* nccl_loader: a job that is not linked to NCCL and reaches it only through libraries it
 * opens at run time, the way Python imports an extension module. Its arguments are steps:
 *   local PATH    dlopen(PATH, RTLD_NOW | RTLD_LOCAL): Python's default for an import
 *   global PATH   dlopen(PATH, RTLD_NOW | RTLD_GLOBAL)
 *   run I TAG     nccl_client_run(TAG, 2, 3) of the I-th library opened (from 0)
 *   version I TAG nccl_client_version(TAG): host-only calls, for a real NCCL without a GPU
 *   fork I TAG    nccl_client_fork(TAG): a fork while collectives run on the GPU
 *   unwinder      which object the global scope gives _Unwind_RaiseException (C++'s throw)
 * Exit: 0, or 1 with the step that failed on stdout. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*client_run_fn)(const char *tag, int ndev, int steps);
typedef int (*client_tag_fn)(const char *tag); /* version, fork */

int main(int argc, char **argv)
{
    void *libs[16];
    int nlibs = 0;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "local") || !strcmp(argv[i], "global")) && i + 1 < argc &&
            nlibs < 16) {
            int global = !strcmp(argv[i], "global");
            libs[nlibs] = dlopen(argv[i + 1], RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
            if (!libs[nlibs]) {
                printf("loader: cannot open %s: %s\n", argv[i + 1], dlerror());
                return 1;
            }
            nlibs++;
            i++;
        } else if (!strcmp(argv[i], "run") && i + 2 < argc) {
            int k = atoi(argv[i + 1]);
            client_run_fn run = k >= 0 && k < nlibs ? (client_run_fn)(void (*)(void))dlsym(
                                                          libs[k], "nccl_client_run")
                                                    : NULL;
            if (!run) {
                printf("loader: library %d has no nccl_client_run\n", k);
                return 1;
            }
            int rc = run(argv[i + 2], 2, 3);
            printf("loader: %s returned %d\n", argv[i + 2], rc);
            fflush(stdout);
            if (rc != 0)
                return 1;
            i += 2;
        } else if ((!strcmp(argv[i], "version") || !strcmp(argv[i], "fork")) && i + 2 < argc) {
            int k = atoi(argv[i + 1]);
            const char *fn = !strcmp(argv[i], "fork") ? "nccl_client_fork" : "nccl_client_version";
            client_tag_fn call =
                k >= 0 && k < nlibs ? (client_tag_fn)dlsym(libs[k], fn) : NULL;
            if (!call || call(argv[i + 2]) != 0) {
                printf("loader: %s step failed\n", argv[i]);
                return 1;
            }
            i += 2;
        } else if (!strcmp(argv[i], "unwinder")) {
            void *p = dlsym(RTLD_DEFAULT, "_Unwind_RaiseException");
            Dl_info info;
            char from[256] = "none";
            if (p && dladdr(p, &info) && info.dli_fname) {
                const char *slash = strrchr(info.dli_fname, '/');
                snprintf(from, sizeof from, "%s", slash ? slash + 1 : info.dli_fname);
                char *so = strstr(from, ".so"); /* a preload by path and by soname alike */
                if (so)
                    so[3] = '\0';
            }
            printf("loader: _Unwind_RaiseException from %s\n", from);
        } else {
            printf("loader: bad step '%s'\n", argv[i]);
            return 2;
        }
    }
    return 0;
}
