/* bench_emu: how fast the emulation runs a job, against the time the job would take on the
 * GPUs it models.
 *
 * Runs `collprof-sim --launch 8 --pattern ddp --steps 200 --scale 0.1 --stats` on the
 * emulation (LD_LIBRARY_PATH=<build>/emu): 8 processes, each a rank on an emulated H100 with
 * its 5 gradient buckets per step, at 1/10 of ResNet-50's size (10 MB of gradients per step)
 * so the run stays well under a minute on two cores (5-12 s there, with the machine's load;
 * scale 1 would take about a minute). The baseline is in the same run: rank 0's events, which
 * the emulated driver stamps with the model's clock, give the step's time on the modelled
 * GPUs. Prints
 *   emu.ddp_8rank_200step_scale0.1_wall_s            the whole job, launch to exit
 *   emu.ddp_8rank_200step_scale0.1_step_wall_ms      rank 0, per step, host wall clock
 *   emu.ddp_8rank_200step_scale0.1_step_model_ms     rank 0, per step, model (event) time
 *   emu.ddp_8rank_200step_scale0.1_wall_over_model   their ratio: the emulation's slowdown
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#define RANKS "8"
#define STEPS 200
#define SCALE "0.1"
#define NAME "emu.ddp_8rank_200step_scale" SCALE

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    char self[PATH_MAX], sim[PATH_MAX + 32], emu[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("bench_emu: /proc/self/exe");
        return 1;
    }
    self[n] = '\0';
    *strrchr(self, '/') = '\0'; /* build/bin */
    snprintf(sim, sizeof sim, "%s/collprof-sim", self);
    snprintf(emu, sizeof emu, "%s/../emu", self);
    char steps[16];
    snprintf(steps, sizeof steps, "%d", STEPS);

    FILE *err = tmpfile();
    if (!err)
        return 1;
    fflush(NULL);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO); /* the count lines */
        dup2(fileno(err), STDERR_FILENO);
        setenv("LD_LIBRARY_PATH", emu, 1);
        execl(sim, "collprof-sim", "--launch", RANKS, "--pattern", "ddp", "--steps", steps,
              "--scale", SCALE, "--stats", (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws)) {
        fprintf(stderr, "bench_emu: collprof-sim failed (status %d)\n", ws);
        return 1;
    }
    double wall = now_s() - t0;

    /* "collprof-sim: rank 0: stats: ddp, 200 steps, wall 12.3 s, gpu 0.45 s" */
    rewind(err);
    char line[1024];
    double step_wall = -1, model = -1;
    while (fgets(line, sizeof line, err)) {
        const char *at = strstr(line, "rank 0: stats: ");
        if (at && sscanf(strstr(at, "wall"), "wall %lf s, gpu %lf s", &step_wall, &model) == 2)
            break;
    }
    if (step_wall < 0 || model <= 0) {
        fprintf(stderr, "bench_emu: rank 0 printed no stats line with a GPU time\n");
        return 1;
    }
    printf(NAME "_wall_s: %.3f s\n", wall);
    printf(NAME "_step_wall_ms: %.3f ms\n", step_wall * 1e3 / STEPS);
    printf(NAME "_step_model_ms: %.3f ms\n", model * 1e3 / STEPS);
    printf(NAME "_wall_over_model: %.2f x\n", step_wall / model);
    return 0;
}
