/* Cancellation (core/cancel.h): every long loop of the C layers stops with
 * "interrupted" once the flag is set, frees what it made, and works again
 * once the flag is cleared; a request from another thread ends a running
 * reference forward pass within the bound the REPL promises. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/cancel.h"
#include "core/compare.h"
#include "core/error.h"
#include "core/npy.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "lstm/lstm.h"

/* More elements than one polling interval, so element loops poll mid-way. */
#define BIG (3 * SPK_CANCEL_EVERY + 7)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static spk_tensor *uniform(spk_dtype dtype, int ndim, const int64_t *shape, uint64_t seed)
{
    spk_tensor *t = spk_tensor_new(dtype, ndim, shape);
    spk_rng rng;
    spk_rng_seed(&rng, seed);
    if (t && spk_rng_fill_uniform(&rng, t, -0.5, 0.5)) {
        spk_tensor_free(t);
        return NULL;
    }
    return t;
}

static int interrupted(void)
{
    return strcmp(spk_last_error(), "interrupted") == 0 || strstr(spk_last_error(), ": interrupted") != NULL;
}

TEST(flag_starts_clear_and_toggles)
{
    CHECK(!spk_cancel_requested());
    CHECK(spk_cancel_check() == 0);
    spk_cancel_request();
    CHECK(spk_cancel_requested());
    spk_clear_error();
    CHECK(spk_cancel_check() == -1);
    CHECK(strcmp(spk_last_error(), "interrupted") == 0);
    spk_cancel_reset();
    CHECK(!spk_cancel_requested());
    CHECK(spk_cancel_due(0) == false);
}

TEST(compare_and_allclose_stop)
{
    const int64_t shape[1] = {BIG};
    spk_tensor *a = uniform(SPK_F32, 1, shape, 1), *b = uniform(SPK_F32, 1, shape, 2);
    CHECK(a && b);
    spk_comparison c;
    bool close = true;
    spk_cancel_request();
    CHECK(spk_compare(a, b, &c) == -1 && interrupted());
    CHECK(spk_allclose(a, b, 0, 0, &close) == -1 && interrupted());
    spk_cancel_reset();
    CHECK(spk_compare(a, b, &c) == 0 && c.count == BIG);
    CHECK(spk_allclose(a, a, 0, 0, &close) == 0 && close);
    spk_tensor_free(a);
    spk_tensor_free(b);
}

TEST(random_fill_stops)
{
    const int64_t shape[2] = {3, BIG};
    spk_tensor *t = spk_tensor_new(SPK_F64, 2, shape);
    spk_rng rng;
    spk_rng_seed(&rng, 7);
    spk_cancel_request();
    CHECK(spk_rng_fill_normal(&rng, t, 0, 1) == -1 && interrupted());
    CHECK(spk_rng_fill_uniform(&rng, t, 0, 1) == -1 && interrupted());
    spk_lstm_weights w[2];
    CHECK(spk_lstm_random(2, 8, 4, 1, 1.0, SPK_F32, w) == -1 && interrupted());
    spk_cancel_reset();
    CHECK(spk_rng_fill_normal(&rng, t, 0, 1) == 0);
    CHECK(spk_lstm_random(2, 8, 4, 1, 1.0, SPK_F32, w) == 0);
    spk_lstm_weights_free(&w[0]);
    spk_lstm_weights_free(&w[1]);
    spk_tensor_free(t);
}

TEST(packing_stops)
{
    const int64_t wshape[3] = {2, 16, 5}, bshape[2] = {2, 32};
    spk_tensor *W = uniform(SPK_F32, 3, wshape, 3), *B = uniform(SPK_F64, 2, bshape, 4);
    spk_cancel_request();
    CHECK(spk_lstm_pack_directions(W, "iofc", "ifco") == NULL && interrupted());
    CHECK(spk_lstm_unpack_directions(W, "iofc", "ifco") == NULL && interrupted());
    CHECK(spk_lstm_pack_bias(B, "iofc", "ifco") == NULL && interrupted());
    CHECK(spk_lstm_reorder_gates(W, 1, "iofc", "ifco") == NULL && interrupted());
    spk_cancel_reset();
    spk_tensor *p = spk_lstm_pack_directions(W, "iofc", "ifco");
    spk_tensor *q = spk_lstm_pack_bias(B, "iofc", "ifco");
    spk_tensor *r = spk_lstm_reorder_gates(W, 1, "iofc", "ifco");
    CHECK(p && q && r);
    spk_tensor_free(p);
    spk_tensor_free(q);
    spk_tensor_free(r);
    spk_tensor_free(W);
    spk_tensor_free(B);
}

TEST(file_readers_stop)
{
    const char *dir = check_scratch_dir("test-cancel");
    char npy[600], st[600];
    snprintf(npy, sizeof npy, "%s/t.npy", dir);
    snprintf(st, sizeof st, "%s/t.safetensors", dir);
    const int64_t shape[1] = {BIG};
    spk_tensor *t = uniform(SPK_F32, 1, shape, 5);
    CHECK(spk_npy_save(npy, t) == 0);
    spk_named_tensor item = {"x", t};
    spk_tensor_list list = {1, &item};
    CHECK(spk_safetensors_save(st, &list) == 0);

    spk_cancel_request();
    CHECK(spk_npy_load(npy) == NULL && interrupted());
    CHECK_STR_CONTAINS(spk_last_error(), npy);
    spk_tensor_list got = {0, NULL};
    CHECK(spk_safetensors_load(st, &got) == -1 && interrupted());
    CHECK_STR_CONTAINS(spk_last_error(), st);
    spk_cancel_reset();
    spk_tensor *back = spk_npy_load(npy);
    CHECK(back && spk_tensor_numel(back) == BIG);
    CHECK(spk_safetensors_load(st, &got) == 0 && got.count == 1);
    spk_tensor_list_free(&got);
    spk_tensor_free(back);
    spk_tensor_free(t);
}

struct stack {
    spk_lstm_weights w[1];
    spk_lstm_layer layer[1];
    spk_tensor *x;
};

static void stack_new(struct stack *s, int64_t batch, int64_t steps)
{
    CHECK(spk_lstm_random(1, 32, 128, 1, 1.0, SPK_F64, s->w) == 0);
    s->layer[0] = (spk_lstm_layer){s->w[0].W, s->w[0].R, s->w[0].B};
    const int64_t shape[3] = {batch, steps, 32};
    s->x = uniform(SPK_F64, 3, shape, 9);
}

static void stack_free(struct stack *s)
{
    spk_lstm_weights_free(&s->w[0]);
    spk_tensor_free(s->x);
}

TEST(reference_stops_when_requested_before)
{
    struct stack s;
    stack_new(&s, 2, 16);
    spk_lstm_reference_options o = spk_lstm_reference_defaults();
    o.threads = 2;
    spk_lstm_reference_result r;
    spk_cancel_request();
    CHECK(spk_lstm_reference(s.layer, 1, s.x, &o, &r) == -1 && interrupted());
    CHECK(r.y == NULL);
    spk_cancel_reset();
    CHECK(spk_lstm_reference(s.layer, 1, s.x, &o, &r) == 0 && r.y != NULL);
    spk_lstm_reference_result_free(&r);
    stack_free(&s);
}

static double requested_at, requested_cpu;
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *request_later(void *arg)
{
    usleep((useconds_t)(*(int *)arg) * 1000);
    requested_at = now_ms();
    requested_cpu = cpu_ms();
    spk_cancel_request();
    return NULL;
}

/* Forward passes, interrupted from another thread (as a signal handler
 * would) after 200 ms: the pass running then returns within the bound. The
 * passes repeat until one is interrupted, so the run is long by its own
 * measure however fast the machine. The polls are in the threads' work; a
 * pass's setup (zeroing its outputs: 12 MB here) is not, so the outputs
 * stay small beside the bound (at 6,000 steps, 49 MB took up to 30 ms). */
TEST(reference_stops_mid_run_within_the_bound)
{
    struct stack s;
    stack_new(&s, 4, 1500);
    spk_lstm_reference_options o = spk_lstm_reference_defaults();
    o.threads = 2;
    o.layers_out = true;
    spk_lstm_reference_result r;
    int delay_ms = 200;
    pthread_t thread;
    double start = now_ms(), end = start;
    CHECK(pthread_create(&thread, NULL, request_later, &delay_ms) == 0);
    int rc = 0;
    while (rc == 0 && end - start < 60000) {
        rc = spk_lstm_reference(s.layer, 1, s.x, &o, &r);
        end = now_ms();
        if (rc == 0)
            spk_lstm_reference_result_free(&r);
    }
    pthread_join(thread, NULL);
    spk_cancel_reset();
    CHECK(rc == -1 && interrupted());
    CHECK(r.y == NULL && r.layer_outputs == NULL);
    double latency = end - requested_at;
    double cpu = cpu_ms() - requested_cpu;
    printf("# reference: interrupted %.1f ms after the request (%.0f ms into the run), %.1f ms of CPU meanwhile\n",
           latency, requested_at - start, cpu);
    /* The bound is 100 ms: every thread polls within a recurrence step or a
     * projection block. A loaded machine may not schedule the threads at
     * once, so the wall clock gets a margin; the CPU time they spend before
     * stopping (the work done after the request, both threads) must not. */
    CHECK(latency >= 0 && latency < 100 * 5);
    CHECK(cpu < 100);
    stack_free(&s);
}

int main(void)
{
    RUN(flag_starts_clear_and_toggles);
    RUN(compare_and_allclose_stop);
    RUN(random_fill_stops);
    RUN(packing_stops);
    RUN(file_readers_stop);
    RUN(reference_stops_when_requested_before);
    RUN(reference_stops_mid_run_within_the_bound);
    return CHECK_SUMMARY();
}
