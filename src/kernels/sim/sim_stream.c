/*
 * The sim device's stream: an in-order job queue run by one worker thread,
 * started on first use. Submitting returns at once; dt__sim_synchronize waits
 * for the queue to drain. The first job that fails sets the sticky error
 * (status and message naming the entry), which every later submission and
 * synchronisation returns, as a CUDA stream's asynchronous errors do.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/error.h"
#include "kernels/sim/sim.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER; /* a job was queued */
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER; /* the queue drained */
static dt_sim_job *head, *tail;
static bool started; /* the worker exists */
static dt_status sticky_status = DT_OK;
static char sticky_msg[512];
static long delay_us;
static atomic_ullong submitted;

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (head == NULL)
            pthread_cond_wait(&work_cv, &lock);
        dt_sim_job *j = head;
        pthread_mutex_unlock(&lock);
        if (delay_us > 0)
            sleep_us(delay_us);
        dt_status st = j->run(j);
        if (j->done != NULL)
            j->done(j);
        pthread_mutex_lock(&lock);
        if (st != DT_OK && sticky_status == DT_OK) {
            sticky_status = st;
            snprintf(sticky_msg, sizeof(sticky_msg), "sim stream: %s failed: %s", j->name,
                     dt_last_error());
        }
        head = j->next;
        if (head == NULL)
            tail = NULL;
        free(j);
        if (head == NULL)
            pthread_cond_broadcast(&idle_cv);
    }
    return NULL;
}

/* A forked child has no worker: forget the parent's queue, start anew. */
static void after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&work_cv, NULL);
    pthread_cond_init(&idle_cv, NULL);
    head = tail = NULL;
    started = false;
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void install_fork_handler(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* At exit, let the queued kernels finish first: a GEMM still running on the
 * worker while the exit handlers tear OpenBLAS down crashed or hung the
 * process about one exit in six. Runs before every library destructor. */
static void drain_at_exit(void)
{
    pthread_mutex_lock(&lock);
    while (started && head != NULL)
        pthread_cond_wait(&idle_cv, &lock);
    pthread_mutex_unlock(&lock);
}

/* Caller holds the lock. */
static dt_status start_locked(void)
{
    if (started)
        return DT_OK;
    static bool at_exit;
    if (!at_exit)
        at_exit = atexit(drain_at_exit) == 0;
    delay_us = (long)dt__config_int("DT_SIM_DELAY_US");
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, worker, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return DT_ERR(DT_ERR_BACKEND, "sim stream: cannot start the worker thread: %s",
                      strerror(rc));
    started = true;
    return DT_OK;
}

/* Caller holds the lock: the sticky error, recorded as this thread's last error. */
static dt_status sticky_locked(void)
{
    if (sticky_status == DT_OK)
        return DT_OK;
    return DT_ERR(sticky_status, "%s", sticky_msg);
}

dt_status dt__sim_job_new(const char *name, dt_sim_run_fn run, dt_sim_job **out)
{
    dt_sim_job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "sim %s: no memory for a stream job", name);
    j->name = name;
    j->run = run;
    *out = j;
    return DT_OK;
}

dt_status dt__sim_submit(dt_sim_job *j)
{
    pthread_once(&fork_once, install_fork_handler);
    pthread_mutex_lock(&lock);
    dt_status st = j->after_errors ? DT_OK : sticky_locked();
    if (st == DT_OK)
        st = start_locked();
    if (st != DT_OK) {
        pthread_mutex_unlock(&lock);
        free(j);
        return st;
    }
    j->next = NULL;
    if (tail != NULL)
        tail->next = j;
    else
        head = j;
    tail = j;
    atomic_fetch_add(&submitted, 1);
    pthread_cond_signal(&work_cv);
    pthread_mutex_unlock(&lock);
    return DT_OK;
}

dt_status dt__sim_synchronize(void)
{
    pthread_mutex_lock(&lock);
    while (head != NULL)
        pthread_cond_wait(&idle_cv, &lock);
    dt_status st = sticky_locked();
    sticky_status = DT_OK;
    pthread_mutex_unlock(&lock);
    return st;
}

uint64_t dt__sim_jobs_submitted(void)
{
    return atomic_load(&submitted);
}

/* Copy @p t's geometry into the job's next slot over a copy of its storage. */
static dt_tensor *snapshot(dt_sim_job *j, const dt_tensor *t, void *data)
{
    int k = j->nt++;
    dt_tensor *c = &j->t[k];
    dt_storage *s = &j->s[k];
    memset(c, 0, sizeof(*c));
    memset(s, 0, sizeof(*s));
    atomic_init(&s->refcount, 1);
    s->data = data;
    s->nbytes = t->storage->nbytes;
    s->device = dt_device_cpu();
    s->category = t->storage->category;
    s->block_bytes = t->storage->block_bytes;
    atomic_init(&c->refcount, 1);
    c->ndim = t->ndim;
    memcpy(c->shape, t->shape, sizeof(c->shape));
    memcpy(c->strides, t->strides, sizeof(c->strides));
    c->offset = t->offset;
    c->dtype = t->dtype;
    c->device = dt_device_cpu();
    c->storage = s;
    return c;
}

static dt_status check_slot(dt_sim_job *j, const char *what, const dt_tensor *t)
{
    if (j->nt >= DT_SIM_JOB_TENSORS)
        return DT_ERR(DT_ERR_INTERNAL, "sim %s: more than %d tensor arguments", j->name,
                      DT_SIM_JOB_TENSORS);
    if (t->storage == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "sim %s: %s has no local storage (distributed?)", j->name,
                      what);
    return DT_OK;
}

dt_status dt__sim_job_tensor(dt_sim_job *j, const char *what, const dt_tensor *t, dt_tensor **slot)
{
    if (t == NULL) {
        *slot = NULL;
        return DT_OK;
    }
    DT_CHECK(check_slot(j, what, t));
    if (t->device.type != DT_DEVICE_SIM)
        return DT_ERR(DT_ERR_INVALID_ARG, "sim %s: %s is on %s:%d, not on the sim device", j->name,
                      what, dt_device_type_name(t->device.type), t->device.index);
    *slot = snapshot(j, t, dt__sim_untag(t->storage->data));
    return DT_OK;
}

dt_status dt__sim_job_host_tensor(dt_sim_job *j, const dt_tensor *t, dt_tensor **slot)
{
    DT_CHECK(check_slot(j, "host tensor", t));
    *slot = snapshot(j, t, t->storage->data);
    return DT_OK;
}

dt_status dt__sim_job_with(const char *name, dt_sim_run_fn run, const dt_tensor *const *args, int n,
                           dt_sim_job **out)
{
    static const char *const names[DT_SIM_JOB_TENSORS] = {"argument 1", "argument 2", "argument 3",
                                                          "argument 4", "argument 5", "argument 6",
                                                          "argument 7", "argument 8"};
    dt_sim_job *j = NULL;
    DT_CHECK(dt__sim_job_new(name, run, &j));
    for (int k = 0; k < n; k++) {
        dt_status st = k < DT_SIM_JOB_TENSORS
                           ? dt__sim_job_tensor(j, names[k], args[k], &j->a[k])
                           : DT_ERR(DT_ERR_INTERNAL, "sim %s: %d tensors", name, n);
        if (st != DT_OK) {
            free(j);
            return st;
        }
    }
    *out = j;
    return DT_OK;
}
