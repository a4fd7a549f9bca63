// Whole-process timing of commands run in turn: `paired RUNS CMD... [-- CMD...]...` runs each command once per round,
// RUNS rounds, and prints for each the median wall time (fork to reaped) and the median CPU time the kernel counted
// for the child (user + system, from wait4), in microseconds. Paired rounds let a machine that speeds up or slows
// down meet every command alike; the CPU column is what the noise of a shared VM moves least.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double microseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1e6 + now.tv_nsec / 1e3;
}

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: paired RUNS CMD [ARGS...] [-- CMD [ARGS...]]...\n");
        return 2;
    }
    int runs = atoi(argv[1]);
    char **commands[16];
    int count = 0;
    commands[count++] = argv + 2;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--") != 0) continue;
        if (count == 16) {
            fprintf(stderr, "paired: at most 16 commands\n");
            return 2;
        }
        argv[i] = NULL;
        commands[count++] = argv + i + 1;
    }
    for (int k = 0; k < count; k++) {
        if (commands[k][0] == NULL) {
            fprintf(stderr, "paired: an empty command (a -- first, last or twice)\n");
            return 2;
        }
    }
    double *wall = calloc((size_t)(count * runs), sizeof(double));
    double *cpu = calloc((size_t)(count * runs), sizeof(double));
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (!wall || !cpu || null < 0) return 1;
    for (int round = 0; round < runs; round++) {
        for (int k = 0; k < count; k++) {
            double began = microseconds();
            pid_t child = fork();
            if (child == 0) {
                dup2(null, 1);
                execv(commands[k][0], commands[k]);
                _exit(127);
            }
            int status;
            struct rusage usage;
            if (child < 0 || wait4(child, &status, 0, &usage) != child) return 1;
            double ended = microseconds();
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "paired: %s failed (status %d)\n", commands[k][0], status);
                return 1;
            }
            wall[k * runs + round] = ended - began;
            cpu[k * runs + round] = usage.ru_utime.tv_sec * 1e6 + usage.ru_utime.tv_usec
                + usage.ru_stime.tv_sec * 1e6 + usage.ru_stime.tv_usec;
        }
    }
    for (int k = 0; k < count; k++) {
        qsort(wall + k * runs, (size_t)runs, sizeof(double), ascending);
        qsort(cpu + k * runs, (size_t)runs, sizeof(double), ascending);
        printf("wall %7.0f µs  cpu %7.0f µs  %s\n", wall[k * runs + runs / 2], cpu[k * runs + runs / 2], commands[k][0]);
    }
    return 0;
}
