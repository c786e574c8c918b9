/* The GPU LSTM stack around a recurrence kernel: see kernel_stack.h and
 * docs/kernels.md (the contract). */
#include "lstm/kernel_stack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "cuda/cluster.h"
#include "cuda/nvtx.h"

/* ---- the contract's arguments ------------------------------------------- */

const spk_recurrence_arg_info spk_recurrence_args[SPK_RA_COUNT] = {
    [SPK_RA_GATES] = {"gates", SPK_ARG_PTR, "const float *",
                      "x·Wᵀ of this direction: [batch * steps, 4H], row b * steps + t (t the time position), the "
                      "gate columns in the packing; the bias is not in it",
                      "both directions' x·Wᵀ: [2, batch * steps, 4H], direction d at d * batch * steps * 4H"},
    [SPK_RA_R] = {"r", SPK_ARG_PTR, "const float *", "this direction's R, [4H, H], rows in the packing",
                  "both directions' R, [2, 4H, H]"},
    [SPK_RA_BIAS] = {"bias", SPK_ARG_PTR, "const float *", "this direction's Wb + Rb, [4H], in the packing",
                     "both directions' Wb + Rb, [2, 4H]"},
    [SPK_RA_OUTPUT] = {"output", SPK_ARG_PTR, "float *",
                       "this direction's first column of y [batch, steps, 2H]: h of row b, time t, unit u goes to "
                       "output[(b * steps + t) * 2H + u]",
                       "y [batch, steps, 2H] itself: direction d's unit u in column d * H + u"},
    [SPK_RA_STATE] = {"state", SPK_ARG_PTR, "unsigned long long *",
                      "this direction's state_words 64-bit words, zero at the start of each forward pass (not of "
                      "each layer)",
                      "both directions' 2 * state_words words, direction 1's after direction 0's"},
    [SPK_RA_STATUS] = {"status", SPK_ARG_PTR, "unsigned *",
                       "0 at the start of each pass; a kernel that gives up writes a code (atomicCAS from 0), which "
                       "the plan reports after the pass",
                       NULL},
    [SPK_RA_BATCH] = {"batch", SPK_ARG_I32, "int", "batch rows", NULL},
    [SPK_RA_STEPS] = {"steps", SPK_ARG_I32, "int", "time steps", NULL},
    [SPK_RA_HIDDEN] = {"hidden", SPK_ARG_I32, "int", "hidden units H", NULL},
    [SPK_RA_LAYER] = {"layer", SPK_ARG_I32, "int", "the layer, from 0", NULL},
    [SPK_RA_DIRECTION] = {"direction", SPK_ARG_I32, "int",
                          "0 forward (step s at time t = s), 1 reverse (t = steps - 1 - s); a kernel that takes it is "
                          "launched once per direction, any other once for both",
                          NULL},
    [SPK_RA_FIRST_TILE] = {"first_tile", SPK_ARG_I32, "int", "the launch's first batch tile (0 for a single launch)",
                           NULL},
    [SPK_RA_TILE_ROWS] = {"tile_rows", SPK_ARG_I32, "int", "batch rows a tile, the launch rule's", NULL},
    [SPK_RA_FLAG_BASE] = {"flag_base", SPK_ARG_U32, "unsigned",
                          "layer * steps: step flags that grow across the layers of a pass, so state cleared once a "
                          "pass never matches a stale flag",
                          NULL},
    [SPK_RA_TIMEOUT_NS] = {"timeout_ns", SPK_ARG_U64, "unsigned long long",
                           "the longest a wait may last (globaltimer ns) before the kernel gives up and writes a "
                           "status; 0: never",
                           NULL},
    [SPK_RA_TRACE] = {"trace", SPK_ARG_PTR, "float *",
                      "a traced forward's buffer [2, trace_slots, batch, H] (h, then c) in the launch of the traced "
                      "layer and direction; NULL in every other launch",
                      "the buffer in the traced layer's launch (write only direction trace_direction); else NULL"},
    [SPK_RA_TRACE_SLOT] = {"trace_slot", SPK_ARG_PTR, "const int *",
                           "[steps]: the slot of time position t in the trace buffer, -1 where t is not traced; NULL "
                           "outside a traced forward",
                           NULL},
    [SPK_RA_TRACE_SLOTS] = {"trace_slots", SPK_ARG_I32, "int", "slots in the trace buffer (0: no trace)", NULL},
    [SPK_RA_TRACE_DIRECTION] = {"trace_direction", SPK_ARG_I32, "int",
                                "the traced direction (0, 1), or -1 outside the traced layer", NULL},
};

int spk_recurrence_arg_find(const char *name)
{
    for (int i = 0; name && i < SPK_RA_COUNT; i++)
        if (strcmp(spk_recurrence_args[i].name, name) == 0)
            return i;
    char names[512] = "";
    size_t used = 0;
    for (int i = 0; i < SPK_RA_COUNT && used + 1 < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", spk_recurrence_args[i].name);
    return spk_fail("\"%s\" is not an argument of the recurrence-kernel contract (its arguments: %s)",
                    name ? name : "(none)", names);
}

bool spk_recurrence_takes(const int *args, int nargs, int arg)
{
    for (int i = 0; i < nargs; i++)
        if (args[i] == arg)
            return true;
    return false;
}

static int check_list(const char *kernel, const int *args, int nargs)
{
    if (nargs > SPK_KERNEL_STACK_MAX_ARGS)
        return spk_fail("kernel %s: %d arguments, at most %d", kernel, nargs, SPK_KERNEL_STACK_MAX_ARGS);
    for (int i = 0; i < nargs; i++) {
        if (args[i] < 0 || args[i] >= SPK_RA_COUNT)
            return spk_fail("kernel %s: argument %d is no argument of the contract", kernel, i + 1);
        for (int j = 0; j < i; j++)
            if (args[j] == args[i])
                return spk_fail("kernel %s: the argument list names %s twice (arguments %d and %d)", kernel,
                                spk_recurrence_args[args[i]].name, j + 1, i + 1);
    }
    if (spk_recurrence_takes(args, nargs, SPK_RA_DIRECTION) && spk_recurrence_takes(args, nargs, SPK_RA_TRACE_DIRECTION))
        return spk_fail("kernel %s: trace_direction is for a kernel launched once for both directions; one that "
                        "takes direction is launched per direction and gets the trace buffer only in the traced one",
                        kernel);
    return 0;
}

/* "a pointer", "int", ... as a message names the contract's side. */
static const char *kind_words(spk_arg_kind kind)
{
    switch (kind) {
    case SPK_ARG_PTR: return "a pointer (8 bytes)";
    case SPK_ARG_I32: return "an int (4 bytes)";
    case SPK_ARG_U32: return "an unsigned (4 bytes)";
    case SPK_ARG_U64: return "an unsigned long long (8 bytes)";
    case SPK_ARG_I64: return "a long long (8 bytes)";
    case SPK_ARG_F32: return "a float (4 bytes)";
    case SPK_ARG_F64: return "a double (8 bytes)";
    }
    return "?";
}

static int count_mismatch(const char *kernel, const int *args, int nargs, int nparams)
{
    if (nparams < nargs)
        return spk_fail("kernel %s takes %d parameter%s, the argument list names %d: the kernel has no parameter "
                        "for %s (argument %d)",
                        kernel, nparams, nparams == 1 ? "" : "s", nargs, spk_recurrence_args[args[nparams]].name,
                        nparams + 1);
    return spk_fail("kernel %s takes %d parameters, the argument list names %d: parameter %d has no argument (add "
                    "the contract's name for it to args, in the kernel's order)",
                    kernel, nparams, nargs, nargs + 1);
}

int spk_recurrence_check_params(const char *kernel, const int *args, int nargs, const spk_ptx_param *params,
                                int nparams)
{
    if (check_list(kernel, args, nargs) != 0)
        return -1;
    if (nparams != nargs)
        return count_mismatch(kernel, args, nargs, nparams);
    for (int i = 0; i < nargs; i++) {
        const spk_recurrence_arg_info *a = &spk_recurrence_args[args[i]];
        const spk_ptx_param *p = &params[i];
        bool want_float = a->kind == SPK_ARG_F32 || a->kind == SPK_ARG_F64;
        char cls = spk_ptx_type_class(p->type);
        if (p->size != spk_arg_size(a->kind) || p->elements != 1 || (cls == 'f') != want_float)
            return spk_fail("kernel %s: parameter %d is %s%s (%zu bytes), but args[%d] is \"%s\", which the "
                            "contract passes as %s: declare it `%s %s` or fix args",
                            kernel, i + 1, p->elements != 1 ? "an array of " : "a ", p->type, p->size, i + 1, a->name,
                            kind_words(a->kind), a->c_type, a->name);
    }
    return 0;
}

int spk_recurrence_check_sizes(const char *kernel, const int *args, int nargs, const size_t *sizes, int nparams)
{
    if (check_list(kernel, args, nargs) != 0)
        return -1;
    if (nparams != nargs)
        return count_mismatch(kernel, args, nargs, nparams);
    for (int i = 0; i < nargs; i++) {
        const spk_recurrence_arg_info *a = &spk_recurrence_args[args[i]];
        if (sizes[i] != spk_arg_size(a->kind))
            return spk_fail("kernel %s: parameter %d is %zu bytes, but args[%d] is \"%s\", which the contract "
                            "passes as %s",
                            kernel, i + 1, sizes[i], i + 1, a->name, kind_words(a->kind));
    }
    return 0;
}

/* ---- descriptions --------------------------------------------------------- */

static const char *direction_name(int d) { return d == 0 ? "forward" : d == 1 ? "reverse" : "both directions"; }

int spk_kernel_stack_desc_check(const spk_kernel_stack_desc *d)
{
    const char *name = d->name ? d->name : "?";
    if (check_list(name, d->args, d->nargs) != 0)
        return -1;
    if (d->nlaunches < 1 || !d->launches)
        return spk_fail("kernel %s: the launch rule gives no launch", name);
    bool per_direction = spk_recurrence_takes(d->args, d->nargs, SPK_RA_DIRECTION);
    bool seen[2] = {false, false};
    for (int i = 0; i < d->nlaunches; i++) {
        const spk_kernel_stack_launch *l = &d->launches[i];
        if (per_direction && l->direction != 0 && l->direction != 1)
            return spk_fail("kernel %s: launch %d must be of direction 0 or 1 (the kernel takes direction)", name,
                            i + 1);
        if (!per_direction && l->direction != -1)
            return spk_fail("kernel %s: launch %d is of one direction, but the kernel takes no direction argument, "
                            "so one launch runs both",
                            name, i + 1);
        if (per_direction && l->direction == 0 && seen[1])
            return spk_fail("kernel %s: launch %d (forward) comes after a reverse launch; list the forward "
                            "launches first",
                            name, i + 1);
        if (per_direction)
            seen[l->direction] = true;
        for (int k = 0; k < 3; k++)
            if (l->grid[k] < 1 || l->block[k] < 1)
                return spk_fail("kernel %s: launch %d needs a positive grid and block, got grid {%u, %u, %u}, block "
                                "{%u, %u, %u}",
                                name, i + 1, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2]);
        unsigned threads = l->block[0] * l->block[1] * l->block[2];
        if (threads > 1024)
            return spk_fail("kernel %s: launch %d has blocks of %u threads, at most 1024", name, i + 1, threads);
        bool cluster = l->cluster[0] || l->cluster[1] || l->cluster[2];
        if (cluster && l->cooperative)
            return spk_fail("kernel %s: launch %d is cooperative and a cluster launch; a kernel is one or the other "
                            "(set co_resident for clusters that wait on each other)",
                            name, i + 1);
        for (int k = 0; cluster && k < 3; k++) {
            unsigned c = l->cluster[k] ? l->cluster[k] : 1;
            if (l->grid[k] % c != 0)
                return spk_fail("kernel %s: launch %d's grid {%u, %u, %u} is no whole number of clusters {%u, %u, %u}",
                                name, i + 1, l->grid[0], l->grid[1], l->grid[2], l->cluster[0], l->cluster[1],
                                l->cluster[2]);
        }
    }
    if (per_direction && (!seen[0] || !seen[1]))
        return spk_fail("kernel %s takes direction, so the launches must cover both directions (forward %s, reverse "
                        "%s)",
                        name, seen[0] ? "yes" : "none", seen[1] ? "yes" : "none");
    if (spk_recurrence_takes(d->args, d->nargs, SPK_RA_TILE_ROWS) && d->tile_rows < 1)
        return spk_fail("kernel %s takes tile_rows: the launch rule must give tile_rows >= 1", name);
    if (d->state_words < 0 || (spk_recurrence_takes(d->args, d->nargs, SPK_RA_STATE) && d->state_words < 1))
        return spk_fail("kernel %s takes state: the launch rule must give state_words >= 1 (64-bit words a "
                        "direction), got %lld",
                        name, (long long)d->state_words);
    if (d->concurrent && !per_direction)
        return spk_fail("kernel %s: concurrent directions need a kernel that takes direction (one launch a "
                        "direction)",
                        name);
    if (d->nstatuses < 0 || (d->nstatuses > 0 && !d->statuses))
        return spk_fail("kernel %s: its statuses are missing", name);
    for (int i = 0; i < d->nstatuses; i++)
        if (d->statuses[i].code == 0 || !d->statuses[i].message)
            return spk_fail("kernel %s: status codes are nonzero and have a message (entry %d)", name, i + 1);
    return spk_lstm_packing_check(&d->packing);
}

/* ---- arguments ------------------------------------------------------------ */

void spk_kernel_stack_args(const spk_kernel_stack_desc *d, const int *args, int nargs, const spk_lstm_gpu_shape *shape,
                           const spk_kernel_stack_addresses *a, int layer, const spk_kernel_stack_launch *l,
                           spk_arg *out)
{
    int64_t H = shape->hidden, B = shape->batch, T = shape->steps;
    int dir = l->direction; /* -1: both */
    size_t one = dir < 0 ? 0 : (size_t)dir;
    bool traced_layer = a->trace && layer == a->trace_layer;
    for (int i = 0; i < nargs; i++) {
        spk_arg *o = &out[i];
        o->kind = spk_recurrence_args[args[i]].kind;
        switch ((spk_recurrence_arg)args[i]) {
        case SPK_RA_GATES: o->v.ptr = (float *)a->gates + one * (size_t)(B * T * 4 * H); break;
        case SPK_RA_R: o->v.ptr = (float *)a->r + one * (size_t)(4 * H * H); break;
        case SPK_RA_BIAS: o->v.ptr = (float *)a->bias + one * (size_t)(4 * H); break;
        case SPK_RA_OUTPUT: o->v.ptr = (float *)a->output + one * (size_t)H; break;
        case SPK_RA_STATE: o->v.ptr = (uint64_t *)a->words + one * (size_t)d->state_words; break;
        case SPK_RA_STATUS: o->v.ptr = (unsigned *)((uint64_t *)a->words + 2 * (size_t)d->state_words); break;
        case SPK_RA_BATCH: o->v.i32 = (int32_t)B; break;
        case SPK_RA_STEPS: o->v.i32 = (int32_t)T; break;
        case SPK_RA_HIDDEN: o->v.i32 = (int32_t)H; break;
        case SPK_RA_LAYER: o->v.i32 = layer; break;
        case SPK_RA_DIRECTION: o->v.i32 = dir; break;
        case SPK_RA_FIRST_TILE: o->v.i32 = l->first_tile; break;
        case SPK_RA_TILE_ROWS: o->v.i32 = d->tile_rows; break;
        case SPK_RA_FLAG_BASE: o->v.u32 = (uint32_t)((int64_t)layer * T); break;
        case SPK_RA_TIMEOUT_NS: o->v.u64 = d->timeout_ns; break;
        case SPK_RA_TRACE:
            o->v.ptr = traced_layer && (dir < 0 || dir == a->trace_direction) ? a->trace : NULL;
            break;
        case SPK_RA_TRACE_SLOT: o->v.ptr = a->trace ? a->trace_slot : NULL; break;
        case SPK_RA_TRACE_SLOTS: o->v.i32 = a->trace ? a->trace_slots : 0; break;
        case SPK_RA_TRACE_DIRECTION: o->v.i32 = traced_layer ? a->trace_direction : -1; break;
        case SPK_RA_COUNT: break;
        }
    }
}

/* ---- co-residency --------------------------------------------------------- */

static bool has_cluster(const spk_kernel_stack_launch *l) { return l->cluster[0] || l->cluster[1] || l->cluster[2]; }

/* Blocks, or clusters, of a launch. */
static int64_t launch_units(const spk_kernel_stack_launch *l)
{
    int64_t blocks = (int64_t)l->grid[0] * l->grid[1] * l->grid[2];
    if (!has_cluster(l))
        return blocks;
    int64_t per = (int64_t)(l->cluster[0] ? l->cluster[0] : 1) * (l->cluster[1] ? l->cluster[1] : 1) *
                  (l->cluster[2] ? l->cluster[2] : 1);
    return blocks / per;
}

int spk_kernel_stack_check_residency(const spk_kernel_stack_desc *d, spk_kernel_stack_capacity_fn capacity, void *ctx)
{
    const char *name = d->name ? d->name : "?";
    int64_t largest[2] = {0, 0}, room = -1;
    for (int i = 0; i < d->nlaunches; i++) {
        const spk_kernel_stack_launch *l = &d->launches[i];
        int64_t cap;
        if (capacity(ctx, l, &cap) != 0) {
            spk_error_prefix("kernel %s: launch %d", name, i + 1);
            return -1;
        }
        const char *unit = has_cluster(l) ? "cluster" : "block";
        unsigned threads = l->block[0] * l->block[1] * l->block[2];
        if (has_cluster(l) && cap < 1)
            return spk_fail("kernel %s: launch %d (%s): not one cluster of {%u, %u, %u} blocks of %u threads with %zu "
                            "bytes of shared memory fits the device",
                            name, i + 1, direction_name(l->direction), l->cluster[0], l->cluster[1], l->cluster[2],
                            threads, l->smem);
        if (!(l->cooperative || l->co_resident))
            continue;
        int64_t need = launch_units(l);
        if (need > cap)
            return spk_fail("kernel %s: launch %d (%s) needs its %lld %ss co-resident (%s), the device holds %lld %ss "
                            "of %u threads with %zu bytes of shared memory at once; the launch is refused before it "
                            "runs",
                            name, i + 1, direction_name(l->direction), (long long)need, unit,
                            l->cooperative ? "a cooperative launch" : "co_resident", (long long)cap, unit, threads,
                            l->smem);
        int s = d->concurrent && l->direction == 1 ? 1 : 0;
        if (need > largest[s])
            largest[s] = need;
        if (room < 0 || cap < room)
            room = cap;
    }
    if (d->concurrent && largest[0] > 0 && largest[1] > 0 && largest[0] + largest[1] > room)
        return spk_fail("kernel %s: concurrent directions need %lld + %lld co-resident units at once, the device "
                        "holds %lld; make the plan sequential (concurrent = false) or its launches smaller",
                        name, (long long)largest[0], (long long)largest[1], (long long)room);
    return 0;
}

/* ---- plans ---------------------------------------------------------------- */

#define WATCH_POLL_NS 100000L

struct spk_kernel_stack {
    spk_kernel_stack_info info;
    spk_kernel_stack_desc desc; /* its arrays: the copies below */
    int args[SPK_KERNEL_STACK_MAX_ARGS];
    spk_kernel_stack_launch *launches;
    spk_kernel_stack_status *statuses;
    char name[128];
    spk_module *module;
    spk_kernel *kernel, *clear;
    spk_lstm_gpu_buffers buffers; /* layers, gates, output */
    spk_tensor *words;            /* u64 [2 * state_words + 1]: the state of each direction, the status word */
    spk_lstm_gpu_runner runner;
    spk_stream *stream, *side;
    spk_event *fork, *join;
    /* The trace build (or the plan's own kernel when it takes the trace arguments). */
    spk_module *trace_module;
    spk_kernel *trace_kernel;
    int trace_args[SPK_KERNEL_STACK_MAX_ARGS], ntrace_args;
    spk_kernel_stack_addresses trace; /* its trace fields, during a traced forward */
    bool tracing;
    /* The write check (desc.check_writes): its kernel, u64 [layers + 1][4]
     * counters (x first), and whether the running enqueue is a checked
     * forward. */
    spk_module *check_module;
    spk_kernel *check_kernel, *poison_kernel;
    spk_tensor *counters;
    bool checking;
    /* The timeline build, and the recording its launches take (NULL: none). */
    spk_module *timeline_module;
    spk_kernel *timeline_kernel;
    const spk_timeline *recording;
};

void spk_kernel_stack_free(spk_kernel_stack *ks)
{
    if (!ks)
        return;
    spk_lstm_gpu_buffers_free(&ks->buffers);
    spk_tensor_free(ks->words);
    spk_tensor_free(ks->counters);
    spk_kernel_free(ks->kernel);
    spk_kernel_free(ks->clear);
    if (ks->trace_kernel != ks->kernel)
        spk_kernel_free(ks->trace_kernel);
    spk_module_release(ks->trace_module);
    spk_kernel_free(ks->timeline_kernel);
    spk_module_release(ks->timeline_module);
    spk_kernel_free(ks->check_kernel);
    spk_kernel_free(ks->poison_kernel);
    spk_module_release(ks->check_module);
    spk_module_release(ks->module);
    spk_event_free(ks->fork);
    spk_event_free(ks->join);
    spk_stream_release(ks->side);
    spk_stream_release(ks->stream);
    free(ks->launches);
    for (int i = 0; ks->statuses && i < ks->desc.nstatuses; i++)
        free((char *)ks->statuses[i].message);
    free(ks->statuses);
    free(ks);
}

const spk_kernel_stack_info *spk_kernel_stack_get_info(const spk_kernel_stack *ks) { return &ks->info; }
const char *spk_kernel_stack_name(const spk_kernel_stack *ks) { return ks->name; }
spk_kernel *spk_kernel_stack_kernel(spk_kernel_stack *ks) { return ks->kernel; }
spk_stream *spk_kernel_stack_stream(spk_kernel_stack *ks) { return ks->stream; }

typedef struct residency_ctx {
    spk_kernel *kernel;
} residency_ctx;

static int device_capacity(void *ctx, const spk_kernel_stack_launch *l, int64_t *capacity)
{
    spk_kernel *k = ((residency_ctx *)ctx)->kernel;
    int n = 0;
    if (has_cluster(l)) {
        spk_launch_config cfg = {0};
        memcpy(cfg.grid, l->grid, sizeof cfg.grid);
        memcpy(cfg.block, l->block, sizeof cfg.block);
        memcpy(cfg.cluster, l->cluster, sizeof cfg.cluster);
        cfg.smem = l->smem;
        if (spk_kernel_max_active_clusters(k, &cfg, &n) != 0)
            return -1;
    } else if (spk_kernel_cooperative_capacity(k, (int)(l->block[0] * l->block[1] * l->block[2]), l->smem, &n) != 0) {
        return -1;
    }
    *capacity = n;
    return 0;
}

/* The parameters of a loaded kernel against an argument list. */
static int check_loaded(spk_kernel *k, const char *name, const int *args, int nargs)
{
    int n;
    size_t sizes[SPK_MAX_KERNEL_ARGS];
    if (spk_kernel_params(k, &n, sizes, SPK_MAX_KERNEL_ARGS) != 0)
        return -1;
    return spk_recurrence_check_sizes(name, args, nargs, sizes, n);
}

static int enqueue_runner(void *plan, const spk_tensor *x) { return spk_kernel_stack_enqueue(plan, x); }
static int finish_runner(void *plan) { return spk_kernel_stack_finish(plan); }

spk_kernel_stack *spk_kernel_stack_new(const spk_kernel_stack_options *o)
{
    const spk_kernel_stack_desc *d = o->desc;
    if (!d || !o->module || !o->entry)
        return spk_fail_null("lstm stack: the kernel, its entry or its description is missing");
    spk_lstm_dims dims;
    if (spk_lstm_validate(o->layers, o->count, &dims) != 0)
        return NULL;
    spk_lstm_gpu_shape shape;
    if (spk_lstm_gpu_shape_check(o->layers, o->count, o->batch, o->steps, (int)dims.hidden, o->math, &shape) != 0 ||
        spk_kernel_stack_desc_check(d) != 0)
        return NULL;
    if (o->batch * o->steps > INT32_MAX)
        return spk_fail_null("lstm stack: batch %lld x steps %lld is too large for 32-bit kernel indices",
                             (long long)o->batch, (long long)o->steps);
    if (spk_lstm_check_math(o->math) != 0 || spk_lstm_check_finite(o->layers, o->count) != 0)
        return NULL;
    if (spk_cuda_require() != 0) {
        spk_error_prefix("lstm stack (kernel %s)", d->name ? d->name : o->entry);
        return NULL;
    }
    spk_kernel_stack *ks = calloc(1, sizeof *ks);
    if (!ks)
        return spk_fail_null("lstm stack: out of memory");
    snprintf(ks->name, sizeof ks->name, "%s", d->name ? d->name : o->entry);
    ks->desc = *d;
    ks->desc.name = ks->name;
    memcpy(ks->args, d->args, sizeof *ks->args * (size_t)d->nargs);
    ks->desc.args = ks->args;
    ks->launches = malloc(sizeof *ks->launches * (size_t)d->nlaunches);
    ks->statuses = calloc((size_t)(d->nstatuses > 0 ? d->nstatuses : 1), sizeof *ks->statuses);
    if (!ks->launches || !ks->statuses) {
        spk_fail("lstm stack: out of memory");
        goto fail;
    }
    memcpy(ks->launches, d->launches, sizeof *ks->launches * (size_t)d->nlaunches);
    ks->desc.launches = ks->launches;
    /* the messages too: a script's strings do not outlive the call */
    for (int i = 0; i < d->nstatuses; i++) {
        ks->statuses[i].code = d->statuses[i].code;
        if (!(ks->statuses[i].message = strdup(d->statuses[i].message))) {
            spk_fail("lstm stack: out of memory");
            goto fail;
        }
    }
    ks->desc.statuses = ks->statuses;
    ks->info.shape = shape;
    ks->info.nlaunches = d->nlaunches;
    ks->info.concurrent = d->concurrent;

    ks->module = o->module;
    spk_module_retain(o->module);
    snprintf(ks->info.arch, sizeof ks->info.arch, "%s", spk_module_arch(o->module));
    if (!(ks->kernel = spk_module_kernel(o->module, o->entry)) || spk_kernel_attributes(ks->kernel, &ks->info.attrs) ||
        check_loaded(ks->kernel, ks->name, ks->args, d->nargs) != 0)
        goto fail;
    if (o->clear_entry && !(ks->clear = spk_module_kernel(o->module, o->clear_entry)))
        goto fail;
    residency_ctx ctx = {ks->kernel};
    if (spk_kernel_stack_check_residency(&ks->desc, device_capacity, &ctx) != 0 ||
        device_capacity(&ctx, &ks->launches[0], &ks->info.capacity) != 0)
        goto fail;
    if (spk_recurrence_takes(ks->args, d->nargs, SPK_RA_TRACE)) {
        ks->trace_kernel = ks->kernel;
        memcpy(ks->trace_args, ks->args, sizeof *ks->args * (size_t)d->nargs);
        ks->ntrace_args = d->nargs;
    }

    if (!(ks->stream = spk_stream_new()) || !(ks->side = spk_stream_new()) || !(ks->fork = spk_event_new(false)) ||
        !(ks->join = spk_event_new(false)))
        goto fail;
    if (spk_lstm_gpu_buffers_new(&ks->buffers, o->layers, &ks->info.shape, &d->packing, SPK_U64,
                                 2 * d->state_words + 1, &ks->words, ks->stream) != 0)
        goto fail;
    ks->runner = (spk_lstm_gpu_runner){.plan = ks, .shape = &ks->info.shape, .stream = ks->stream,
                                       .output = ks->buffers.output, .enqueue = enqueue_runner,
                                       .finish = finish_runner};
    return ks;
fail:
    spk_error_prefix("lstm stack");
    spk_kernel_stack_free(ks);
    return NULL;
}

static spk_kernel_stack_addresses addresses(spk_kernel_stack *ks, int layer)
{
    spk_kernel_stack_addresses a = ks->tracing ? ks->trace : (spk_kernel_stack_addresses){0};
    spk_lstm_device_layer *pl = &ks->buffers.layers[layer];
    a.gates = spk_tensor_data(ks->buffers.gates);
    a.r = spk_tensor_data(pl->r);
    a.bias = spk_tensor_data(pl->bias);
    a.output = spk_tensor_data(ks->buffers.output);
    a.words = spk_tensor_data(ks->words);
    return a;
}

static int launch_one(spk_kernel_stack *ks, int layer, int index, spk_stream *s)
{
    const spk_kernel_stack_launch *l = &ks->launches[index];
    spk_lstm_device_layer *pl = &ks->buffers.layers[layer];
    spk_kernel *k = ks->tracing ? ks->trace_kernel : ks->recording ? ks->timeline_kernel : ks->kernel;
    const int *args = ks->tracing ? ks->trace_args : ks->args;
    int nargs = ks->tracing ? ks->ntrace_args : ks->desc.nargs;
    spk_kernel_stack_addresses a = addresses(ks, layer);
    spk_arg values[SPK_KERNEL_STACK_MAX_ARGS + SPK_TIMELINE_ARGS];
    spk_kernel_stack_args(&ks->desc, args, nargs, &ks->info.shape, &a, layer, l, values);
    int nvalues = nargs;
    if (ks->recording && !ks->tracing) {
        spk_timeline_args(ks->recording, layer, 0, values + nargs);
        nvalues += SPK_TIMELINE_ARGS;
    }
    spk_storage *uses[6] = {ks->buffers.gates->storage, pl->r->storage, pl->bias->storage,
                            ks->buffers.output->storage, ks->words->storage, spk_timeline_storage(ks->recording)};
    spk_launch_config cfg = {0};
    memcpy(cfg.grid, l->grid, sizeof cfg.grid);
    memcpy(cfg.block, l->block, sizeof cfg.block);
    memcpy(cfg.cluster, l->cluster, sizeof cfg.cluster);
    cfg.smem = l->smem;
    cfg.stream = s;
    cfg.cooperative = l->cooperative;
    cfg.uses = uses;
    cfg.nuses = nvalues > nargs ? 6 : 5;
    spk_nvtx_push(direction_name(l->direction));
    int rc = spk_kernel_launch(k, &cfg, values, nvalues);
    spk_nvtx_pop();
    if (rc != 0) {
        spk_error_prefix("layer %d %s recurrence", layer + 1, l->direction < 0 ? "" : direction_name(l->direction));
        return -1;
    }
    return 0;
}

static int launch_directions(spk_kernel_stack *ks, int layer)
{
    spk_stream *s = ks->stream;
    if (!ks->desc.concurrent) {
        for (int i = 0; i < ks->desc.nlaunches; i++)
            if (launch_one(ks, layer, i, s) != 0)
                return -1;
        return 0;
    }
    if (spk_event_record(ks->fork, s) || spk_stream_wait_event(ks->side, ks->fork))
        return -1;
    for (int i = 0; i < ks->desc.nlaunches; i++)
        if (launch_one(ks, layer, i, ks->launches[i].direction == 1 ? ks->side : s) != 0)
            return -1;
    return spk_event_record(ks->join, ks->side) || spk_stream_wait_event(s, ks->join) ? -1 : 0;
}

static int launch_layer(spk_kernel_stack *ks, int layer)
{
    spk_nvtx_push("recurrence");
    int rc = launch_directions(ks, layer);
    spk_nvtx_pop();
    return rc;
}

/* ---- the write check ------------------------------------------------------ */

#define CHECK_KERNEL_FILE "kernel_stack_check.cu"
#define CHECK_KERNEL "spk_kernel_stack_count"
#define POISON_KERNEL "spk_kernel_stack_poison"

static int prepare_check(spk_kernel_stack *ks)
{
    if (ks->check_kernel)
        return 0;
    const char *dir = spk_kernel_dir();
    if (!dir)
        return -1;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, CHECK_KERNEL_FILE);
    spk_compile_options co = {0};
    co.file = path;
    int64_t shape[2] = {ks->info.shape.layers + 1, 4};
    if (!(ks->check_module = spk_compile(&co)) ||
        !(ks->check_kernel = spk_module_kernel(ks->check_module, CHECK_KERNEL)) ||
        !(ks->poison_kernel = spk_module_kernel(ks->check_module, POISON_KERNEL)) ||
        !(ks->counters = spk_device_tensor_new(SPK_U64, 2, shape, ks->stream))) {
        spk_error_prefix("lstm stack: the write check");
        return -1;
    }
    return 0;
}

/* A grid-stride launch of the write check's kernel k over n words. */
static int check_launch(spk_kernel_stack *ks, spk_kernel *k, const void *data, spk_storage *storage, int64_t n,
                        uint64_t *counters)
{
    spk_launch_config cfg = {0};
    int64_t blocks = (n + 255) / 256;
    cfg.grid[0] = (unsigned)(blocks < 1024 ? blocks : 1024);
    cfg.block[0] = 256;
    cfg.stream = ks->stream;
    spk_storage *uses[2] = {storage, ks->counters->storage};
    cfg.uses = uses;
    cfg.nuses = counters ? 2 : 1;
    spk_arg args[3] = {{SPK_ARG_PTR, {.ptr = (void *)data}},
                       {SPK_ARG_U64, {.u64 = (uint64_t)n}},
                       {SPK_ARG_PTR, {.ptr = counters}}};
    return spk_kernel_launch(k, &cfg, args, counters ? 3 : 2);
}

/* Counts poison words and NaNs of `n` floats at `data` into counters[slot]. */
static int count_words(spk_kernel_stack *ks, const void *data, spk_storage *storage, int64_t n, int slot)
{
    return check_launch(ks, ks->check_kernel, data, storage, n, (uint64_t *)spk_tensor_data(ks->counters) + 4 * slot);
}

static int recur(void *plan, int layer)
{
    spk_kernel_stack *ks = plan;
    if (!ks->checking)
        return launch_layer(ks, layer);
    spk_tensor *y = ks->buffers.output;
    int64_t n = spk_tensor_numel(y);
    /* after the layer's projections (which read y as their input) */
    if (check_launch(ks, ks->poison_kernel, spk_tensor_data(y), y->storage, n, NULL) != 0 ||
        launch_layer(ks, layer) != 0)
        return -1;
    return count_words(ks, spk_tensor_data(y), y->storage, n, layer + 1);
}

static int enqueue(spk_kernel_stack *ks, const spk_tensor *x)
{
    if (spk_lstm_gpu_check_enqueue(&ks->info.shape, x) != 0)
        return -1;
    spk_stream *s = ks->stream;
    if (ks->clear) {
        /* the plan's clear kernel: the state and the status word */
        spk_launch_config cfg = {0};
        int64_t words = spk_tensor_numel(ks->words);
        cfg.grid[0] = (unsigned)((words + 255) / 256 < 1024 ? (words + 255) / 256 : 1024);
        cfg.block[0] = 256;
        cfg.stream = s;
        spk_storage *uses[1] = {ks->words->storage};
        cfg.uses = uses;
        cfg.nuses = 1;
        spk_arg args[2] = {{SPK_ARG_PTR, {.ptr = spk_tensor_data(ks->words)}},
                           {SPK_ARG_U64, {.u64 = (uint64_t)words}}};
        if (spk_kernel_launch(ks->clear, &cfg, args, 2) != 0)
            return -1;
    } else if (spk_tensor_zero_device(ks->words, s) != 0) {
        return -1;
    }
    if (ks->checking && (spk_tensor_zero_device(ks->counters, s) != 0 ||
                         count_words(ks, spk_tensor_data(x), x->storage, spk_tensor_numel(x), 0) != 0))
        return -1;
    return spk_lstm_gpu_enqueue_layers(&ks->buffers, &ks->info.shape, x, s, recur, ks);
}

int spk_kernel_stack_enqueue(spk_kernel_stack *ks, const spk_tensor *x)
{
    spk_nvtx_pushf("forward pass: %s", ks->desc.name);
    int rc = enqueue(ks, x);
    spk_nvtx_pop();
    return rc;
}

/* Waits for s; with a watchdog, a pass still running that long is reported
 * instead of waited for forever. */
static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int wait_stream(spk_kernel_stack *ks, spk_stream *s)
{
    if (ks->desc.watchdog_ns == 0)
        return spk_stream_synchronize(s);
    const double start = seconds_now(), limit = 1e-9 * (double)ks->desc.watchdog_ns;
    for (;;) {
        bool done = false;
        if (spk_stream_query(s, &done) != 0)
            return -1;
        if (done)
            return spk_stream_synchronize(s);
        double waited = seconds_now() - start;
        if (waited > limit)
            return spk_fail("lstm stack: kernel %s has not finished after %.1f s of waiting (its watchdog; its "
                            "timeout is %.3f s): a wait that never gives up? The contract: every wait is bounded by "
                            "timeout_ns and gives up with a status. The device stays busy with it until it ends",
                            ks->name, waited, 1e-9 * (double)ks->desc.timeout_ns);
        struct timespec pause = {0, WATCH_POLL_NS};
        nanosleep(&pause, NULL);
    }
}

/* Where flat index i of y [B, T, 2H] is, in words. */
static void describe_index(const spk_lstm_gpu_shape *sh, uint64_t i, char *buf, size_t size)
{
    int64_t H = sh->hidden, T = sh->steps;
    int64_t col = (int64_t)(i % (uint64_t)(2 * H)), bt = (int64_t)(i / (uint64_t)(2 * H));
    snprintf(buf, size, "batch row %lld, time %lld, %s unit %lld", (long long)(bt / T + 1), (long long)(bt % T + 1),
             col < H ? "forward" : "reverse", (long long)(col % H + 1));
}

static int check_counters(spk_kernel_stack *ks)
{
    const spk_lstm_gpu_shape *sh = &ks->info.shape;
    int64_t slots = sh->layers + 1;
    uint64_t *c = malloc(sizeof *c * 4 * (size_t)slots);
    if (!c)
        return spk_fail("lstm stack: out of memory");
    if (spk_memcpy_d2h(c, spk_tensor_data(ks->counters), sizeof *c * 4 * (size_t)slots, ks->stream) != 0) {
        free(c);
        return -1;
    }
    uint64_t n = (uint64_t)(sh->batch * sh->steps * 2 * sh->hidden);
    bool input_nan = c[0] + c[2] > 0; /* x: any non-finite value (the poison pattern included) */
    int rc = 0;
    char where[128];
    for (int64_t l = 0; l < sh->layers && rc == 0; l++) {
        const uint64_t *k = c + 4 * (l + 1);
        if (k[0] > 0) {
            describe_index(sh, n - k[1], where, sizeof where);
            rc = spk_fail("lstm stack: kernel %s left %llu of the %llu outputs of layer %lld unwritten (the first: "
                          "%s); it must write h of every row, time and unit of each direction it runs (the "
                          "contract's output)",
                          ks->name, (unsigned long long)k[0], (unsigned long long)n, (long long)l + 1, where);
        } else if (k[2] > 0 && !input_nan) {
            describe_index(sh, n - k[3], where, sizeof where);
            rc = spk_fail("lstm stack: kernel %s wrote NaN or infinity to %llu outputs of layer %lld (the first: %s) "
                          "from finite inputs and weights: does it read the buffers as the plan lays them out (gate "
                          "order "
                          "\"%s\", layout \"%s\": SPK_GATE_* and SPK_PACK_ROWS say where each gate is; y is "
                          "[batch, steps, 2H], a direction's units in its own half; a value not yet written holds "
                          "a NaN poison)?",
                          ks->name, (unsigned long long)k[2], (long long)l + 1, where, ks->desc.packing.order,
                          spk_lstm_layout_name(ks->desc.packing.layout));
        }
        input_nan = input_nan || k[2] > 0;
    }
    free(c);
    return rc;
}

int spk_kernel_stack_finish(spk_kernel_stack *ks)
{
    if (wait_stream(ks, ks->side) != 0 || wait_stream(ks, ks->stream) != 0)
        return -1;
    uint64_t status = 0;
    const uint64_t *words = spk_tensor_data(ks->words);
    if (spk_memcpy_d2h(&status, words + 2 * ks->desc.state_words, sizeof status, ks->stream) != 0)
        return -1;
    if (spk_lstm_gpu_check_status((unsigned)(status & 0xffffffffu), ks->statuses, ks->desc.nstatuses, ks->name) != 0)
        return -1;
    return ks->checking ? check_counters(ks) : 0;
}

spk_tensor *spk_kernel_stack_forward(spk_kernel_stack *ks, const spk_tensor *x)
{
    if (ks->desc.check_writes && prepare_check(ks) != 0)
        return NULL;
    ks->checking = ks->desc.check_writes;
    spk_tensor *y = spk_lstm_gpu_forward(&ks->runner, x);
    ks->checking = false;
    return y;
}

int spk_kernel_stack_time(spk_kernel_stack *ks, const spk_tensor *x, int rounds, int warmup, double *ms)
{
    return spk_lstm_gpu_time(&ks->runner, x, rounds, warmup, ms);
}

/* ---- traces --------------------------------------------------------------- */

int spk_lstm_trace_check(const spk_lstm_trace *t, int64_t layers, int64_t steps)
{
    if (t->layer < 0 || t->layer >= layers)
        return spk_fail("trace: layer %d is outside 1..%lld", t->layer + 1, (long long)layers);
    if (t->direction != 0 && t->direction != 1)
        return spk_fail("trace: direction must be forward or reverse");
    if (t->count < 1 || t->count > SPK_LSTM_TRACE_MAX_STEPS || !t->steps)
        return spk_fail("trace: steps must list 1 to %d time positions, got %d", SPK_LSTM_TRACE_MAX_STEPS,
                        t->count);
    for (int e = 0; e < t->count; e++)
        if (t->steps[e] < 0 || t->steps[e] >= steps)
            return spk_fail("trace: step %lld is outside 1..%lld", (long long)t->steps[e] + 1, (long long)steps);
    return 0;
}

int spk_kernel_stack_set_trace_kernel(spk_kernel_stack *ks, spk_module *module, const char *entry, const int *args,
                                      int nargs)
{
    if (!spk_recurrence_takes(args, nargs, SPK_RA_TRACE) || !spk_recurrence_takes(args, nargs, SPK_RA_TRACE_SLOT))
        return spk_fail("lstm stack: a trace build takes the arguments trace and trace_slot");
    if (check_list(ks->name, args, nargs) != 0)
        return -1;
    spk_kernel *k = spk_module_kernel(module, entry);
    if (!k)
        return -1;
    residency_ctx ctx = {k};
    if (check_loaded(k, ks->name, args, nargs) != 0 ||
        spk_kernel_stack_check_residency(&ks->desc, device_capacity, &ctx) != 0) {
        spk_error_prefix("lstm stack: the trace build");
        spk_kernel_free(k);
        return -1;
    }
    if (ks->trace_kernel != ks->kernel)
        spk_kernel_free(ks->trace_kernel);
    spk_module_release(ks->trace_module);
    spk_module_retain(module);
    ks->trace_module = module;
    ks->trace_kernel = k;
    memcpy(ks->trace_args, args, sizeof *args * (size_t)nargs);
    ks->ntrace_args = nargs;
    return 0;
}

bool spk_kernel_stack_traceable(const spk_kernel_stack *ks) { return ks->trace_kernel != NULL; }

spk_tensor *spk_kernel_stack_forward_trace(spk_kernel_stack *ks, const spk_tensor *x, const spk_lstm_trace *trace,
                                           spk_tensor **trace_h, spk_tensor **trace_c)
{
    *trace_h = *trace_c = NULL;
    const spk_lstm_gpu_shape *sh = &ks->info.shape;
    if (!ks->trace_kernel)
        return spk_fail_null("lstm stack: kernel %s takes no trace arguments (trace, trace_slot, trace_slots), so "
                             "it cannot record h and c",
                             ks->name);
    if (spk_lstm_trace_check(trace, sh->layers, sh->steps) != 0 ||
        spk_lstm_check_x(sh->batch, sh->steps, sh->input, x) != 0)
        return NULL;
    /* The kernel records each distinct time position once, in slot
     * slot_of[t]; repeats in the request are copies made here. */
    int64_t T = sh->steps, B = sh->batch, H = sh->hidden, slots = 0;
    spk_tensor *host_slots = spk_tensor_new(SPK_I32, 1, &T);
    spk_tensor *steps = NULL, *buffer = NULL, *y = NULL, *host = NULL, *zeros = NULL;
    if (!host_slots)
        return NULL;
    int32_t *slot_of = spk_tensor_data(host_slots);
    for (int64_t t = 0; t < T; t++)
        slot_of[t] = -1;
    for (int e = 0; e < trace->count; e++)
        if (slot_of[trace->steps[e]] < 0)
            slot_of[trace->steps[e]] = (int32_t)slots++;
    int64_t buffer_shape[4] = {2, slots, B, H};
    if (!(zeros = spk_tensor_new(SPK_F32, 4, buffer_shape)) ||
        !(steps = spk_tensor_to_device(host_slots, ks->stream)) || !(buffer = spk_tensor_to_device(zeros, ks->stream)))
        goto done;
    ks->trace = (spk_kernel_stack_addresses){.trace = spk_tensor_data(buffer), .trace_slot = spk_tensor_data(steps),
                                             .trace_slots = (int)slots, .trace_layer = trace->layer,
                                             .trace_direction = trace->direction};
    if (ks->desc.check_writes && prepare_check(ks) != 0)
        goto done;
    ks->tracing = true;
    ks->checking = ks->desc.check_writes;
    y = spk_lstm_gpu_forward(&ks->runner, x);
    ks->tracing = ks->checking = false;
    ks->trace = (spk_kernel_stack_addresses){0};
    if (!y || !(host = spk_tensor_to_host(buffer, ks->stream)))
        goto done;
    int64_t out_shape[3] = {trace->count, B, H};
    *trace_h = spk_tensor_new(SPK_F32, 3, out_shape);
    *trace_c = spk_tensor_new(SPK_F32, 3, out_shape);
    if (!*trace_h || !*trace_c) {
        spk_tensor_free(*trace_h);
        spk_tensor_free(*trace_c);
        *trace_h = *trace_c = NULL;
        spk_tensor_free(y);
        y = NULL;
        goto done;
    }
    const float *recorded = spk_tensor_data(host);
    size_t plane = (size_t)B * H;
    for (int e = 0; e < trace->count; e++) {
        size_t slot = (size_t)slot_of[trace->steps[e]];
        memcpy((float *)spk_tensor_data(*trace_h) + e * plane, recorded + slot * plane, plane * sizeof(float));
        memcpy((float *)spk_tensor_data(*trace_c) + e * plane, recorded + ((size_t)slots + slot) * plane,
               plane * sizeof(float));
    }
done:
    spk_tensor_free(host_slots);
    spk_tensor_free(zeros);
    spk_tensor_free(steps);
    spk_tensor_free(buffer);
    spk_tensor_free(host);
    return y;
}

/* ---- step timelines -------------------------------------------------------- */

int spk_kernel_stack_set_timeline_kernel(spk_kernel_stack *ks, spk_module *module, const char *entry)
{
    spk_kernel *k = spk_module_kernel(module, entry);
    if (!k)
        return -1;
    /* the plan's arguments first, then the recording's, which the contract does not name */
    int n = 0, nargs = ks->desc.nargs;
    size_t sizes[SPK_MAX_KERNEL_ARGS];
    residency_ctx ctx = {k};
    int rc = spk_kernel_params(k, &n, sizes, SPK_MAX_KERNEL_ARGS);
    if (rc == 0 && n != nargs + SPK_TIMELINE_ARGS)
        rc = spk_fail("kernel %s: its timeline build takes %d parameters, but the plan passes %d (its %d and the "
                      "recording's %d)",
                      ks->name, n, nargs + SPK_TIMELINE_ARGS, nargs, SPK_TIMELINE_ARGS);
    if (rc == 0)
        rc = spk_recurrence_check_sizes(ks->name, ks->args, nargs, sizes, nargs);
    if (rc == 0)
        rc = spk_kernel_stack_check_residency(&ks->desc, device_capacity, &ctx);
    if (rc != 0) {
        spk_error_prefix("lstm stack: the timeline build");
        spk_kernel_free(k);
        return -1;
    }
    spk_kernel_free(ks->timeline_kernel);
    spk_module_release(ks->timeline_module);
    spk_module_retain(module);
    ks->timeline_module = module;
    ks->timeline_kernel = k;
    return 0;
}

static int64_t launch_blocks(const spk_kernel_stack_launch *l)
{
    return (int64_t)l->grid[0] * l->grid[1] * l->grid[2];
}

void spk_kernel_stack_timeline_geometry(const spk_kernel_stack_desc *d, int64_t *blocks, int *warps, int *group)
{
    *blocks = 0, *warps = 0, *group = 0;
    if (d->nlaunches < 1)
        return;
    bool both = !spk_recurrence_takes(d->args, d->nargs, SPK_RA_DIRECTION);
    for (int i = 0; i < d->nlaunches; i++)
        if (both || d->launches[i].direction == 0)
            *blocks += launch_blocks(&d->launches[i]);
    if (both)
        *blocks /= 2;
    const spk_kernel_stack_launch *first = &d->launches[0];
    unsigned threads = first->block[0] * first->block[1] * first->block[2];
    *warps = (int)((threads + 31) / 32);
    int64_t cluster = (int64_t)(first->cluster[0] ? first->cluster[0] : 1) * (first->cluster[1] ? first->cluster[1] : 1) *
                      (first->cluster[2] ? first->cluster[2] : 1);
    bool clustered = first->cluster[0] || first->cluster[1] || first->cluster[2];
    int64_t g = clustered                                   ? cluster
                : first->co_resident || first->cooperative ? launch_blocks(first) / (both ? 2 : 1)
                                                            : 1;
    *group = (int)(g < 1 ? 1 : g > INT32_MAX ? INT32_MAX : g);
}

static spk_timeline *start_recording(spk_kernel_stack *ks, const spk_timeline_selection *sel,
                                     const spk_timeline_stages *stages)
{
    if (!ks->timeline_kernel)
        return spk_fail_null("lstm stack: kernel %s has no timeline build", ks->name);
    spk_timeline *tl = spk_timeline_new(sel, stages, ks->stream);
    ks->recording = tl;
    return tl;
}

spk_tensor *spk_kernel_stack_forward_timeline(spk_kernel_stack *ks, const spk_tensor *x,
                                              const spk_timeline_selection *sel, const spk_timeline_stages *stages,
                                              spk_tensor **stamps, spk_timeline_clock *clock)
{
    *stamps = NULL;
    spk_timeline *tl = start_recording(ks, sel, stages);
    if (!tl)
        return NULL;
    spk_tensor *y = spk_kernel_stack_forward(ks, x);
    ks->recording = NULL;
    spk_tensor *raw = NULL;
    if (y && (!(raw = spk_timeline_read(tl, ks->stream)) || !(*stamps = spk_timeline_decode(raw, stages, 0, clock)))) {
        spk_tensor_free(y);
        y = NULL;
    }
    spk_tensor_free(raw);
    spk_timeline_free(tl);
    return y;
}

int spk_kernel_stack_time_timeline(spk_kernel_stack *ks, const spk_tensor *x, const spk_timeline_selection *sel,
                                   const spk_timeline_stages *stages, int rounds, int warmup, double *ms)
{
    spk_timeline *tl = start_recording(ks, sel, stages);
    if (!tl)
        return -1;
    int rc = spk_kernel_stack_time(ks, x, rounds, warmup, ms);
    ks->recording = NULL;
    spk_timeline_free(tl);
    return rc;
}
