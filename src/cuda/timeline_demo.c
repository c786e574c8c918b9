/* The timeline demo as a plan: see timeline_demo.h. */
#include "cuda/timeline_demo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "timeline_demo_stages.cuh"

#define DEMO_STAGE_NAME(name, text) text,
static const char *const stage_names[] = {SPK_TIMELINE_DEMO_STAGES(DEMO_STAGE_NAME)};
/* The wait (the cluster barrier) is for every block's publish of the previous step. */
static const int stage_waits_for[SPK_TIMELINE_DEMO_STAGE_COUNT] = {
    [SPK_TIMELINE_DEMO_WAIT] = SPK_TIMELINE_DEMO_PUBLISH, [SPK_TIMELINE_DEMO_DOT] = -1,
    [SPK_TIMELINE_DEMO_REDUCE] = -1, [SPK_TIMELINE_DEMO_CELL] = -1, [SPK_TIMELINE_DEMO_PUBLISH] = -1};
static const spk_timeline_stages demo_stages = {SPK_TIMELINE_DEMO_STAGE_COUNT, stage_names, stage_waits_for};

struct spk_timeline_demo {
    spk_timeline_demo_shape shape;
    spk_timeline_demo_geometry geometry;
    spk_stream *stream;
    spk_tensor *weights;           /* device f32 [2, H, H] */
    spk_module *module[2];         /* plain, timeline build */
    spk_kernel *kernel[2];
};

const spk_timeline_stages *spk_timeline_demo_stages(void)
{
    return &demo_stages;
}

int spk_timeline_demo_check(const spk_timeline_demo_shape *s, spk_timeline_demo_geometry *g)
{
    if (s->cluster != 2 && s->cluster != 4 && s->cluster != 8)
        return spk_fail("timeline demo: cluster must be 2, 4 or 8 blocks, got %d", s->cluster);
    if (s->batch < 1 || s->batch > (int64_t)SPK_TIMELINE_DEMO_MAX_ROWS * 65535)
        return spk_fail("timeline demo: batch must be 1 .. %d, got %lld", SPK_TIMELINE_DEMO_MAX_ROWS * 65535,
                        (long long)s->batch);
    if (s->steps < 1 || s->steps > INT32_MAX)
        return spk_fail("timeline demo: steps must be 1 .. %d, got %lld", INT32_MAX, (long long)s->steps);
    g->hidden = SPK_TIMELINE_DEMO_HIDDEN;
    g->threads = SPK_TIMELINE_DEMO_HIDDEN / s->cluster * SPK_TIMELINE_DEMO_CHUNKS;
    g->tile_rows = (int)(s->batch < SPK_TIMELINE_DEMO_MAX_ROWS ? s->batch : SPK_TIMELINE_DEMO_MAX_ROWS);
    g->tiles = (int)((s->batch + g->tile_rows - 1) / g->tile_rows);
    g->blocks = s->cluster * g->tiles;
    return 0;
}

spk_module *spk_timeline_demo_compile(int cluster, bool timeline, const char *arch)
{
    if (cluster != 2 && cluster != 4 && cluster != 8)
        return spk_fail_null("timeline demo: cluster must be 2, 4 or 8 blocks, got %d", cluster);
    char path[4096], value[16];
    snprintf(path, sizeof path, "%s/timeline_demo.cu", spk_kernel_dir());
    snprintf(value, sizeof value, "%d", cluster);
    spk_define defines[2] = {{"CLUSTER", value}, {"SPK_TIMELINE", "1"}};
    spk_compile_options o = {0};
    o.file = path;
    o.defines = defines;
    o.ndefines = timeline ? 2 : 1;
    o.arch = arch;
    return spk_compile(&o);
}

const spk_timeline_demo_geometry *spk_timeline_demo_geometry_of(const spk_timeline_demo *d)
{
    return &d->geometry;
}

void spk_timeline_demo_free(spk_timeline_demo *d)
{
    if (!d)
        return;
    for (int i = 0; i < 2; i++) {
        spk_kernel_free(d->kernel[i]);
        spk_module_release(d->module[i]);
    }
    spk_tensor_free(d->weights);
    spk_stream_release(d->stream);
    free(d);
}

/* The plain or the timeline build, compiled and loaded on first use. */
static spk_kernel *kernel_of(spk_timeline_demo *d, bool timeline)
{
    int i = timeline ? 1 : 0;
    if (d->kernel[i])
        return d->kernel[i];
    spk_module *m = spk_timeline_demo_compile(d->shape.cluster, timeline, NULL);
    spk_kernel *k = m ? spk_module_kernel(m, SPK_TIMELINE_DEMO_KERNEL) : NULL;
    if (!k) {
        spk_error_prefix("timeline demo: the %s build", timeline ? "timeline" : "plain");
        spk_module_release(m);
        return NULL;
    }
    d->module[i] = m;
    d->kernel[i] = k;
    return k;
}

spk_timeline_demo *spk_timeline_demo_new(const spk_timeline_demo_shape *shape, const spk_tensor *weights)
{
    spk_timeline_demo_geometry g;
    if (spk_timeline_demo_check(shape, &g) != 0)
        return NULL;
    int64_t H = g.hidden;
    if (!weights || weights->dtype != SPK_F32 || weights->ndim != 3 || weights->shape[0] != 2 ||
        weights->shape[1] != H || weights->shape[2] != H || !spk_tensor_is_host(weights))
        return spk_fail_null("timeline demo: weights must be a host f32 tensor [2, %lld, %lld]", (long long)H,
                             (long long)H);
    int device;
    spk_device_props props;
    if (spk_cuda_require() != 0 || spk_device_current(&device) != 0 || spk_device_props_get(device, &props) != 0)
        return NULL;
    if (props.cc_major < 9)
        return spk_fail_null("timeline demo: needs compute capability 9.0 (thread-block clusters); this device: %d.%d",
                             props.cc_major, props.cc_minor);
    spk_timeline_demo *d = calloc(1, sizeof *d);
    if (!d)
        return spk_fail_null("timeline demo: out of memory");
    d->shape = *shape;
    d->geometry = g;
    if (!(d->stream = spk_stream_new()) || !(d->weights = spk_tensor_to_device(weights, d->stream)) ||
        !kernel_of(d, false)) {
        spk_timeline_demo_free(d);
        return NULL;
    }
    return d;
}

static int check_x(const spk_timeline_demo *d, const spk_tensor *x)
{
    const spk_timeline_demo_shape *s = &d->shape;
    if (!x || x->dtype != SPK_F32 || x->ndim != 3 || x->shape[0] != s->batch || x->shape[1] != s->steps ||
        x->shape[2] != d->geometry.hidden)
        return spk_fail("timeline demo: x must be an f32 tensor [%lld, %lld, %d]", (long long)s->batch,
                        (long long)s->steps, d->geometry.hidden);
    return 0;
}

static int launch(spk_timeline_demo *d, bool timeline, const spk_tensor *x, spk_tensor *y, const spk_timeline *tl)
{
    spk_kernel *k = kernel_of(d, timeline);
    if (!k)
        return -1;
    const spk_timeline_demo_geometry *g = &d->geometry;
    spk_launch_config cfg = {0};
    cfg.grid[0] = (unsigned)d->shape.cluster;
    cfg.grid[1] = (unsigned)g->tiles;
    cfg.grid[2] = 2;
    cfg.block[0] = (unsigned)g->threads;
    cfg.block[1] = cfg.block[2] = 1;
    cfg.cluster[0] = (unsigned)d->shape.cluster;
    cfg.cluster[1] = cfg.cluster[2] = 1;
    cfg.stream = d->stream;
    spk_storage *uses[4] = {x->storage, d->weights->storage, y->storage, spk_timeline_storage(tl)};
    cfg.uses = uses;
    cfg.nuses = tl ? 4 : 3;
    spk_arg args[6 + SPK_TIMELINE_ARGS] = {
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(x)}},
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(d->weights)}},
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(y)}},
        {SPK_ARG_I32, {.i32 = (int32_t)d->shape.batch}},
        {SPK_ARG_I32, {.i32 = (int32_t)d->shape.steps}},
        {SPK_ARG_I32, {.i32 = g->tile_rows}},
    };
    /* One layer (0), one launch holding every block of both directions (block offset 0). */
    spk_timeline_args(tl, 0, 0, args + 6);
    return spk_kernel_launch(k, &cfg, args, timeline ? 6 + SPK_TIMELINE_ARGS : 6);
}

/* x as a contiguous device tensor (a new reference, or a copy). */
static spk_tensor *device_x(spk_timeline_demo *d, const spk_tensor *x)
{
    if (spk_tensor_is_device(x) && spk_tensor_is_contiguous(x))
        return spk_tensor_view(x, x->ndim, x->shape);
    if (spk_tensor_is_device(x))
        return spk_tensor_contiguous(x);
    return spk_tensor_to_device(x, d->stream);
}

static int check_selection(const spk_timeline_demo *d, const spk_timeline_selection *sel)
{
    return spk_timeline_selection_check(sel, 1, d->shape.steps, d->geometry.blocks, d->geometry.threads / 32);
}

spk_tensor *spk_timeline_demo_forward(spk_timeline_demo *d, const spk_tensor *x, const spk_timeline_selection *sel,
                                      spk_tensor **stamps, spk_timeline_clock *clock)
{
    if (stamps)
        *stamps = NULL;
    if (check_x(d, x) != 0 || (sel && check_selection(d, sel) != 0))
        return NULL;
    spk_tensor *dx = NULL, *y = NULL, *raw = NULL, *out = NULL;
    spk_timeline *tl = NULL;
    int64_t shape[3] = {d->shape.batch, d->shape.steps, 2 * (int64_t)d->geometry.hidden};
    if (!(dx = device_x(d, x)) || !(y = spk_device_tensor_new(SPK_F32, 3, shape, d->stream)))
        goto done;
    if (sel && !(tl = spk_timeline_new(sel, &demo_stages, d->stream)))
        goto done;
    if (launch(d, sel != NULL, dx, y, tl) != 0 || spk_stream_synchronize(d->stream) != 0)
        goto done;
    if (tl && (!(raw = spk_timeline_read(tl, d->stream)) ||
               !(*stamps = spk_timeline_decode(raw, &demo_stages, 0, clock))))
        goto done;
    out = spk_tensor_is_device(x) ? y : spk_tensor_to_host(y, d->stream);
    if (out == y)
        y = NULL;
done:
    spk_tensor_free(dx);
    spk_tensor_free(y);
    spk_tensor_free(raw);
    spk_timeline_free(tl);
    if (!out)
        spk_error_prefix("timeline demo: forward");
    return out;
}

int spk_timeline_demo_time(spk_timeline_demo *d, const spk_tensor *x, bool timeline, const spk_timeline_selection *sel,
                           int rounds, int warmup, double *ms)
{
    if (rounds < 1 || warmup < 0)
        return spk_fail("timeline demo time: rounds must be >= 1 and warmup >= 0, got %d and %d", rounds, warmup);
    if (sel && !timeline)
        return spk_fail("timeline demo time: only the timeline build records a selection");
    if (check_x(d, x) != 0 || (sel && check_selection(d, sel) != 0))
        return -1;
    int rc = -1;
    spk_tensor *dx = NULL, *y = NULL;
    spk_timeline *tl = NULL;
    spk_event *start = spk_event_new(true), *end = spk_event_new(true);
    int64_t shape[3] = {d->shape.batch, d->shape.steps, 2 * (int64_t)d->geometry.hidden};
    if (!start || !end || !(dx = device_x(d, x)) || !(y = spk_device_tensor_new(SPK_F32, 3, shape, d->stream)))
        goto done;
    if (sel && !(tl = spk_timeline_new(sel, &demo_stages, d->stream)))
        goto done;
    for (int i = 0; i < warmup; i++)
        if (launch(d, timeline, dx, y, tl) != 0)
            goto done;
    for (int i = 0; i < rounds; i++) {
        float t;
        if (spk_event_record(start, d->stream) || launch(d, timeline, dx, y, tl) ||
            spk_event_record(end, d->stream) || spk_event_synchronize(end) || spk_event_elapsed_ms(start, end, &t))
            goto done;
        ms[i] = t;
    }
    rc = spk_stream_synchronize(d->stream);
done:
    if (rc != 0)
        spk_error_prefix("timeline demo: time");
    spk_event_free(start);
    spk_event_free(end);
    spk_tensor_free(dx);
    spk_tensor_free(y);
    spk_timeline_free(tl);
    return rc;
}
