/*
 * Files that are not files: a FIFO (nobody writing to it), a directory or a
 * device in place of a file every file-reading entry point takes must be
 * refused at once, naming the path and what it is. Each call runs in a child
 * process: a regression that blocks on the FIFO fails here after a deadline
 * instead of hanging the suite.
 */
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "ck_gpt_util.h"

#define CALL_LIMIT_S 1.0 /* how long a refusal may take */
#define HANG_LIMIT_S 10  /* the child is killed after this: it blocked */

typedef dt_status (*entry_fn)(const char *path);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * @p call(@p path) must return @p want within CALL_LIMIT_S with a message
 * holding @p path and @p text. Run in a child: the parent only waits.
 */
static void expect_refused(const char *what, entry_fn call, const char *path, dt_status want,
                           const char *text)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        double t0 = now_s();
        dt_status st = call(path);
        double took = now_s() - t0;
        const char *msg = st != DT_OK ? dt_last_error() : "";
        if (st != want || strstr(msg, path) == NULL || strstr(msg, text) == NULL) {
            fprintf(stderr, "%s(%s): got %s '%s', want %s naming the path with '%s'\n", what, path,
                    dt_status_str(st), msg, dt_status_str(want), text);
            _exit(1);
        }
        if (took > CALL_LIMIT_S) {
            fprintf(stderr, "%s(%s): refused after %.2f s, not at once\n", what, path, took);
            _exit(2);
        }
        _exit(0);
    }
    double t0 = now_s();
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_s() - t0 < HANG_LIMIT_S)
        usleep(2000);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("%s(%s) blocked for %d s", what, path, HANG_LIMIT_S);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s(%s) failed the check (status 0x%x, see stderr)", what, path, status);
}

static void make_fifo(const char *path)
{
    unlink(path);
    if (mkfifo(path, 0644) != 0)
        fail_msg("mkfifo %s: %s", path, strerror(errno));
}

/* ------------------------------------------------------------ entry points */

static dt_status call_safetensors_open(const char *path)
{
    dt_safetensors *f = NULL;
    dt_status st = dt_safetensors_open(path, &f);
    dt_safetensors_close(f);
    return st;
}

static dt_status call_load_full(const char *path)
{
    dt_module *m = NULL;
    dt_status st = dt_linear_create(3, 2, true, &m);
    if (st == DT_OK)
        st = dt_load_full(m, path);
    dt_module_destroy(m);
    return st;
}

static dt_status call_token_data_open(const char *path)
{
    dt_token_data *d = NULL;
    dt_status st = dt_token_data_open(path, &d);
    dt_token_data_close(d);
    return st;
}

static dt_status call_plan_load(const char *path)
{
    dt_plan *p = NULL;
    dt_status st = dt_plan_load(path, &p);
    dt_plan_destroy(p);
    return st;
}

/* @p path is the checkpoint directory; the FIFO is a file inside it. */
static dt_status call_checkpoint_load(const char *dir)
{
    dt_module *m = NULL;
    dt_status st = dt_linear_create(3, 2, true, &m);
    if (st == DT_OK)
        st = dt_checkpoint_load(m, NULL, dir);
    dt_module_destroy(m);
    return st;
}

/* ------------------------------------------------------------ tests */

static void test_fifo_single_files(void **state)
{
    (void)state;
    char dir[256], fifo[320];
    ck_tmpdir(dir, sizeof(dir), "fifo");
    snprintf(fifo, sizeof(fifo), "%s/pipe", dir);
    make_fifo(fifo);
    const char *is_fifo = "is a FIFO, not a regular file";
    expect_refused("dt_safetensors_open", call_safetensors_open, fifo, DT_ERR_INVALID_ARG, is_fifo);
    expect_refused("dt_load_full", call_load_full, fifo, DT_ERR_INVALID_ARG, is_fifo);
    expect_refused("dt_token_data_open", call_token_data_open, fifo, DT_ERR_INVALID_ARG, is_fifo);
    expect_refused("dt_plan_load", call_plan_load, fifo, DT_ERR_INVALID_ARG, is_fifo);
    ck_rmdir(dir);
}

static void test_other_kinds(void **state)
{
    (void)state;
    char dir[256];
    ck_tmpdir(dir, sizeof(dir), "notreg");
    const char *is_dir = "is a directory, not a regular file";
    expect_refused("dt_safetensors_open", call_safetensors_open, dir, DT_ERR_INVALID_ARG, is_dir);
    expect_refused("dt_token_data_open", call_token_data_open, dir, DT_ERR_INVALID_ARG, is_dir);
    expect_refused("dt_plan_load", call_plan_load, dir, DT_ERR_INVALID_ARG, is_dir);
    /* /dev/zero would be read forever by a size-less reader */
    const char *is_chr = "is a character device, not a regular file";
    expect_refused("dt_token_data_open", call_token_data_open, "/dev/zero", DT_ERR_INVALID_ARG,
                   is_chr);
    expect_refused("dt_plan_load", call_plan_load, "/dev/zero", DT_ERR_INVALID_ARG, is_chr);
    expect_refused("dt_load_full", call_load_full, "/dev/null", DT_ERR_INVALID_ARG, is_chr);
    /* a missing file still says so */
    char missing[320];
    snprintf(missing, sizeof(missing), "%s/missing", dir);
    expect_refused("dt_token_data_open", call_token_data_open, missing, DT_ERR_SYSTEM,
                   "cannot open");
    ck_rmdir(dir);
}

/* The rank file index.json names, and index.json itself, replaced by FIFOs or directories. */
static void test_fifo_in_checkpoint(void **state)
{
    (void)state;
    char dir[256], ck[300], path[400], rank_file[400] = "";
    ck_tmpdir(dir, sizeof(dir), "fifock");
    snprintf(ck, sizeof(ck), "%s/ck", dir);
    dt_module *m = NULL;
    CK_OK(dt_linear_create(3, 2, true, &m));
    CK_OK(dt_checkpoint_save(m, NULL, ck));
    CK_OK(call_checkpoint_load(ck));
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "ls '%s' | grep '^rank-0\\..*\\.safetensors$'", ck);
    FILE *ls = popen(cmd, "r");
    assert_non_null(ls);
    char name[200] = "";
    if (fgets(name, sizeof(name), ls) != NULL)
        name[strcspn(name, "\n")] = '\0';
    pclose(ls);
    assert_true(name[0] != '\0');
    snprintf(rank_file, sizeof(rank_file), "%s/%s", ck, name);

    /* the rank file */
    make_fifo(rank_file);
    expect_refused("dt_checkpoint_load", call_checkpoint_load, ck, DT_ERR_INVALID_ARG,
                   "is a FIFO, not a regular file");
    expect_refused("dt_checkpoint_load", call_checkpoint_load, ck, DT_ERR_INVALID_ARG, name);
    CK_OK(dt_checkpoint_save(m, NULL, ck)); /* a fresh save: new files */

    /* index.json */
    snprintf(path, sizeof(path), "%s/index.json", ck);
    make_fifo(path);
    expect_refused("dt_checkpoint_load", call_checkpoint_load, ck, DT_ERR_INVALID_ARG,
                   "index.json is a FIFO, not a regular file");
    unlink(path);
    if (mkdir(path, 0755) != 0)
        fail_msg("mkdir %s: %s", path, strerror(errno));
    expect_refused("dt_checkpoint_load", call_checkpoint_load, ck, DT_ERR_INVALID_ARG,
                   "index.json is a directory, not a regular file");
    rmdir(path);
    dt_module_destroy(m);
    ck_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_single_files),
        cmocka_unit_test(test_other_kinds),
        cmocka_unit_test(test_fifo_in_checkpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
