/* fs_fault: a loop-mounted ext4 image for the tests whose trace directory's file system fails
 * mid-run: frozen (fsfreeze, what a hung NFS or Lustre server looks like) or turned read-only
 * by an error (mounted errors=remount-ro, the error raised through ext4's trigger_fs_error).
 * Root only: fs_image_mount says why not otherwise.
 *
 * A frozen file system must be thawed whatever happens to the test (a process writing to it
 * cannot even be killed until then): every freeze starts a guard, a process of its own that
 * thaws after the given time even if the test dies, and fs_image_release thaws again and
 * unmounts (the test's teardown calls it too). */
#ifndef COLLPROF_TEST_FS_FAULT_H
#define COLLPROF_TEST_FS_FAULT_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fs_image {
    char img[400], mnt[400], dev[64]; /* dev: "loop3" */
    int mounted;
    pid_t guard;
};

/* Quietly, with the shell: 0 when it exited 0. */
static inline int fs_sh(const char *fmt, const char *a, const char *b)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    return system(cmd) == 0 ? 0 : -1;
}

/* A 64 MiB ext4 image under dir, mounted at dir/<name> with opts ("" none). 0, or -1 with the
 * reason in why (not root, no loop device, no mkfs.ext4). */
static inline int fs_image_mount(struct fs_image *f, const char *dir, const char *name,
                                 const char *opts, char *why, size_t whylen)
{
    memset(f, 0, sizeof *f);
    f->guard = -1;
    if (geteuid() != 0) {
        snprintf(why, whylen, "a loop-mounted file system needs root");
        return -1;
    }
    snprintf(f->img, sizeof f->img, "%s/%s.img", dir, name);
    snprintf(f->mnt, sizeof f->mnt, "%s/%s", dir, name);
    mkdir(f->mnt, 0700);
    char o[200];
    snprintf(o, sizeof o, "%s%s", *opts ? "," : "", opts);
    char cmd[1200];
    if (fs_sh("truncate -s 64M '%s' && mkfs.ext4 -q -F '%s' >/dev/null 2>&1", f->img, f->img)) {
        snprintf(why, whylen, "cannot make an ext4 image (no mkfs.ext4?)");
        unlink(f->img);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "mount -o loop%s '%s' '%s' 2>/dev/null", o, f->img, f->mnt);
    if (system(cmd) != 0) {
        snprintf(why, whylen, "cannot loop-mount an ext4 image (no loop device?)");
        unlink(f->img);
        return -1;
    }
    f->mounted = 1;
    snprintf(cmd, sizeof cmd, "findmnt -n -o SOURCE '%s'", f->mnt);
    FILE *p = popen(cmd, "r");
    char src[200] = "";
    if (p) {
        if (!fgets(src, sizeof src, p))
            src[0] = '\0';
        pclose(p);
    }
    src[strcspn(src, "\n")] = '\0';
    const char *base = strrchr(src, '/');
    snprintf(f->dev, sizeof f->dev, "%s", base ? base + 1 : src);
    return 0;
}

/* Freezes now; the guard thaws after `seconds`. 0, or -1 when fsfreeze failed. */
static inline int fs_image_freeze_for(struct fs_image *f, double seconds)
{
    if (fs_sh("fsfreeze -f '%s'%s", f->mnt, "") != 0)
        return -1;
    fflush(NULL);
    f->guard = fork();
    if (f->guard == 0) {
        setsid(); /* out of the test's group: a kill of the test's jobs does not reach it */
        struct timespec t = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
        while (nanosleep(&t, &t) != 0 && errno == EINTR)
            ;
        execlp("fsfreeze", "fsfreeze", "-u", f->mnt, (char *)NULL);
        _exit(127);
    }
    if (f->guard < 0) {
        fs_sh("fsfreeze -u '%s'%s", f->mnt, "");
        return -1;
    }
    return 0;
}

/* Waits for the guard's thaw. */
static inline void fs_image_wait_thaw(struct fs_image *f)
{
    if (f->guard > 0)
        waitpid(f->guard, NULL, 0);
    f->guard = -1;
}

/* ext4's own error path: with errors=remount-ro the file system turns read-only at once. */
static inline int fs_image_raise_error(struct fs_image *f)
{
    char path[200];
    snprintf(path, sizeof path, "/sys/fs/ext4/%s/trigger_fs_error", f->dev);
    FILE *t = fopen(path, "w");
    if (!t)
        return -1;
    int ok = fputs("1\n", t) >= 0;
    return fclose(t) == 0 && ok ? 0 : -1;
}

/* Thaws (whether frozen or not), unmounts, removes the image. Every path. */
static inline void fs_image_release(struct fs_image *f)
{
    if (!f->mounted)
        return;
    if (f->guard > 0) {
        kill(f->guard, SIGKILL);
        waitpid(f->guard, NULL, 0);
        f->guard = -1;
    }
    fs_sh("fsfreeze -u '%s' 2>/dev/null%s", f->mnt, "");
    fs_sh("umount '%s' 2>/dev/null || umount -l '%s' 2>/dev/null", f->mnt, f->mnt);
    unlink(f->img);
    f->mounted = 0;
}

#endif
