/*
 * dtrun_probe: the program the dtrun tests launch. Modes:
 *   env                          print this rank's launcher variables on one line
 *   lines N                      print N long lines, each in several write()s
 *   exit CODE R [ignore-term]    rank R exits CODE; the others print their pid and sleep
 *   selfkill R [ignore-term]     rank R SIGKILLs itself; the others print their pid and sleep
 *   trapint                      print "ready", wait for SIGINT, print "got SIGINT", exit 0
 * "ignore-term" makes the sleeping ranks ignore SIGTERM, so only SIGKILL ends them.
 * A sleeping rank exits 1 on SIGUSR1 (as a rank that lost a peer would).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank(void)
{
    const char *r = getenv("RANK");
    return r ? atoi(r) : -1;
}

static const char *ev(const char *k)
{
    const char *v = getenv(k);
    return v ? v : "-";
}

static void on_usr1(int sig)
{
    (void)sig;
    _exit(1);
}

static void sleep_forever(int argc, char **argv, int argi)
{
    signal(SIGUSR1, on_usr1);
    if (argc > argi && strcmp(argv[argi], "ignore-term") == 0)
        signal(SIGTERM, SIG_IGN);
    printf("pid %d %d\n", rank(), (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}

static void msleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void on_int(int sig)
{
    static const char msg[] = "got SIGINT\n";
    (void)!write(1, msg, sizeof(msg) - 1);
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "env";
    if (strcmp(mode, "env") == 0) {
        printf("RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s "
               "MASTER_PORT=%s DT_JOB_TOKEN=%s DT_STORE_BIND=%s\n",
               ev("RANK"), ev("WORLD_SIZE"), ev("LOCAL_RANK"), ev("LOCAL_WORLD_SIZE"),
               ev("MASTER_ADDR"), ev("MASTER_PORT"), ev("DT_JOB_TOKEN"), ev("DT_STORE_BIND"));
        return 0;
    }
    if (strcmp(mode, "lines") == 0 && argc > 2) {
        int n = atoi(argv[2]);
        char pad[200];
        memset(pad, 'a' + rank() % 26, sizeof(pad));
        for (int i = 0; i < n; i++) {
            char head[64];
            int hl = snprintf(head, sizeof(head), "rank=%d line=%d ", rank(), i);
            /* three writes per line: a line must still come out whole */
            (void)!write(1, head, (size_t)hl);
            sched_yield();
            (void)!write(1, pad, sizeof(pad));
            sched_yield();
            (void)!write(1, " end\n", 5);
        }
        static const char tail[] = "no newline at the end";
        (void)!write(1, tail, sizeof(tail) - 1);
        return 0;
    }
    if (strcmp(mode, "exit") == 0 && argc > 3) {
        if (rank() == atoi(argv[3])) {
            msleep(500);
            return atoi(argv[2]);
        }
        sleep_forever(argc, argv, 4);
    }
    if (strcmp(mode, "selfkill") == 0 && argc > 2) {
        if (rank() == atoi(argv[2])) {
            msleep(500);
            raise(SIGKILL);
        }
        sleep_forever(argc, argv, 3);
    }
    if (strcmp(mode, "trapint") == 0) {
        signal(SIGINT, on_int);
        printf("ready\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    fprintf(stderr, "dtrun_probe: bad arguments\n");
    return 64;
}
