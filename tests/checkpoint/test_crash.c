/*
 * Crash safety: a child process saves generation after generation of a model
 * with dt_save_full and is SIGKILLed at a random moment, repeatedly. After
 * every kill the real path must hold one complete earlier generation (it
 * loads, and every value equals that generation's number) and nothing
 * half-written; leftovers may exist only under temporary names.
 */
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "ck_gpt_util.h"

#define ROUNDS 20

static dt_module *make_model(void)
{
    dt_module *m = NULL;
    CK_OK(dt_linear_create(512, 1024, true, &m)); /* 2 MB of weights: a save takes a while */
    return m;
}

static void fill(dt_module *m, double v)
{
    ck_params p;
    ck_params_of(m, &p);
    for (int i = 0; i < p.n; i++)
        CK_OK(dt_tensor_fill(p.t[i], v));
}

/* The generation every parameter of @p m holds; fails if they disagree. */
static int generation(dt_module *m)
{
    ck_params p;
    ck_params_of(m, &p);
    double g = dt_tensor_item_at(p.t[0], 0);
    for (int i = 0; i < p.n; i++)
        for (int64_t k = 0; k < dt_tensor_numel(p.t[i]); k++)
            if (dt_tensor_item_at(p.t[i], k) != g)
                fail_msg("%s[%lld] = %g in a file of generation %g: a mixed file", p.fqn[i],
                         (long long)k, dt_tensor_item_at(p.t[i], k), g);
    return (int)g;
}

/* An SGD-with-momentum optimizer over @p m. */
static dt_optim *make_optim(dt_module *m)
{
    dt_sgd_params p = {.field_mask = DT_SGD_PARAM_FIELD_MOMENTUM, .momentum = 0.9};
    dt_optim *o = NULL;
    CK_OK(dt_optim_sgd_create(m, &p, &o));
    CK_OK(dt_optim_state_init(o));
    return o;
}

/* Generation @p g of the optimizer: every state value and the step count. */
static void fill_optim(dt_optim *o, int g)
{
    for (int i = 0; i < dt_optim_num_params(o); i++)
        CK_OK(dt_tensor_fill(dt_optim_param_state(o, i, "momentum_buffer"), g));
    CK_OK(dt_optim_set_step_count(o, g));
}

/* The optimizer holds generation @p g (the weights' one) throughout. */
static void check_optim(dt_optim *o, int g)
{
    assert_int_equal(dt_optim_step_count(o), g);
    for (int i = 0; i < dt_optim_num_params(o); i++) {
        dt_tensor *t = dt_optim_param_state(o, i, "momentum_buffer");
        for (int64_t k = 0; k < dt_tensor_numel(t); k++)
            if (dt_tensor_item_at(t, k) != g)
                fail_msg("%s momentum[%lld] = %g next to weights of generation %d",
                         dt_optim_param_fqn(o, i), (long long)k, dt_tensor_item_at(t, k), g);
    }
}

/* Remove temporary leftovers; return how many there were. Any other file
 * than the real one is an error. */
static int sweep(const char *dir, const char *real)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, real) == 0)
            continue;
        if (strncmp(e->d_name, "m.safetensors.tmp-", 18) != 0)
            fail_msg("unexpected file %s/%s", dir, e->d_name);
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        unlink(p);
        n++;
    }
    closedir(d);
    return n;
}

/* SIGKILL the saving child @p pid after 1..40 ms and reap it: it must have
 * been killed, not have failed. */
static void kill_soon(pid_t pid)
{
    struct timespec ts = {0, (long)(1 + rand() % 40) * 1000000L};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
}

static void test_sigkill_during_save(void **state)
{
    (void)state;
    char dir[256], path[300];
    ck_tmpdir(dir, sizeof(dir), "crash");
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    dt_module *m = make_model();
    fill(m, 0);
    CK_OK(dt_save_full(m, path));
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int last = 0, mid_write = 0;
    for (int r = 0; r < ROUNDS; r++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (int g = last + 1;; g++) {
                fill(m, g);
                if (dt_save_full(m, path) != DT_OK)
                    _exit(3);
            }
        }
        kill_soon(pid);
        mid_write += sweep(dir, "m.safetensors") > 0;
        dt_module *back = make_model();
        fill(back, -1);
        CK_OK(dt_load_full(back, path));
        int g = generation(back);
        assert_true(g >= last);
        last = g;
        dt_module_destroy(back);
    }
    printf("%d rounds: %d killed mid-write, last complete generation %d\n", ROUNDS, mid_write,
           last);
    /* the child writes without pause, so kills land mid-write nearly always */
    assert_true(mid_write > 0);
    dt_module_destroy(m);
    ck_rmdir(dir);
}

/* Same for sharded checkpoints (weights and optimizer state) saved again and
 * again into one directory: index.json always names one complete earlier
 * save, whose weights, optimizer state and step count are one generation. */
static void test_sigkill_during_sharded_save(void **state)
{
    (void)state;
    char dir[256], ck[300];
    ck_tmpdir(dir, sizeof(dir), "crash_sharded");
    snprintf(ck, sizeof(ck), "%s/ck", dir);
    dt_module *m = make_model();
    dt_optim *o = make_optim(m);
    fill(m, 0);
    fill_optim(o, 0);
    CK_OK(dt_checkpoint_save(m, o, ck));
    int last = 0;
    for (int r = 0; r < ROUNDS; r++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (int g = last + 1;; g++) {
                fill(m, g);
                fill_optim(o, g);
                if (dt_checkpoint_save(m, o, ck) != DT_OK)
                    _exit(3);
            }
        }
        kill_soon(pid);
        dt_module *back = make_model();
        dt_optim *bo = make_optim(back);
        fill(back, -1);
        fill_optim(bo, 99999);
        CK_OK(dt_checkpoint_load(back, bo, ck));
        int g = generation(back);
        check_optim(bo, g);
        assert_true(g >= last);
        last = g;
        dt_optim_destroy(bo);
        dt_module_destroy(back);
    }
    printf("%d rounds of sharded saves: last complete generation %d\n", ROUNDS, last);
    dt_optim_destroy(o);
    dt_module_destroy(m);
    ck_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_during_save),
        cmocka_unit_test(test_sigkill_during_sharded_save),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
